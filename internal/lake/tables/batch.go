package tables

import (
	"encoding/json"

	"github.com/google/uuid"
)

// CommitInfoKey is the commitInfo field that holds a lake-writer commit's
// BatchBounds.
const CommitInfoKey = "omlBatch"

// BatchBounds are the (start, end] bounds the lake writer records in every
// commit's commitInfo as "omlBatch".
type BatchBounds struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// CatchUp marks a commit that brought one table of a tenant up to the
	// frontier after its chain stopped being forked (not a regular batch).
	CatchUp bool `json:"catchUp,omitempty"`
	// The database history the batch was read from (lakewriter's
	// continuity.go): the cluster's system identifier and timeline, how
	// many outbox rows (start, end] held, and the last of them (Anchor).
	// Absent in commits written before oml recorded them.
	SystemIdentifier string  `json:"systemIdentifier,omitempty"`
	Timeline         int64   `json:"timeline,omitempty"`
	Rows             *int64  `json:"rows,omitempty"`
	Anchor           *Anchor `json:"anchor,omitempty"`
}

// Anchor recognises the last outbox row of a batch: its position and a
// digest of its content, including the hash of the journal event it cites
// (which, through prev_hash, stands for the tenant's whole chain up to it).
// The digest is computed by the lake writer (anchorDigest).
type Anchor struct {
	Seq        int64     `json:"seq"`
	Tenant     uuid.UUID `json:"tenant"`
	JournalSeq int64     `json:"journalSeq"`
	EventHash  string    `json:"eventHash"` // hex of oml.journal.hash
	Digest     string    `json:"digest"`    // hex sha256, see lakewriter's anchorDigest
}

// CommitInfo is the commitInfo extra that records b (delta.Commit.Extra).
func (b BatchBounds) CommitInfo() map[string]any { return map[string]any{CommitInfoKey: b} }

// ParseBatchBounds reads the BatchBounds from a commit's raw commitInfo;
// ok=false when the commit carries none (not a lake-writer batch commit:
// maintenance, or one written before the bounds were recorded).
func ParseBatchBounds(commitInfo json.RawMessage) (BatchBounds, bool) {
	var ci struct {
		OmlBatch *BatchBounds `json:"omlBatch"`
	}
	if len(commitInfo) == 0 || json.Unmarshal(commitInfo, &ci) != nil || ci.OmlBatch == nil {
		return BatchBounds{}, false
	}
	return *ci.OmlBatch, true
}

package delta

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Protocol is the protocol action: the reader and writer versions (and, at
// reader 3 / writer 7, the explicit feature lists) a client must implement.
type Protocol struct {
	MinReaderVersion int      `json:"minReaderVersion"`
	MinWriterVersion int      `json:"minWriterVersion"`
	ReaderFeatures   []string `json:"readerFeatures,omitempty"`
	WriterFeatures   []string `json:"writerFeatures,omitempty"`
}

// Format is metaData.format.
type Format struct {
	Provider string            `json:"provider"`
	Options  map[string]string `json:"options"`
}

// Metadata is the metaData action. A later metaData fully replaces an
// earlier one.
type Metadata struct {
	ID               string            `json:"id"`
	Name             *string           `json:"name,omitempty"`
	Description      *string           `json:"description,omitempty"`
	Format           Format            `json:"format"`
	SchemaString     string            `json:"schemaString"`
	PartitionColumns []string          `json:"partitionColumns"`
	Configuration    map[string]string `json:"configuration"`
	CreatedTime      *int64            `json:"createdTime,omitempty"`
}

// DeletionVector is only recognized so that its presence can be refused:
// oml does not apply deletion vectors.
type DeletionVector struct {
	StorageType    string `json:"storageType"`
	PathOrInlineDv string `json:"pathOrInlineDv"`
	Offset         *int32 `json:"offset,omitempty"`
	SizeInBytes    int32  `json:"sizeInBytes"`
	Cardinality    int64  `json:"cardinality"`
}

// Add is the add action: a data file that is part of the table.
// Path is the URI-encoded relative path exactly as written in the log;
// DecodedPath decodes it (once).
type Add struct {
	Path             string             `json:"path"`
	PartitionValues  map[string]*string `json:"partitionValues"`
	Size             int64              `json:"size"`
	ModificationTime int64              `json:"modificationTime"`
	DataChange       bool               `json:"dataChange"`
	// Stats is the per-file statistics JSON, itself a string inside the
	// action. Empty when absent.
	Stats          string             `json:"stats,omitempty"`
	Tags           map[string]*string `json:"tags,omitempty"`
	DeletionVector *DeletionVector    `json:"deletionVector,omitempty"`
	// Row-tracking and clustering fields: recognized, refused when set.
	BaseRowID               *int64  `json:"baseRowId,omitempty"`
	DefaultRowCommitVersion *int64  `json:"defaultRowCommitVersion,omitempty"`
	ClusteringProvider      *string `json:"clusteringProvider,omitempty"`
}

// Remove is the remove action: a file that is no longer part of the table
// (a tombstone until it expires).
type Remove struct {
	Path                 string             `json:"path"`
	DeletionTimestamp    *int64             `json:"deletionTimestamp,omitempty"`
	DataChange           bool               `json:"dataChange"`
	ExtendedFileMetadata *bool              `json:"extendedFileMetadata,omitempty"`
	PartitionValues      map[string]*string `json:"partitionValues,omitempty"`
	Size                 *int64             `json:"size,omitempty"`
	Stats                string             `json:"stats,omitempty"`
	Tags                 map[string]*string `json:"tags,omitempty"`
	DeletionVector       *DeletionVector    `json:"deletionVector,omitempty"`
	BaseRowID            *int64             `json:"baseRowId,omitempty"`
	// DefaultRowCommitVersion is recognized so it round-trips.
	DefaultRowCommitVersion *int64 `json:"defaultRowCommitVersion,omitempty"`
}

// removeExtended is Remove's wire shape when extendedFileMetadata is true:
// the same fields (the conversion below fails to compile if they drift), but
// partitionValues is always written, as {} for an unpartitioned table —
// the protocol says extendedFileMetadata means partitionValues and size are
// present, and omitempty would drop an empty map.
type removeExtended struct {
	Path                    string             `json:"path"`
	DeletionTimestamp       *int64             `json:"deletionTimestamp,omitempty"`
	DataChange              bool               `json:"dataChange"`
	ExtendedFileMetadata    *bool              `json:"extendedFileMetadata,omitempty"`
	PartitionValues         map[string]*string `json:"partitionValues"`
	Size                    *int64             `json:"size,omitempty"`
	Stats                   string             `json:"stats,omitempty"`
	Tags                    map[string]*string `json:"tags,omitempty"`
	DeletionVector          *DeletionVector    `json:"deletionVector,omitempty"`
	BaseRowID               *int64             `json:"baseRowId,omitempty"`
	DefaultRowCommitVersion *int64             `json:"defaultRowCommitVersion,omitempty"`
}

// MarshalJSON writes partitionValues whenever extendedFileMetadata is true
// (without HTML escaping, like EncodeCommit: paths stay byte for byte).
func (r Remove) MarshalJSON() ([]byte, error) {
	type plain Remove // no methods: no recursion
	if r.ExtendedFileMetadata == nil || !*r.ExtendedFileMetadata {
		return marshalNoEscape(plain(r))
	}
	w := removeExtended(r)
	if w.PartitionValues == nil {
		w.PartitionValues = map[string]*string{}
	}
	return marshalNoEscape(w)
}

// Txn is the txn (application transaction) action: the latest version an
// application (appId) committed. Delta keeps only the newest per appId.
type Txn struct {
	AppID       string `json:"appId"`
	Version     int64  `json:"version"`
	LastUpdated *int64 `json:"lastUpdated,omitempty"`
}

// Action is one line of a commit file (or one row of a checkpoint). Exactly
// one field is set. commitInfo is kept as opaque JSON: it is free-form and
// other engines put booleans and nulls where one would expect strings.
// cdc and domainMetadata are recognized and ignored by readers (cdc is only
// a change-feed side channel; domainMetadata is gated by the writer); sidecar
// and checkpointMetadata only exist in v2 checkpoints and are refused.
type Action struct {
	Protocol           *Protocol       `json:"protocol,omitempty"`
	MetaData           *Metadata       `json:"metaData,omitempty"`
	Add                *Add            `json:"add,omitempty"`
	Remove             *Remove         `json:"remove,omitempty"`
	Txn                *Txn            `json:"txn,omitempty"`
	CommitInfo         json.RawMessage `json:"commitInfo,omitempty"`
	CDC                json.RawMessage `json:"cdc,omitempty"`
	DomainMetadata     json.RawMessage `json:"domainMetadata,omitempty"`
	Sidecar            json.RawMessage `json:"sidecar,omitempty"`
	CheckpointMetadata json.RawMessage `json:"checkpointMetadata,omitempty"`
}

// Kind names the action ("add", "remove", ...), or "unknown" for a line
// whose only keys are action types this code does not know.
func (a *Action) Kind() string {
	switch {
	case a.Protocol != nil:
		return "protocol"
	case a.MetaData != nil:
		return "metaData"
	case a.Add != nil:
		return "add"
	case a.Remove != nil:
		return "remove"
	case a.Txn != nil:
		return "txn"
	case isSet(a.CommitInfo):
		return "commitInfo"
	case isSet(a.CDC):
		return "cdc"
	case isSet(a.DomainMetadata):
		return "domainMetadata"
	case isSet(a.Sidecar):
		return "sidecar"
	case isSet(a.CheckpointMetadata):
		return "checkpointMetadata"
	}
	return "unknown"
}

func isSet(r json.RawMessage) bool { return len(r) > 0 && !bytes.Equal(r, []byte("null")) }

func (a *Action) count() int {
	n := 0
	for _, b := range []bool{a.Protocol != nil, a.MetaData != nil, a.Add != nil, a.Remove != nil, a.Txn != nil,
		isSet(a.CommitInfo), isSet(a.CDC), isSet(a.DomainMetadata), isSet(a.Sidecar), isSet(a.CheckpointMetadata)} {
		if b {
			n++
		}
	}
	return n
}

// ErrCorruptLog marks a log entry that is not valid Delta: garbage JSON, an
// action missing a required field, a gap in the versions.
var ErrCorruptLog = errors.New("corrupt Delta log")

// validate checks the required fields of each action kind.
func (a *Action) validate() error {
	if a.count() > 1 {
		return fmt.Errorf("%w: a line holds %d actions, want one", ErrCorruptLog, a.count())
	}
	switch {
	case a.Protocol != nil:
		if a.Protocol.MinReaderVersion < 1 || a.Protocol.MinWriterVersion < 1 {
			return fmt.Errorf("%w: protocol action with minReaderVersion %d, minWriterVersion %d (both must be >= 1)",
				ErrCorruptLog, a.Protocol.MinReaderVersion, a.Protocol.MinWriterVersion)
		}
	case a.MetaData != nil:
		if a.MetaData.ID == "" {
			return fmt.Errorf("%w: metaData action without an id", ErrCorruptLog)
		}
	case a.Add != nil:
		if a.Add.Path == "" {
			return fmt.Errorf("%w: add action without a path", ErrCorruptLog)
		}
		if a.Add.Size < 0 {
			return fmt.Errorf("%w: add action for %q with negative size %d", ErrCorruptLog, a.Add.Path, a.Add.Size)
		}
	case a.Remove != nil:
		if a.Remove.Path == "" {
			return fmt.Errorf("%w: remove action without a path", ErrCorruptLog)
		}
	case a.Txn != nil:
		if a.Txn.AppID == "" {
			return fmt.Errorf("%w: txn action without an appId", ErrCorruptLog)
		}
	case isSet(a.CommitInfo):
		if a.CommitInfo[0] != '{' {
			return fmt.Errorf("%w: commitInfo is not a JSON object", ErrCorruptLog)
		}
	}
	return nil
}

// DecodeAction parses one JSON action line.
func DecodeAction(line []byte) (Action, error) {
	var a Action
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return a, fmt.Errorf("%w: an action line is not a JSON object", ErrCorruptLog)
	}
	if err := json.Unmarshal(line, &a); err != nil {
		return a, fmt.Errorf("%w: %v", ErrCorruptLog, err)
	}
	return a, a.validate()
}

// maxLineBytes bounds one action line (a metaData with a very wide schema
// is the largest legitimate one).
const maxLineBytes = 64 << 20

// DecodeCommit reads the newline-delimited actions of one commit file and
// calls fn for each, in file order. A missing trailing newline is accepted
// (delta-rs writes files without one); blank lines are skipped; anything
// that is not a valid action fails the whole commit.
func DecodeCommit(r io.Reader, fn func(Action) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4<<10), maxLineBytes)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		a, err := DecodeAction(b)
		if err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
		if err := fn(a); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrCorruptLog, err)
	}
	return nil
}

// DecodeCommitBytes is DecodeCommit over a whole commit file in memory,
// collecting the actions. It splits lines in place (no scanner buffer per
// commit: replaying thousands of small commits must not allocate a line
// buffer for each).
func DecodeCommitBytes(b []byte) ([]Action, error) {
	out := make([]Action, 0, bytes.Count(b, []byte{'\n'})+1)
	for line := 1; len(b) > 0; line++ {
		var l []byte
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			l, b = b[:i], b[i+1:]
		} else {
			l, b = b, nil
		}
		l = bytes.TrimSpace(l)
		if len(l) == 0 {
			continue
		}
		a, err := DecodeAction(l)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// EncodeCommit renders actions as one commit file: one compact JSON object
// per line, each line ending in '\n'. Adds, txns and commitInfos (every
// line of a lake writer's commit) are appended by hand (appendAction),
// the others through encoding/json; the bytes are encoding/json's either way.
func EncodeCommit(actions []Action) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for i := range actions {
		if n := actions[i].count(); n != 1 {
			return nil, fmt.Errorf("delta: action %d holds %d actions, want exactly one", i, n)
		}
		b, ok, err := appendAction(buf.AvailableBuffer(), &actions[i])
		if err == nil && !ok {
			err = enc.Encode(&actions[i]) // Encode appends '\n'
		} else if ok {
			buf.Write(append(b, '\n'))
		}
		if err != nil {
			return nil, fmt.Errorf("delta: encoding action %d: %w", i, err)
		}
	}
	return buf.Bytes(), nil
}

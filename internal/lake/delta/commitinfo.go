package delta

import (
	"encoding/json"
)

// CommitInfo is the part of a commitInfo action oml interprets. The action
// itself is free-form; Raw keeps all of it.
type CommitInfo struct {
	Timestamp           int64
	Operation           string
	OperationParameters map[string]any
	OperationMetrics    map[string]any
	EngineInfo          string
	// CommitID is oml's unique id of the commit attempt ("txnId" in Spark's
	// spelling), used to recognize our own commit when an ambiguous write is
	// read back.
	CommitID string
	Raw      json.RawMessage
}

// ParseCommitInfo decodes the fields oml uses from a commitInfo object;
// fields of unexpected types are ignored rather than failing the log.
func ParseCommitInfo(raw json.RawMessage) CommitInfo {
	ci := CommitInfo{Raw: raw}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return ci
	}
	_ = json.Unmarshal(m["timestamp"], &ci.Timestamp)
	_ = json.Unmarshal(m["operation"], &ci.Operation)
	_ = json.Unmarshal(m["operationParameters"], &ci.OperationParameters)
	_ = json.Unmarshal(m["operationMetrics"], &ci.OperationMetrics)
	_ = json.Unmarshal(m["engineInfo"], &ci.EngineInfo)
	if ci.EngineInfo == "" {
		_ = json.Unmarshal(m["clientVersion"], &ci.EngineInfo)
	}
	_ = json.Unmarshal(m["txnId"], &ci.CommitID)
	return ci
}

package lakewriter

import "unicode/utf8"

// invalidUTF8 names the first journal field of ev that is not valid UTF-8,
// or "". Bronze writes event_type, key_id and payload into Parquet string
// columns, which must hold UTF-8; the append path only ever writes UTF-8
// (JSON payloads), so a field that is not is a forged journal row: the
// outbox row citing it is poison, never a lake row (oml chain verify
// reports the event itself, as bad-payload or hash-mismatch).
func invalidUTF8(ev event) string {
	switch {
	case !utf8.ValidString(ev.eventType):
		return "event_type"
	case !utf8.ValidString(ev.keyID):
		return "key_id"
	case !utf8.Valid(ev.payload):
		return "payload"
	}
	return ""
}

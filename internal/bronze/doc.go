// Package bronze reads a tenant's bronze.events Delta table
// (<lake>/<tenant>/bronze/events) as the lake's copy of the signed journal:
// every row is one journal event's full envelope (seq, prev_hash, hash,
// signature, key_id, event_type, recorded_at, the exact payload) plus the
// outbox seq that carried it.
//
// That makes bronze a second witness of every chain, beside the signed
// heads in _oml_witness/: a chain whose newest bronze event is above its
// journal head lost its tail, a different hash at the same seq is a fork
// (chainverify.ForkCheck), and the lost events can be re-inserted from here
// (internal/recovery, `oml chain restore-tail`).
//
// Reads are cheap where they can be: Head reads only the table's log and
// then the one or few data files whose seq statistics reach the newest seq;
// Events reads only the files whose statistics reach above a seq.
//
// The table is written by internal/lakewriter; its location and schema are
// internal/lake/tables'. This package reads columns by name and never writes.
package bronze

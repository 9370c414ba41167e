package lakewriter

import (
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/tables"
)

func str(name string) delta.StructField { return delta.Field(name, delta.Prim(delta.TypeString), true) }
func long(name string) delta.StructField {
	return delta.Field(name, delta.Prim(delta.TypeLong), true)
}

// Column positions are fixed by these schemas; the row builders below use
// the same order.
var (
	bronzeSchema = &delta.StructType{Fields: []delta.StructField{
		str("tenant_id"),
		long("seq"),
		str("event_type"),
		delta.Field("recorded_at", delta.Prim(delta.TypeTimestamp), true),
		delta.Field("prev_hash", delta.Prim(delta.TypeBinary), true),
		delta.Field("hash", delta.Prim(delta.TypeBinary), true),
		delta.Field("signature", delta.Prim(delta.TypeBinary), true),
		str("key_id"),
		str("payload"),
		long("outbox_seq"),
	}}

	silverSchema = &delta.StructType{Fields: []delta.StructField{
		str("artifact_id"),
		delta.Field("version", delta.Prim(delta.TypeInteger), true),
		str("tenant_id"),
		str("workarea_id"),
		str("writer"),
		str("principal"),
		str("provenance"),
		str("plaintext_digest"),
		str("ciphertext_digest"),
		delta.Field("body", delta.Prim(delta.TypeBinary), true),
		str("state"),
		str("promoted_by"),
		long("submitted_seq"),
		long("promoted_seq"),
		long("journal_seq"),
		long("outbox_seq"),
		delta.Field("updated_at", delta.Prim(delta.TypeTimestamp), true),
	}}

	goldSchema = &delta.StructType{Fields: []delta.StructField{
		str("tenant_id"),
		long("journal_seq"),
		str("artifact_id"),
		delta.Field("version", delta.Prim(delta.TypeInteger), true),
		str("payload"),
		long("outbox_seq"),
	}}
)

// silver column positions used by MERGE.
const (
	silArtifact   = 0
	silVersion    = 1
	silState      = 10
	silJournalSeq = 14
	silOutboxSeq  = 15
	silUpdatedAt  = 16
)

func schemaFor(k tables.Kind) *delta.StructType {
	switch k {
	case tables.Bronze:
		return bronzeSchema
	case tables.Silver:
		return silverSchema
	default:
		return goldSchema
	}
}

func specFor(k tables.TableKey) delta.TableSpec {
	return delta.TableSpec{
		Schema:      schemaFor(k.Kind),
		Name:        string(k.Kind),
		Description: "oml " + string(k.Kind) + " of tenant " + k.Tenant.String() + " (written by oml lake drain)",
	}
}

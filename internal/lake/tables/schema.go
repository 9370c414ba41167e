package tables

import "github.com/omlhq/oml/internal/lake/delta"

// Column positions are fixed by these schemas, and the schemas are built
// from the column constants (rows.go): fields[c] is column c, so a
// column's constant, its name and its position in a row cannot disagree.

func str(name string) delta.StructField { return delta.Field(name, delta.Prim(delta.TypeString), true) }
func long(name string) delta.StructField {
	return delta.Field(name, delta.Prim(delta.TypeLong), true)
}
func integer(name string) delta.StructField {
	return delta.Field(name, delta.Prim(delta.TypeInteger), true)
}
func binary(name string) delta.StructField {
	return delta.Field(name, delta.Prim(delta.TypeBinary), true)
}
func timestamp(name string) delta.StructField {
	return delta.Field(name, delta.Prim(delta.TypeTimestamp), true)
}

var (
	bronzeFields = [bronzeColumns]delta.StructField{
		BronzeTenantID:   str("tenant_id"),
		BronzeSeq:        long("seq"),
		BronzeEventType:  str("event_type"),
		BronzeRecordedAt: timestamp("recorded_at"),
		BronzePrevHash:   binary("prev_hash"),
		BronzeHash:       binary("hash"),
		BronzeSignature:  binary("signature"),
		BronzeKeyID:      str("key_id"),
		BronzePayload:    str("payload"),
		BronzeOutboxSeq:  long("outbox_seq"),
	}
	silverFields = [silverColumns]delta.StructField{
		SilverArtifactID:       str("artifact_id"),
		SilverVersion:          integer("version"),
		SilverTenantID:         str("tenant_id"),
		SilverWorkareaID:       str("workarea_id"),
		SilverWriter:           str("writer"),
		SilverPrincipal:        str("principal"),
		SilverProvenance:       str("provenance"),
		SilverPlaintextDigest:  str("plaintext_digest"),
		SilverCiphertextDigest: str("ciphertext_digest"),
		SilverBody:             binary("body"),
		SilverState:            str("state"),
		SilverPromotedBy:       str("promoted_by"),
		SilverSubmittedSeq:     long("submitted_seq"),
		SilverPromotedSeq:      long("promoted_seq"),
		SilverJournalSeq:       long("journal_seq"),
		SilverOutboxSeq:        long("outbox_seq"),
		SilverUpdatedAt:        timestamp("updated_at"),
	}
	lineageFields = [lineageColumns]delta.StructField{
		LineageTenantID:         str("tenant_id"),
		LineageArtifactID:       str("artifact_id"),
		LineageVersion:          integer("version"),
		LineageJournalSeq:       long("journal_seq"),
		LineageEventType:        str("event_type"),
		LineageEventHash:        binary("event_hash"),
		LineageRecordedAt:       timestamp("recorded_at"),
		LineageActor:            str("actor"),
		LineageReason:           str("reason"),
		LineageStateBefore:      str("state_before"),
		LineageStateAfter:       str("state_after"),
		LineageWorkareaID:       str("workarea_id"),
		LineageToWorkareaID:     str("to_workarea_id"),
		LineageWriter:           str("writer"),
		LineagePrincipal:        str("principal"),
		LineageProvenance:       str("provenance"),
		LineagePlaintextDigest:  str("plaintext_digest"),
		LineageCiphertextDigest: str("ciphertext_digest"),
		LineageSubmittedSeq:     long("submitted_seq"),
		LineagePrevJournalSeq:   long("prev_journal_seq"),
		LineageOutboxSeq:        long("outbox_seq"),
	}

	workareaFields = [workareaColumns]delta.StructField{
		WorkareaTenantID:        str("tenant_id"),
		WorkareaID:              str("workarea_id"),
		WorkareaClaims:          long("claims"),
		WorkareaPromoted:        long("promoted"),
		WorkareaDemoted:         long("demoted"),
		WorkareaReassigned:      long("reassigned"),
		WorkareaSimulationEnded: long("simulation_ended"),
		WorkareaErased:          long("erased"),
		WorkareaWriters:         delta.Field("writers", &delta.ArrayType{ElementType: delta.Prim(delta.TypeString), ContainsNull: false}, true),
		WorkareaChanges:         long("changes"),
		WorkareaFirstJournalSeq: long("first_journal_seq"),
		WorkareaFirstChangedAt:  timestamp("first_changed_at"),
		WorkareaLastJournalSeq:  long("last_journal_seq"),
		WorkareaLastChangedAt:   timestamp("last_changed_at"),
		WorkareaLastOutboxSeq:   long("last_outbox_seq"),
	}

	bronzeSchema = &delta.StructType{Fields: bronzeFields[:]}
	silverSchema = &delta.StructType{Fields: silverFields[:]}
	goldSchema   = &delta.StructType{Fields: lineageFields[:]}
	areasSchema  = &delta.StructType{Fields: workareaFields[:]}
)

// Schema is the Delta schema oml writes for tables of kind k (nil for an
// unknown kind). It is shared: do not modify it.
func (k Kind) Schema() *delta.StructType {
	switch k {
	case Bronze:
		return bronzeSchema
	case Silver:
		return silverSchema
	case Gold:
		return goldSchema
	case Workareas:
		return areasSchema
	}
	return nil
}

// Spec is what the lake writer creates the table with.
func (k TableKey) Spec() delta.TableSpec {
	return delta.TableSpec{
		Schema:      k.Kind.Schema(),
		Name:        string(k.Kind),
		Description: "oml " + string(k.Kind) + " of tenant " + k.Tenant.String() + " (written by oml lake drain)",
	}
}

// Name is the column's name in bronze.events.
func (c BronzeCol) Name() string { return bronzeFields[c].Name }

// Name is the column's name in silver.claims.
func (c SilverCol) Name() string { return silverFields[c].Name }

// Name is the column's name in gold.lineage.
func (c GoldLineageCol) Name() string { return lineageFields[c].Name }

// Name is the column's name in gold.workareas.
func (c GoldWorkareaCol) Name() string { return workareaFields[c].Name }

// OutboxSeqColumn names the column of k's rows that holds the outbox seq
// that last wrote the row: outbox_seq, or last_outbox_seq for
// gold.workareas (a row sums many outbox rows; the largest).
func (k Kind) OutboxSeqColumn() string {
	if k == Workareas {
		return WorkareaLastOutboxSeq.Name()
	}
	return BronzeOutboxSeq.Name()
}

package maintain

import (
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

// Table is one tenant table and its store (rooted at the table).
type Table struct {
	Key   tables.TableKey
	Store store.Store
}

// Tables names the tables of tenants of the given kinds (nil: all kinds)
// under the lake root, in tenant then kind order. It does not check that
// they exist (see Exists).
func Tables(lake store.Store, tenants []uuid.UUID, kinds []tables.Kind) ([]Table, error) {
	if kinds == nil {
		kinds = tables.Kinds
	}
	var out []Table
	for _, tn := range tenants {
		for _, k := range kinds {
			key := tables.TableKey{Tenant: tn, Kind: k}
			st, err := key.Store(lake)
			if err != nil {
				return nil, err
			}
			out = append(out, Table{Key: key, Store: st})
		}
	}
	return out, nil
}

// ParseKind accepts bronze, silver, gold (gold.lineage) or workareas
// (gold.workareas), or the outbox target names.
func ParseKind(s string) (tables.Kind, error) {
	switch s {
	case "bronze", string(tables.Bronze):
		return tables.Bronze, nil
	case "silver", string(tables.Silver):
		return tables.Silver, nil
	case "gold", "lineage", string(tables.Gold):
		return tables.Gold, nil
	case "workareas", string(tables.Workareas):
		return tables.Workareas, nil
	}
	return "", fmt.Errorf("unknown table %q: use bronze, silver, gold (gold.lineage) or workareas (gold.workareas)", s)
}

// SortKey is the column order maintenance sorts a table's rows by when it
// rewrites them: silver by (artifact_id, version), so the lake writer's
// MERGE, which prunes files by artifact_id min/max, reads fewer files;
// bronze by seq and gold by journal_seq, the order readers scan them in;
// gold.workareas by workarea_id (its MERGE prunes files by it too).
func SortKey(k tables.Kind) []string {
	switch k {
	case tables.Silver:
		return []string{tables.SilverArtifactID.Name(), tables.SilverVersion.Name()}
	case tables.Bronze:
		return []string{tables.BronzeSeq.Name()}
	case tables.Gold:
		return []string{tables.LineageJournalSeq.Name()}
	case tables.Workareas:
		return []string{tables.WorkareaID.Name()}
	}
	return nil
}

// notFound reports a table that was never created (a tenant with no
// events of that kind yet): nothing to maintain, not an error.
func notFound(err error) bool { return errors.Is(err, delta.ErrTableNotFound) }

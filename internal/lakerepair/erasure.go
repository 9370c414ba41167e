package lakerepair

import (
	"context"
	"fmt"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

// Erasure and repair: a repair never writes an erased claim's body.
//
// `oml lake maintain` (erase-bodies) nulls the body of every silver row of
// an erased claim by rewriting the files holding one (docs/erasure.md).
// A rewind re-adds files removed since the restored version — among them
// the files erase-bodies replaced, if it ran after that version — which
// would bring the erased ciphertext back into the live table until the
// next maintain. So before a rewind commits, every re-added silver file
// holding an erased row's body is replaced by a copy with those bodies
// null (the same nulling erase-bodies does); the rows a row-level repair
// writes (the kept rest of a rewritten file, the rows put back) and the
// rows it archives get the same treatment: the archive is never vacuumed,
// so an erased body must not land there either.
//
// Which rows: those whose state is erased, with a body — erase-bodies'
// own predicate (state = 'erased' AND body IS NOT NULL). A row's state is
// the journal's at the table's txn version, so these are exactly the
// claims the journal erased at or below it. A claim the journal erased
// later is not nulled here (reconcile compares the row at the cutoff,
// where it is still promoted, body and all; nulling it would be a
// digest-mismatch the next pass puts back): the drain re-applies that
// erasure, and it goes through erasure's ordinary window until the next
// maintain (TestRepair_RewindPastAMaintainThatErasedBodies_NoErasedBodyComesBack
// caught the first version, which nulled by the fold's state, looping).

// stateErased is silver's state of an erased claim.
const stateErased = "erased"

// eraser nulls erased rows' bodies in full silver rows of one layout (a
// snapshot's scan order, or tables' row order).
type eraser struct {
	state, body int
}

// newEraser is the eraser for key's table in snap's scan order (snap nil:
// tables' row order, the rows lakewriter builds); nil for a table without
// bodies.
func newEraser(key tables.TableKey, snap *delta.Snapshot) (*eraser, error) {
	if key.Kind != tables.Silver {
		return nil, nil
	}
	e := &eraser{state: int(tables.SilverState), body: int(tables.SilverBody)}
	if snap != nil {
		idx, err := columnIndexes(snap, []string{tables.SilverState.Name(), tables.SilverBody.Name()})
		if err != nil {
			return nil, err
		}
		e.state, e.body = idx[0], idx[1]
	}
	return e, nil
}

// holds reports whether r is an erased row that still carries its body.
func (e *eraser) holds(r pq.Row) bool {
	if e == nil {
		return false
	}
	st, _ := r[e.state].(string)
	return st == stateErased && r[e.body] != nil
}

// scrub nulls the erased rows' bodies in place; it returns how many.
func (e *eraser) scrub(rows []pq.Row) int {
	n := 0
	for _, r := range rows {
		if e.holds(r) {
			r[e.body] = nil
			n++
		}
	}
	return n
}

// scrubReadds replaces, in tp.readds, every re-added silver file that
// holds an erased row's body by a copy without it (written with w); it
// returns how many bodies were nulled. restored is the snapshot the files
// are re-added from.
func scrubReadds(ctx context.Context, st store.Store, w *delta.Writer, restored *delta.Snapshot, tp *TablePlan) (int, error) {
	if tp.key.Kind != tables.Silver || len(tp.readds) == 0 || restored == nil {
		return 0, nil
	}
	e, err := newEraser(tp.key, restored)
	if err != nil {
		return 0, err
	}
	nulled := 0
	for i, f := range tp.readds {
		var rows []pq.Row
		hit := false
		err := restored.Scan(ctx, st, delta.ScanOptions{Files: []*delta.Add{f}}, func(_ *delta.Add, b []pq.Row) error {
			for _, r := range b {
				hit = hit || e.holds(r)
				rows = append(rows, append(pq.Row(nil), r...))
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("read %s of %s to null erased bodies: %w", f.Path, tp.Path, err)
		}
		if !hit {
			continue
		}
		nulled += e.scrub(rows)
		add, err := w.WriteFile(ctx, map[string]*string{}, rows)
		if err != nil {
			return 0, fmt.Errorf("write %s without erased bodies: %w", tp.Path, err)
		}
		tp.readds[i] = add
	}
	return nulled, nil
}

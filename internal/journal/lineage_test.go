package journal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/journal"
)

// Every change to a promoted claim — its promotion, and each later
// demotion, reassignment, simulation end and erasure — has exactly one
// gold.lineage outbox row, emitted by the append path in the event's
// transaction, and its payload is what ImpliedLineage derives from the
// three signed events it cites (the change, the claim's submission, the
// claim's previous change). Claims that were never promoted have none.
func TestLineage_OneRowPerChangeToAPromotedClaim_ImpliedByTheJournal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	dek := make([]byte, 32)
	require.NoError(t, b.append(t, append(aPromotedTwice(t, dek),
		journal.MustNew(journal.ClaimDemoted{ArtifactID: "a", Version: 2, By: "carol", Reason: "wrong"}),
		submission(t, "a", 3, "alice", "human", dek), // held: erased below, no lineage
		submission(t, "s", 1, "sim-agent", "simulation", nil),
		journal.MustNew(journal.ClaimPromoted{ArtifactID: "s", Version: 1, By: "bob"}),
		journal.MustNew(journal.SimulationEnded{SimulationID: "sim-1", By: "ops", Claims: []journal.ClaimRef{{ArtifactID: "s", Version: 1}}}),
		submission(t, "r", 1, "alice", "human", nil),
		journal.MustNew(journal.ClaimPromoted{ArtifactID: "r", Version: 1, By: "bob"}),
		journal.MustNew(journal.ClaimDemoted{ArtifactID: "r", Version: 1, By: "carol"}),
		journal.MustNew(journal.ClaimReassigned{ArtifactID: "r", Version: 1, By: "ops", ToWorkareaID: "wa-2", Reason: "moved"}),
		submission(t, "h", 1, "alice", "human", nil),
		journal.MustNew(journal.ClaimReassigned{ArtifactID: "h", Version: 1, By: "ops", ToWorkareaID: "wa-2"}))...))
	require.NoError(t, b.append(t, journal.MustNew(journal.ClaimErased{ArtifactID: "a", By: "dpo", Reason: "gdpr"})))
	require.NoError(t, b.append(t, journal.MustNew(journal.ClaimErased{ArtifactID: "r", By: "dpo"})))

	evs, err := journal.ReadChain(ctx, b.pool, b.tn)
	require.NoError(t, err)
	decoded := map[int64]journal.Payload{}
	for _, e := range evs {
		p, err := journal.Decode(e.Type, e.Payload)
		require.NoError(t, err)
		decoded[int64(e.Seq)] = p
	}
	var got []string
	for _, o := range emittedRows(t, b, b.tn) {
		if o.Target != journal.TargetGoldLineage {
			continue
		}
		var p journal.LineagePayload
		require.NoError(t, json.Unmarshal(o.Payload, &p))
		sub, ok := decoded[p.SubmittedSeq].(journal.ClaimSubmitted)
		require.True(t, ok, "row %d: submitted_seq %d is a claim.submitted", o.Seq, p.SubmittedSeq)
		want, err := journal.ImpliedLineage(decoded[o.JournalSeq], o.JournalSeq, *o.ArtifactID, *o.Version, sub, p.SubmittedSeq, decoded[p.PrevSeq], p.PrevSeq)
		require.NoError(t, err, "row %d", o.Seq)
		require.Equal(t, want, p, "row %d", o.Seq)
		wantOp := journal.OpRetract
		if p.StateAfter == journal.StatePromoted {
			wantOp = journal.OpMaterialize
		}
		require.Equal(t, wantOp, o.Op, "row %d", o.Seq)
		got = append(got, fmt.Sprintf("%s v%d %s->%s", *o.ArtifactID, *o.Version, p.StateBefore, p.StateAfter))
	}
	require.Equal(t, []string{
		"a v1 held->promoted",
		"a v2 held->promoted",
		"a v2 promoted->demoted",
		"s v1 held->promoted",
		"s v1 promoted->simulation_ended",
		"r v1 held->promoted",
		"r v1 promoted->demoted",
		"r v1 demoted->reassigned",
		"a v1 promoted->erased",
		"a v2 demoted->erased",
		"r v1 reassigned->erased",
	}, got)
}

// ImpliedLineage refuses the rows no valid chain implies.
func TestImpliedLineage_RefusesWhatNoChainImplies(t *testing.T) {
	t.Parallel()
	sub := journal.ClaimSubmitted{ArtifactID: "a", Version: 1, WorkareaID: "wa", Writer: "alice", Provenance: "human"}
	prom := journal.ClaimPromoted{ArtifactID: "a", Version: 1, By: "bob"}
	dem := journal.ClaimDemoted{ArtifactID: "a", Version: 1, By: "carol"}
	end := journal.SimulationEnded{SimulationID: "x", By: "ops", Claims: []journal.ClaimRef{{ArtifactID: "a", Version: 1}}}

	_, err := journal.ImpliedLineage(prom, 3, "a", 1, sub, 2, sub, 2)
	require.NoError(t, err)
	_, err = journal.ImpliedLineage(dem, 4, "a", 1, sub, 2, prom, 3)
	require.NoError(t, err)

	// Each row is ImpliedLineage's arguments: the change and its seq, the
	// claim, its submission and seq, its previous change and seq.
	for name, c := range map[string]struct {
		change   journal.Payload
		seq      int64
		artifact string
		version  int
		sub      journal.ClaimSubmitted
		subSeq   int64
		prev     journal.Payload
		prevSeq  int64
	}{
		"a promotion by the writer":                               {journal.ClaimPromoted{ArtifactID: "a", Version: 1, By: "alice"}, 3, "a", 1, sub, 2, sub, 2},
		"a promotion whose previous change is not the submission": {prom, 5, "a", 1, sub, 2, dem, 4},
		"a retirement of a claim never promoted":                  {dem, 4, "a", 1, sub, 2, sub, 2},
		"a demotion of a demoted claim":                           {dem, 5, "a", 1, sub, 2, dem, 4},
		"a previous change after the change":                      {dem, 4, "a", 1, sub, 2, prom, 6},
		"another claim's submission":                              {prom, 3, "b", 1, sub, 2, sub, 2},
		"a simulation end of a human claim":                       {end, 4, "a", 1, sub, 2, prom, 3},
	} {
		_, err := journal.ImpliedLineage(c.change, c.seq, c.artifact, c.version, c.sub, c.subSeq, c.prev, c.prevSeq)
		require.Error(t, err, name)
	}
}

// Beside every gold.lineage row the append path emits its gold.workareas
// twin, next in outbox order, for the same event, op and claim and with
// the same payload; there is no other gold.workareas row.
func TestWorkareas_OneRowBesideEachLineageRow_SamePayload(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dek := make([]byte, 32)
	require.NoError(t, b.append(t, append(aPromotedTwice(t, dek),
		submission(t, "s", 1, "sim-agent", "simulation", nil),
		journal.MustNew(journal.ClaimPromoted{ArtifactID: "s", Version: 1, By: "bob"}),
		journal.MustNew(journal.SimulationEnded{SimulationID: "sim-1", By: "ops", Claims: []journal.ClaimRef{{ArtifactID: "s", Version: 1}}}),
		journal.MustNew(journal.ClaimReassigned{ArtifactID: "a", Version: 1, By: "ops", ToWorkareaID: "wa-2"}),
		submission(t, "h", 1, "alice", "human", nil),
		journal.MustNew(journal.ClaimDemoted{ArtifactID: "h", Version: 1, By: "carol"}))...))
	require.NoError(t, b.append(t, journal.MustNew(journal.ClaimErased{ArtifactID: "a", By: "dpo"})))

	rows := emittedRows(t, b, b.tn)
	lineage, areas := 0, 0
	for i, o := range rows {
		switch o.Target {
		case journal.TargetGoldLineage:
			lineage++
			require.Less(t, i+1, len(rows), "row %d has no twin", o.Seq)
			w := rows[i+1]
			require.Equal(t, journal.TargetGoldWorkareas, w.Target, "the row after lineage row %d", o.Seq)
			require.Equal(t, o.JournalSeq, w.JournalSeq)
			require.Equal(t, o.Op, w.Op)
			require.Equal(t, *o.ArtifactID, *w.ArtifactID)
			require.Equal(t, *o.Version, *w.Version)
			require.JSONEq(t, string(o.Payload), string(w.Payload))
		case journal.TargetGoldWorkareas:
			areas++
			require.Equal(t, journal.TargetGoldLineage, rows[i-1].Target, "workareas row %d follows its lineage row", o.Seq)
		}
	}
	// a v1, a v2, s v1 promoted; s ended; a v1 reassigned; a v1, a v2 erased.
	require.Equal(t, 7, lineage)
	require.Equal(t, lineage, areas)
}

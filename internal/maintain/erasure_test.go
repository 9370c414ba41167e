package maintain_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/maintain"
	"github.com/omlhq/oml/internal/reconcile"
	"github.com/omlhq/oml/internal/workload"
)

// filesHolding lists the files under dir (every file: data, log,
// checkpoints, hints, orphans) whose bytes contain needle.
func filesHolding(t *testing.T, dir string, needle []byte) []string {
	t.Helper()
	var hits []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, needle) {
			hits = append(hits, p)
		}
		return nil
	}))
	return hits
}

// The erasure sequence end to end: claim.erased journalled and the data
// key destroyed (workload), state merged into silver (lake writer), the
// bodies erased from live files (maintain), the old files vacuumed (zero
// retention, forced), and at each step erasure-status says where the
// claim is. At the end no byte of an erased claim's ciphertext remains in
// any file under the table's directory, while a live claim's does.
func TestErasure_Sequence_NoCiphertextByteRemains(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 1)
	tn := b.Tenants[0]
	b.load(t, workload.Config{Claims: 40, PromoteRatio: 1, RetractRatio: 0.7, Seed: 7, Concurrency: 1})
	b.drainAll(t, b.drainer(t, 10))

	// Ciphertexts of erased and of live claims, as silver holds them now.
	silver := b.sub(t, tn.String()+"/silver/claims")
	silverDir := filepath.Join(b.lakeDir, tn.String(), "silver", "claims")
	erased := map[string][][]byte{}
	var kept [][]byte
	for _, row := range readRows(t, silver) {
		r := tables.DecodeSilver(row)
		require.NotNil(t, r.Body, "before maintenance every silver row has its body")
		if r.State == maintain.StateErased {
			erased[r.ArtifactID] = append(erased[r.ArtifactID], r.Body)
		} else {
			kept = append(kept, r.Body)
		}
	}
	require.NotEmpty(t, erased, "the workload erased no promoted claim: the test proves nothing")
	require.NotEmpty(t, kept)
	for _, bodies := range erased {
		for _, c := range bodies {
			require.NotEmpty(t, filesHolding(t, silverDir, c), "control: the raw ciphertext is findable in the table's files")
		}
	}
	var keys int
	require.NoError(t, b.Pool.QueryRow(ctx, `SELECT count(*) FROM oml.claim_keys WHERE tenant_id = $1 AND artifact_id = ANY($2)`,
		tn, mapKeys(erased)).Scan(&keys))
	require.Zero(t, keys, "claim.erased destroys the data key in the same transaction")

	status := func(now time.Time) map[string]maintain.ErasedClaim {
		t.Helper()
		st, err := maintain.ErasureStatus(ctx, b.Pool, b.lake, &tn, now)
		require.NoError(t, err)
		out := map[string]maintain.ErasedClaim{}
		for _, c := range st {
			out[c.ArtifactID] = c
		}
		return out
	}

	// Stage: merged into silver, ciphertext still in live files.
	now := time.Now()
	st := status(now)
	for id := range erased {
		c := st[id]
		require.Truef(t, c.KeyDestroyed, "%s", id)
		require.Truef(t, c.Merged, "%s", id)
		require.Equalf(t, maintain.StageInLiveFiles, c.Stage, "%s", id)
		require.Equal(t, 7*24*time.Hour, c.Retention)
		require.False(t, c.GoneBy.Before(now.Add(c.Retention)), "not gone before a rewrite plus the retention")
	}

	// maintain decides the erase-bodies rewrite from measurements alone.
	tabs, err := maintain.Tables(b.lake, b.Tenants, []tables.Kind{tables.Silver})
	require.NoError(t, err)
	reps, err := maintain.Run(ctx, tabs, maintain.RunOptions{})
	require.NoError(t, err)
	require.Len(t, reps, 1)
	require.Equal(t, maintain.TaskEraseBodies, reps[0].Plan[0].Task)
	require.NotNil(t, reps[0].Erased)
	require.Positive(t, reps[0].Erased.BodiesNulled)
	b.verifyLake(t)
	for _, row := range readRows(t, silver) {
		if r := tables.DecodeSilver(row); r.State == maintain.StateErased {
			require.Nil(t, r.Body, "the live table holds no erased body")
		}
	}
	again, err := maintain.EraseBodies(ctx, tabs[0], maintain.EraseOptions{})
	require.NoError(t, err)
	require.EqualValues(t, -1, again.Version, "a second erase-bodies pass has nothing to rewrite")
	rep, err := reconcile.Run(ctx, b.Pool, b.lake, reconcile.Options{Tenant: &tn, StaleAfter: -1})
	require.NoError(t, err)
	require.Empty(t, rep.Findings, "reconcile accepts an erased claim's null body")

	// Stage: only removed files hold it, deletable a retention after removal.
	st = status(time.Now())
	for id := range erased {
		c := st[id]
		require.Equalf(t, maintain.StageInRemovedFiles, c.Stage, "%s", id)
		require.NotEmpty(t, c.Files)
		for _, f := range c.Files {
			require.Equal(t, "tombstoned", f.Kind)
			require.Equal(t, f.RemovedAt.Add(c.Retention), f.DeletableAt)
			require.False(t, c.GoneBy.Before(f.DeletableAt))
		}
	}

	// The guard: a retention below the table's is refused unless forced.
	_, _, err = maintain.VacuumTable(ctx, tabs[0], delta.VacuumOptions{Retention: time.Millisecond})
	require.ErrorIs(t, err, delta.ErrRetentionTooShort)
	vr, _, err := maintain.VacuumTable(ctx, tabs[0], delta.VacuumOptions{Retention: time.Millisecond, Force: true, Now: time.Now().Add(time.Second)})
	require.NoError(t, err)
	require.NotEmpty(t, vr.Deleted)

	st = status(time.Now())
	for id, bodies := range erased {
		require.Equalf(t, maintain.StageGone, st[id].Stage, "%s", id)
		require.Empty(t, st[id].Files)
		for _, c := range bodies {
			require.Emptyf(t, filesHolding(t, silverDir, c), "erased claim %s: its ciphertext is still in these files", id)
		}
	}
	for _, c := range kept {
		require.NotEmpty(t, filesHolding(t, silverDir, c), "a claim that was not erased keeps its ciphertext")
	}
	b.verifyLake(t)
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

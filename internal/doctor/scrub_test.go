package doctor_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/doctor"
	"github.com/omlhq/oml/internal/witness"
)

func editOldEvent(t *testing.T, b *bundle, tenant int, seq int64) {
	t.Helper()
	b.tamper(t, fmt.Sprintf(`UPDATE oml.journal SET payload = set_byte(payload, 5, get_byte(payload, 5) # 1) WHERE tenant_id = '%s' AND seq = %d`, b.tenants[tenant], seq))
}

// An edit below the verified heads is invisible to the incremental part of
// the check; the scrub re-verifies due chains from their genesis and finds
// it, and once found it stays found (the checkpoint moved back below it).
func TestDoctor_EditBelowTheCheckpoint_FoundByTheScrubAndEveryRunAfter(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	b.load(t, 5, 0, 1)
	requireStatus(t, b.doctor(t, nil), doctor.IDChain, doctor.StatusOK)
	editOldEvent(t, b, 0, 2)

	// Verified in full moments ago: not due for the scrub yet.
	c := requireStatus(t, b.doctor(t, nil), doctor.IDChain, doctor.StatusOK)
	require.Equal(t, 0, c.Data["scrubbed_chains"])

	due := func(th *doctor.Thresholds) { th.ScrubPeriod = time.Nanosecond }
	c = requireStatus(t, b.doctor(t, due), doctor.IDChain, doctor.StatusFail)
	require.Equal(t, 2, c.Data["scrubbed_chains"])
	require.Contains(t, strings.Join(c.Details, "\n"), "tenant-00")
	require.Contains(t, strings.Join(c.Details, "\n"), "hash-mismatch")
	require.Equal(t, 1, c.Data["checkpoints_invalidated"])

	for range 2 {
		c = requireStatus(t, b.doctor(t, nil), doctor.IDChain, doctor.StatusFail)
		require.Contains(t, strings.Join(c.Details, "\n"), "first bad seq 2: hash-mismatch")
	}
}

// After a plain `oml chain verify` found an old edit, the very next doctor
// run finds it too, with no scrub at all.
func TestDoctor_AfterAPlainVerifyFoundAnOldEdit_TheNextRunFindsIt(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	b.load(t, 5, 0, 2)
	requireStatus(t, b.doctor(t, nil), doctor.IDChain, doctor.StatusOK)
	editOldEvent(t, b, 1, 3)
	rep, err := chainverify.VerifyDB(context.Background(), b.pool, chainverify.DBOptions{})
	require.NoError(t, err)
	require.Len(t, rep.Findings, 1)

	noScrub := func(th *doctor.Thresholds) { th.ScrubEvents = 0 }
	c := requireStatus(t, b.doctor(t, noScrub), doctor.IDChain, doctor.StatusFail)
	require.Contains(t, strings.Join(c.Details, "\n"), "tenant-01")
}

func TestDoctor_LastFullPassOlderThanTheScrubPeriod_Warns(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	b.load(t, 3, 0, 3)
	c := requireStatus(t, b.doctor(t, nil), doctor.IDChain, doctor.StatusOK)
	require.NotNil(t, c.Data["last_full_pass"])
	require.Contains(t, c.Summary, "every event re-verified since")

	stale := func(th *doctor.Thresholds) { th.ScrubEvents, th.ScrubPeriod = 0, time.Nanosecond }
	c = requireStatus(t, b.doctor(t, stale), doctor.IDChain, doctor.StatusWarn)
	require.Contains(t, strings.Join(c.Details, "\n"), "older than --scrub-period")
}

func TestDoctor_GarbageWitness_FailsTheForkCheck(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	b.load(t, 3, 0, 4)
	b.witnessAll(t)
	requireStatus(t, b.doctor(t, nil), doctor.IDFork, doctor.StatusOK)
	require.NoError(t, b.lake.PutIfAbsent(context.Background(), witness.Key(b.tenants[0], 1000), []byte("garbage")))
	c := requireStatus(t, b.doctor(t, nil), doctor.IDFork, doctor.StatusFail)
	require.Contains(t, strings.Join(c.Details, "\n"), "bad-witness at seq 1000")
	require.Len(t, c.Data["untrusted_witnesses"], 1)
}

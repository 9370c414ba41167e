package chainverify_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chainverify"
)

// providerEvents is the fixture's provider chain: the root key.issued and
// one tenant.created per tenant.
const providerEvents = 4

func flipProviderSignature(t *testing.T, d *deployment, seq int64) {
	t.Helper()
	d.tamper(t, func(tx pgx.Tx) {
		mustExec(t, tx, `UPDATE oml.journal SET signature = set_byte(signature, 3, get_byte(signature, 3) # 1) WHERE tenant_id = $1 AND seq = $2`, chainverify.ProviderTenant, seq)
	})
}

// The fast path reads the provider chain from its genesis but skips the
// signatures up to its checkpoint; every event is still hash-checked, so
// an edit of a provider event below the checkpoint is found on the fast
// path, with no scrub, and the checkpoint moves back below it.
func TestVerifyDB_ProviderChainBelowItsCheckpoint_SignaturesSkippedButHashChecked(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	full := verify(t, d, chainverify.DBOptions{})
	require.Empty(t, full.Findings)
	require.Zero(t, full.ProviderSignaturesSkipped, "a plain verify checks every signature")

	fast := verify(t, d, chainverify.DBOptions{SinceCheckpoint: true})
	require.Empty(t, fast.Findings)
	require.EqualValues(t, providerEvents, fast.ProviderSignaturesSkipped)
	require.Equal(t, *full.LastFullPass, *fast.LastFullPass, "skipped signatures are no new full pass")

	flipPayloadByte(t, d, chainverify.ProviderTenant, 2)
	rep := verify(t, d, chainverify.DBOptions{SinceCheckpoint: true})
	requireFinding(t, rep, chainverify.ProviderTenant, 2, chainverify.ReasonHashMismatch)
	cp, _ := checkpoint(t, d, chainverify.ProviderTenant)
	require.EqualValues(t, 1, cp, "the provider checkpoint must move back below the finding")
}

// When the provider chain breaks before its checkpoint, the signatures
// held back are verified after all: the first bad event is what a full
// run reports (here a bad signature below the broken link), not the link.
func TestVerifyDB_ProviderChainBrokenBelowItsCheckpoint_HeldSignaturesAreVerified(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	require.Empty(t, verify(t, d, chainverify.DBOptions{}).Findings)
	flipProviderSignature(t, d, 2)
	d.tamper(t, func(tx pgx.Tx) {
		mustExec(t, tx, `UPDATE oml.journal SET prev_hash = set_byte(prev_hash, 0, get_byte(prev_hash, 0) # 1) WHERE tenant_id = $1 AND seq = 3`, chainverify.ProviderTenant)
	})
	rep := verify(t, d, chainverify.DBOptions{SinceCheckpoint: true})
	requireFinding(t, rep, chainverify.ProviderTenant, 2, chainverify.ReasonBadSignature)
	require.Zero(t, rep.ProviderSignaturesSkipped)
}

// A signature edited alone below the checkpoint leaves every hash intact:
// the fast path cannot see it, the scrub does once the provider chain's
// last full pass is due (it re-verifies every provider signature, outside
// the scrub's event budget), and the finding then stays.
func TestVerifyDB_ProviderSignatureEditedBelowItsCheckpoint_FoundWhenTheScrubIsDue(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	require.Empty(t, verify(t, d, chainverify.DBOptions{}).Findings)
	flipProviderSignature(t, d, 3)

	require.Empty(t, verify(t, d, chainverify.DBOptions{SinceCheckpoint: true}).Findings)
	notDue := chainverify.DBOptions{SinceCheckpoint: true, ScrubEvents: 1, ScrubMinAge: 1 << 62}
	require.Empty(t, verify(t, d, notDue).Findings)

	due := chainverify.DBOptions{SinceCheckpoint: true, ScrubEvents: 1} // budget too small for any tenant chain
	rep := verify(t, d, due)
	requireFinding(t, rep, chainverify.ProviderTenant, 3, chainverify.ReasonBadSignature)
	require.Zero(t, rep.ProviderSignaturesSkipped)
	cp, _ := checkpoint(t, d, chainverify.ProviderTenant)
	require.EqualValues(t, 2, cp)
	requireFinding(t, verify(t, d, chainverify.DBOptions{SinceCheckpoint: true}), chainverify.ProviderTenant, 3, chainverify.ReasonBadSignature)
}

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
	"github.com/omlhq/oml/internal/keyring"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/witness"
	"github.com/omlhq/oml/internal/workload"
)

// The fork check trusts the provider keys the chain check verified in the
// same run (one pass over the provider chain). Those must be the keys of
// the chain as verified in full: a key issued after the provider chain's
// first bad signature is not issued by anything trustworthy, so a witness
// it signed is a bad-witness, exactly as when the fork check read the
// provider chain itself.
func TestDoctor_WitnessSignedByAKeyIssuedAfterABadProviderSignature_IsABadWitness(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 1)
	b.load(t, 3, 0, 11)
	next, err := keys.Generate()
	require.NoError(t, err)
	issued, err := keyring.Rotate(ctx, b.pool, b.key, next)
	require.NoError(t, err)
	heads, err := witness.Capture(ctx, b.pool, nil, time.Now())
	require.NoError(t, err)
	for _, h := range heads {
		require.NoError(t, h.Sign(next))
		_, err := witness.Publish(ctx, b.lake, h)
		require.NoError(t, err)
	}
	c := requireStatus(t, b.doctor(t, nil), doctor.IDFork, doctor.StatusOK)
	require.Equal(t, len(heads), c.Data["tenants_witnessed"])

	// The event before the key's issuance keeps its hash (the signature is
	// not hashed), so the link checker goes on and issues the key; only
	// the signature check finds the break, after the fact.
	b.tamper(t, fmt.Sprintf(`UPDATE oml.journal SET signature = set_byte(signature, 0, get_byte(signature, 0) # 1) WHERE tenant_id = '%s' AND seq = %d`,
		chainverify.ProviderTenant, issued-1))
	due := func(th *doctor.Thresholds) { th.ScrubPeriod = time.Nanosecond } // the provider's signatures verified in full
	rep := b.doctor(t, due)
	ch := requireStatus(t, rep, doctor.IDChain, doctor.StatusFail)
	require.Contains(t, strings.Join(ch.Details, "\n"), fmt.Sprintf("first bad seq %d: bad-signature", issued-1))
	c = requireStatus(t, rep, doctor.IDFork, doctor.StatusFail)
	require.Len(t, c.Data["untrusted_witnesses"], len(heads))
	require.Contains(t, strings.Join(c.Details, "\n"), "which the verified provider chain never issued")
}

// The keys the fork check takes from the chain check (when its first
// witness needs them, not before it lists them) carry the provider
// chain's revocations: a witness of a head past the point a revocation
// recorded, signed by the revoked key, is a bad-witness.
func TestDoctor_WitnessSignedByARevokedKeyPastItsRevocation_IsABadWitness(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 1)
	b.load(t, 3, 0, 12)
	next, err := keys.Generate()
	require.NoError(t, err)
	_, err = keyring.Rotate(ctx, b.pool, b.key, next)
	require.NoError(t, err)
	_, err = keyring.Revoke(ctx, b.pool, next, b.key.KeyID(), "test", "leaked")
	require.NoError(t, err)
	_, err = workload.Run(ctx, b.pool, next, workload.Config{Tenants: b.tenants, Claims: 3, Seed: 13})
	require.NoError(t, err)
	b.witnessAll(t) // signed by the revoked key
	c := requireStatus(t, b.doctor(t, nil), doctor.IDFork, doctor.StatusFail)
	// The tenant's head is past the point; the provider chain's is the
	// revocation itself, which the revoked key still vouches for.
	require.Len(t, c.Data["untrusted_witnesses"], 1)
	require.Contains(t, c.Data["untrusted_witnesses"].([]string)[0], b.tenants[0].String())
}

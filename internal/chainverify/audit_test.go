package chainverify_test

import (
	"context"
	"encoding/hex"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/witness"
)

// checkpoint reads tenant's stored checkpoint (seq 0 when there is none).
func checkpoint(t *testing.T, d *deployment, id uuid.UUID) (seq int64, verifiedAt time.Time) {
	t.Helper()
	err := d.pool.QueryRow(context.Background(),
		`SELECT seq, verified_at FROM oml.chain_checkpoints WHERE tenant_id = $1`, id).Scan(&seq, &verifiedAt)
	if err == pgx.ErrNoRows {
		return 0, time.Time{}
	}
	require.NoError(t, err)
	return seq, verifiedAt
}

func flipPayloadByte(t *testing.T, d *deployment, id uuid.UUID, seq int64) {
	t.Helper()
	d.tamper(t, func(tx pgx.Tx) {
		mustExec(t, tx, `UPDATE oml.journal SET payload = set_byte(payload, 5, get_byte(payload, 5) # 1) WHERE tenant_id = $1 AND seq = $2`, id, seq)
	})
}

// The headline: an edit of an old event after a clean verify is
// found by the next plain verify and by the one after it, and, because
// the finding moved the checkpoint back below it, by the fast path too,
// until the chain is repaired.
func TestVerifyDB_OldEventEditedAfterACleanVerify_FoundByEveryLaterRunUntilRepaired(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	id := d.tenants[0]
	require.Empty(t, verify(t, d, chainverify.DBOptions{}).Findings)
	cp, _ := checkpoint(t, d, id)
	require.EqualValues(t, eventsPerTenant, cp)

	flipPayloadByte(t, d, id, 10)
	rep := verify(t, d, chainverify.DBOptions{})
	requireFinding(t, rep, id, 10, chainverify.ReasonHashMismatch)
	require.Equal(t, 1, rep.Invalidated)
	cp, _ = checkpoint(t, d, id)
	require.EqualValues(t, 9, cp, "the checkpoint must move back below the finding")

	requireFinding(t, verify(t, d, chainverify.DBOptions{}), id, 10, chainverify.ReasonHashMismatch)
	rep = verify(t, d, chainverify.DBOptions{SinceCheckpoint: true})
	requireFinding(t, rep, id, 10, chainverify.ReasonHashMismatch)
	requireFinding(t, verify(t, d, chainverify.DBOptions{SinceCheckpoint: true}), id, 10, chainverify.ReasonHashMismatch)

	// Repaired (the byte flipped back): clean again, checkpoint forward.
	flipPayloadByte(t, d, id, 10)
	rep = verify(t, d, chainverify.DBOptions{})
	require.Empty(t, rep.Findings)
	cp, _ = checkpoint(t, d, id)
	require.EqualValues(t, eventsPerTenant, cp)
}

// A bad signature is found by the workers, not the link checker: the
// checkpoint still goes back to the event before it.
func TestVerifyDB_BadSignatureBelowTheCheckpoint_MovesItBack(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	id := d.tenants[2]
	require.Empty(t, verify(t, d, chainverify.DBOptions{}).Findings)
	d.tamper(t, func(tx pgx.Tx) {
		mustExec(t, tx, `UPDATE oml.journal SET signature = set_byte(signature, 3, get_byte(signature, 3) # 1) WHERE tenant_id = $1 AND seq = 7`, id)
	})
	requireFinding(t, verify(t, d, chainverify.DBOptions{}), id, 7, chainverify.ReasonBadSignature)
	cp, _ := checkpoint(t, d, id)
	require.EqualValues(t, 6, cp)
	requireFinding(t, verify(t, d, chainverify.DBOptions{SinceCheckpoint: true}), id, 7, chainverify.ReasonBadSignature)
}

// The fast path alone cannot see below a checkpoint (why it is not the
// default); the scrub re-verifies the least recently verified chains from
// their genesis, one budget per run, so the edit is found within a few
// runs, and every run after.
func TestVerifyDB_ScrubFindsAnEditBelowTheCheckpoint_AndTheFindingStays(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	require.Empty(t, verify(t, d, chainverify.DBOptions{}).Findings)
	id := d.tenants[1]
	flipPayloadByte(t, d, id, 4)

	require.Empty(t, verify(t, d, chainverify.DBOptions{SinceCheckpoint: true}).Findings,
		"the fast path without a scrub re-reads nothing below the checkpoints")

	scrub := chainverify.DBOptions{SinceCheckpoint: true, ScrubEvents: eventsPerTenant} // one chain per run
	found := -1
	for run := range 3 {
		rep := verify(t, d, scrub)
		require.Equal(t, 1, rep.Scrubbed, "run %d", run)
		if len(rep.Findings) > 0 {
			requireFinding(t, rep, id, 4, chainverify.ReasonHashMismatch)
			found = run
			break
		}
	}
	require.GreaterOrEqual(t, found, 0, "three scrub runs of one chain each never reached the edited chain")
	// Found once: the fast path finds it from now on, scrubbed or not.
	requireFinding(t, verify(t, d, chainverify.DBOptions{SinceCheckpoint: true}), id, 4, chainverify.ReasonHashMismatch)
	requireFinding(t, verify(t, d, scrub), id, 4, chainverify.ReasonHashMismatch)
}

func TestVerifyDB_ScrubRotatesThroughEveryChain_AndReportsTheLastFullPass(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	first := verify(t, d, chainverify.DBOptions{})
	require.NotNil(t, first.LastFullPass)
	start := *first.LastFullPass

	// Not due yet: verified in full moments ago.
	rep := verify(t, d, chainverify.DBOptions{SinceCheckpoint: true, ScrubEvents: 1000, ScrubMinAge: time.Hour})
	require.Zero(t, rep.Scrubbed)
	require.Equal(t, start, *rep.LastFullPass)

	// A budget of one chain per run visits every chain once, oldest first.
	seen := map[uuid.UUID]bool{}
	for range 3 {
		rep := verify(t, d, chainverify.DBOptions{SinceCheckpoint: true, ScrubEvents: eventsPerTenant + 5})
		require.Equal(t, 1, rep.Scrubbed)
		require.EqualValues(t, eventsPerTenant, rep.ScrubEvents)
		for _, c := range rep.Chains {
			if c.Scrubbed {
				require.False(t, seen[c.Tenant], "chain %s scrubbed twice before the others", c.Tenant)
				seen[c.Tenant] = true
				require.Zero(t, c.FromSeq)
			}
		}
		require.Empty(t, rep.Findings)
	}
	require.Len(t, seen, 3)
	rep = verify(t, d, chainverify.DBOptions{SinceCheckpoint: true})
	require.True(t, rep.LastFullPass.After(start), "every chain was re-verified after %s, the last full pass says %s", start, rep.LastFullPass)
	for _, id := range d.tenants {
		_, at := checkpoint(t, d, id)
		require.True(t, at.After(start))
	}

	// A chain longer than the whole budget is never scrubbed, and said so.
	rep = verify(t, d, chainverify.DBOptions{SinceCheckpoint: true, ScrubEvents: eventsPerTenant - 1})
	require.Zero(t, rep.Scrubbed)
	require.ElementsMatch(t, d.tenants, rep.ScrubTooLarge)
}

// publishHeads witnesses every stored head, signed by k.
func publishHeads(t *testing.T, d *deployment, st store.Store, k witness.Signer) {
	t.Helper()
	ctx := context.Background()
	heads, err := witness.Capture(ctx, d.pool, nil, time.Now())
	require.NoError(t, err)
	for _, h := range heads {
		require.NoError(t, h.Sign(k))
		_, err := witness.Publish(ctx, st, h)
		require.NoError(t, err)
	}
}

func loseTail(t *testing.T, d *deployment, id uuid.UUID, keep int64) {
	t.Helper()
	d.tamper(t, func(tx pgx.Tx) {
		mustExec(t, tx, `DELETE FROM oml.journal WHERE tenant_id = $1 AND seq > $2`, id, keep)
		mustExec(t, tx, `UPDATE oml.chain_heads h SET seq = j.seq, hash = j.hash
FROM oml.journal j WHERE h.tenant_id = $1 AND j.tenant_id = $1 AND j.seq = $2`, id, keep)
	})
}

// A garbage file (or a forged head) at a higher seq than the newest valid
// witness must not hide that witness, and with it a lost tail.
func TestForkCheck_InvalidWitnessAboveAValidOne_StillFindsTheLostTail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, plant := range map[string]func(t *testing.T, d *deployment, st store.Store, id uuid.UUID){
		"garbage": func(t *testing.T, _ *deployment, st store.Store, id uuid.UUID) {
			require.NoError(t, st.PutIfAbsent(ctx, witness.Key(id, 40), []byte("not a witness")))
		},
		"edited after signing": func(t *testing.T, d *deployment, st store.Store, id uuid.UUID) {
			h := &witness.Head{Tenant: id, Seq: 40, Hash: hex.EncodeToString(make([]byte, 32)), Time: time.Now(), Timeline: "00000001"}
			require.NoError(t, h.Sign(d.key))
			h.Timeline = "00000002"
			_, err := witness.Publish(ctx, st, h)
			require.NoError(t, err)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := newDeployment(t)
			st := store.NewMem()
			publishHeads(t, d, st, d.key)
			id := d.tenants[0]
			loseTail(t, d, id, 25)
			plant(t, d, st, id)

			res, err := chainverify.ForkCheck(ctx, d.pool, st, nil)
			require.NoError(t, err)
			f, forked := res.Forked(id)
			require.True(t, forked, "the lost tail is hidden by an invalid witness: %v", res.Untrusted)
			require.Equal(t, chainverify.ReasonTailLost, f.Reason)
			require.EqualValues(t, 26, f.Seq)
			require.EqualValues(t, eventsPerTenant, res.Witnessed[id].Seq)
			bad := chainverify.InvalidWitnessFindings(res.Untrusted)
			require.Len(t, bad, 1)
			require.Equal(t, chainverify.Finding{Tenant: id, Seq: 40, Reason: chainverify.ReasonBadWitness,
				Detail: bad[0].Detail, Evidence: map[string]string{"witness_key": witness.Key(id, 40)}}, bad[0])
		})
	}
}

// oml.signing_keys is a table the owner can write; a witness signed by a
// key listed only there (never issued by a key.issued on the verified
// provider chain) is not trusted.
func TestForkCheck_WitnessSignedByAKeyOnlyInSigningKeys_IsNotTrusted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDeployment(t)
	rogue, err := keys.Generate()
	require.NoError(t, err)
	// As the owner, behind the database's back (its trigger refuses a key
	// no key.issued backs, so the owner disables it): the table is the
	// owner's to edit, which is why witnesses are not checked against it.
	tx, err := d.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	mustExec(t, tx, `ALTER TABLE oml.signing_keys DISABLE TRIGGER USER`)
	mustExec(t, tx, `INSERT INTO oml.signing_keys (key_id, public_key, issued_seq, issued_hash, issued_at)
VALUES ($1, $2, 1, $3, now())`, rogue.KeyID(), []byte(rogue.Public()), make([]byte, 32))
	mustExec(t, tx, `ALTER TABLE oml.signing_keys ENABLE TRIGGER USER`)
	require.NoError(t, tx.Commit(ctx))

	trusted, err := chainverify.IssuedKeys(ctx, d.pool)
	require.NoError(t, err)
	_, ok := trusted(rogue.KeyID(), uuid.Nil, 1)
	require.False(t, ok, "a key only in oml.signing_keys was trusted")
	pub, ok := trusted(d.key.KeyID(), uuid.Nil, 1)
	require.True(t, ok)
	require.Equal(t, d.key.Public(), pub)

	st := store.NewMem()
	publishHeads(t, d, st, d.key)
	id := d.tenants[1]
	// The rogue key claims the head moved back: a forged witness at a
	// higher seq that, if trusted, would anchor a rewritten chain.
	h := &witness.Head{Tenant: id, Seq: eventsPerTenant + 5, Hash: hex.EncodeToString(make([]byte, 32)), Time: time.Now()}
	require.NoError(t, h.Sign(rogue))
	_, err = witness.Publish(ctx, st, h)
	require.NoError(t, err)

	res, err := chainverify.ForkCheck(ctx, d.pool, st, nil)
	require.NoError(t, err)
	require.Empty(t, res.Findings, "the rogue witness was trusted as an anchor")
	require.EqualValues(t, eventsPerTenant, res.Witnessed[id].Seq)
	bad := chainverify.InvalidWitnessFindings(res.Untrusted)
	require.Len(t, bad, 1)
	require.Equal(t, id, bad[0].Tenant)
	require.Contains(t, bad[0].Detail, "never issued")
}

// Keys issued at or after the provider chain's first bad event are not
// trusted for witnesses either.
func TestIssuedKeys_KeyIssuedAfterABrokenProviderEvent_IsNotTrusted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDeployment(t)
	d.tamper(t, func(tx pgx.Tx) {
		// Provider seq 1 is the root key.issued; seq 2 creates tenant a.
		mustExec(t, tx, `UPDATE oml.journal SET payload = set_byte(payload, 5, get_byte(payload, 5) # 1) WHERE tenant_id = $1 AND seq = 1`, chainverify.ProviderTenant)
	})
	trusted, err := chainverify.IssuedKeys(ctx, d.pool)
	require.NoError(t, err)
	_, ok := trusted(d.key.KeyID(), uuid.Nil, 1)
	require.False(t, ok, "the root key was trusted although its key.issued event was edited")
}

// A row signed as it is (by someone holding the key) whose payload is not
// UTF-8 is a finding: such a payload must never reach a lake string column.
func TestVerifyDB_SignedEventWithAnInvalidUTF8Payload_IsBadPayload(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	id := d.tenants[1]
	d.tamper(t, func(tx pgx.Tx) {
		ev := readRow(t, tx, id, eventsPerTenant) // the head: nothing links to it
		ev.Payload = []byte("{\"x\":\"\xff\xfe\"}")
		reseal(t, tx, ev, d.key)
		mustExec(t, tx, `UPDATE oml.chain_heads SET hash = (SELECT hash FROM oml.journal WHERE tenant_id = $1 AND seq = $2) WHERE tenant_id = $1`, id, eventsPerTenant)
	})
	requireFinding(t, verify(t, d, chainverify.DBOptions{}), id, eventsPerTenant, chainverify.ReasonBadPayload)
}

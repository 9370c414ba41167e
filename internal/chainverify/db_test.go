package chainverify_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/witness"
)

func TestMain(m *testing.M) {
	testdb.Main(m, testdb.WithTemplate(schema.Migrate))
}

const eventsPerTenant = 30 // genesis + 29 claims

type deployment struct {
	pool    *pgxpool.Pool
	key     *keys.Key
	tenants []uuid.UUID // a, b, c (creation order)
}

// newDeployment builds a real deployment through the real append path:
// oml init, three tenants, 29 claim submissions each.
func newDeployment(t *testing.T) *deployment {
	t.Helper()
	d := initDeployment(t)
	for _, name := range []string{"alpha", "bravo", "charlie"} {
		id := d.createTenant(t, name)
		d.tenants = append(d.tenants, id)
		d.appendClaims(t, id, eventsPerTenant-1)
	}
	return d
}

// initDeployment is a new database after oml init: the provider chain's
// root key.issued and no tenant.
func initDeployment(tb testing.TB) *deployment {
	tb.Helper()
	pool := testdb.New(tb).Pool(tb)
	k, err := keys.Generate()
	require.NoError(tb, err)
	_, err = tenant.Init(context.Background(), pool, k)
	require.NoError(tb, err)
	return &deployment{pool: pool, key: k}
}

// createTenant creates a tenant through the real path (its tenant.created
// on the provider chain, its genesis) and returns its id.
func (d *deployment) createTenant(tb testing.TB, name string) uuid.UUID {
	tb.Helper()
	tn, _, err := tenant.Create(context.Background(), d.pool, d.key, name)
	require.NoError(tb, err)
	return tn.ID
}

func (d *deployment) appendClaims(t testing.TB, id uuid.UUID, n int) {
	t.Helper()
	evs := make([]journal.Event, n)
	for i := range evs {
		body := make([]byte, 48)
		dek := make([]byte, 32)
		_, _ = rand.Read(body)
		_, _ = rand.Read(dek)
		cd := sha256.Sum256(body)
		pd := sha256.Sum256(append([]byte("plain"), body...))
		ev, err := journal.NewClaimSubmitted(journal.ClaimSubmitted{
			ArtifactID: uuid.NewString(), Version: 1, WorkareaID: "wa-1", Writer: "agent:ingest",
			Principal: "user:alice", Provenance: "agent",
			PlaintextDigest: hex.EncodeToString(pd[:]), CiphertextDigest: hex.EncodeToString(cd[:]),
		}, body, dek)
		require.NoError(t, err)
		evs[i] = ev
	}
	_, err := chain.Append(context.Background(), d.pool, d.key, id, evs...)
	require.NoError(t, err)
}

// tamper runs sql as the owner with the journal's guard triggers disabled:
// an edit made behind the application's back.
func (d *deployment) tamper(t *testing.T, fn func(tx pgx.Tx)) {
	t.Helper()
	ctx := context.Background()
	tx, err := d.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `ALTER TABLE oml.journal DISABLE TRIGGER USER`)
	require.NoError(t, err)
	fn(tx)
	_, err = tx.Exec(ctx, `ALTER TABLE oml.journal ENABLE TRIGGER USER`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
}

func mustExec(t *testing.T, tx pgx.Tx, sql string, args ...any) {
	t.Helper()
	_, err := tx.Exec(context.Background(), sql, args...)
	require.NoError(t, err, sql)
}

// readRow reads one stored event.
func readRow(t *testing.T, q pgx.Tx, id uuid.UUID, seq int64) *chainverify.Event {
	t.Helper()
	ev := &chainverify.Event{Tenant: id}
	err := q.QueryRow(context.Background(), `
SELECT seq, prev_hash, hash, signature, key_id, event_type, payload, recorded_at
FROM oml.journal WHERE tenant_id = $1 AND seq = $2`, id, seq).Scan(
		&ev.Seq, &ev.PrevHash, &ev.Hash, &ev.Signature, &ev.KeyID, &ev.EventType, &ev.Payload, &ev.RecordedAt)
	require.NoError(t, err)
	return ev
}

// reseal rewrites a stored event as someone holding signer's key would:
// new hash, new signature, the signer's key id.
func reseal(t *testing.T, tx pgx.Tx, ev *chainverify.Event, signer chain.Signer) {
	t.Helper()
	ev.KeyID = signer.KeyID()
	env, err := chain.Envelope{
		TenantID: ev.Tenant, Seq: uint64(ev.Seq), PrevHash: chain.Hash(ev.PrevHash), EventType: ev.EventType,
		RecordedAt: ev.RecordedAt, KeyID: ev.KeyID, PayloadDigest: chain.PayloadDigest(ev.Payload),
	}.Encode()
	require.NoError(t, err)
	h := chain.EnvelopeHash(env)
	mustExec(t, tx, `UPDATE oml.journal SET payload = $3, hash = $4, signature = $5, key_id = $6
WHERE tenant_id = $1 AND seq = $2`, ev.Tenant, ev.Seq, ev.Payload, h[:], signer.Sign(env), ev.KeyID)
}

func verify(t *testing.T, d *deployment, opts chainverify.DBOptions) chainverify.Report {
	t.Helper()
	rep, err := chainverify.VerifyDB(context.Background(), d.pool, opts)
	require.NoError(t, err)
	return rep
}

// requireFinding asserts exactly one finding, naming tenant, seq and
// reason, and that every other chain (the provider's included) is clean.
func requireFinding(t *testing.T, rep chainverify.Report, id uuid.UUID, seq int64, reason chainverify.Reason) {
	t.Helper()
	require.Len(t, rep.Findings, 1, "findings: %v", rep.Findings)
	f := rep.Findings[0]
	require.Equal(t, id, f.Tenant, "%v", f)
	require.Equal(t, seq, f.Seq, "%v", f)
	require.Equal(t, reason, f.Reason, "%v", f)
	require.Len(t, rep.Chains, 4)
	for _, c := range rep.Chains {
		require.Equal(t, c.Tenant != id, c.OK, "chain %s: %+v", c.Tenant, c)
	}
}

func TestVerifyDB_CleanDeploymentAndResume(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	rep := verify(t, d, chainverify.DBOptions{})
	require.Empty(t, rep.Findings)
	require.Len(t, rep.Chains, 4)
	require.EqualValues(t, 4+3*eventsPerTenant, rep.Events) // provider: key + 3 tenant.created
	require.Zero(t, rep.Resumed)
	require.Equal(t, 4, rep.Checkpoints)

	// A re-run on the fast path reads only what is new.
	d.appendClaims(t, d.tenants[1], 5)
	rep = verify(t, d, chainverify.DBOptions{SinceCheckpoint: true})
	require.Empty(t, rep.Findings)
	require.Equal(t, 3, rep.Resumed)
	require.EqualValues(t, 4+5, rep.Events)
	for _, c := range rep.Chains {
		if c.Tenant == d.tenants[1] {
			require.EqualValues(t, eventsPerTenant, c.FromSeq)
			require.EqualValues(t, eventsPerTenant+5, c.Seq)
		}
	}
	// The default starts over (here in keyset pages of 7 rows, so chains
	// span many pages and some pages end exactly at a chain's end).
	rep = verify(t, d, chainverify.DBOptions{Strict: true, PageSize: 7})
	require.Empty(t, rep.Findings)
	require.EqualValues(t, 4+3*eventsPerTenant+5, rep.Events)
	require.Zero(t, rep.Resumed)
	rep = verify(t, d, chainverify.DBOptions{})
	require.EqualValues(t, 4+3*eventsPerTenant+5, rep.Events)
	require.Zero(t, rep.Resumed)

	// One tenant only (plus the provider chain it depends on).
	id := d.tenants[2]
	rep = verify(t, d, chainverify.DBOptions{Tenant: &id, Full: true})
	require.Empty(t, rep.Findings)
	require.Len(t, rep.Chains, 2)
}

func TestVerifyDB_TamperSuite(t *testing.T) {
	t.Parallel()
	_, stranger, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	cases := []struct {
		name string
		// checkpointFirst verifies (storing checkpoints) before tampering.
		checkpointFirst bool
		tamper          func(t *testing.T, d *deployment, tx pgx.Tx) (uuid.UUID, int64, chainverify.Reason)
	}{
		{name: "payload byte changed", tamper: func(t *testing.T, d *deployment, tx pgx.Tx) (uuid.UUID, int64, chainverify.Reason) {
			id := d.tenants[0]
			mustExec(t, tx, `UPDATE oml.journal SET payload = set_byte(payload, 5, get_byte(payload, 5) # 1) WHERE tenant_id = $1 AND seq = 10`, id)
			return id, 10, chainverify.ReasonHashMismatch
		}},
		{name: "stored hash changed", tamper: func(t *testing.T, d *deployment, tx pgx.Tx) (uuid.UUID, int64, chainverify.Reason) {
			id := d.tenants[1]
			mustExec(t, tx, `UPDATE oml.journal SET hash = set_byte(hash, 0, get_byte(hash, 0) # 128) WHERE tenant_id = $1 AND seq = 12`, id)
			return id, 12, chainverify.ReasonHashMismatch
		}},
		{name: "signature changed", tamper: func(t *testing.T, d *deployment, tx pgx.Tx) (uuid.UUID, int64, chainverify.Reason) {
			id := d.tenants[2]
			mustExec(t, tx, `UPDATE oml.journal SET signature = set_byte(signature, 3, get_byte(signature, 3) # 1) WHERE tenant_id = $1 AND seq = 7`, id)
			return id, 7, chainverify.ReasonBadSignature
		}},
		{name: "event deleted in the middle", tamper: func(t *testing.T, d *deployment, tx pgx.Tx) (uuid.UUID, int64, chainverify.Reason) {
			id := d.tenants[0]
			mustExec(t, tx, `DELETE FROM oml.journal WHERE tenant_id = $1 AND seq = 15`, id)
			return id, 15, chainverify.ReasonSeqGap
		}},
		{name: "tail deleted and head rewound after a checkpoint", checkpointFirst: true,
			tamper: func(t *testing.T, d *deployment, tx pgx.Tx) (uuid.UUID, int64, chainverify.Reason) {
				id := d.tenants[1]
				mustExec(t, tx, `DELETE FROM oml.journal WHERE tenant_id = $1 AND seq > 25`, id)
				// The lost tail's outbox rows went with it (they commit together).
				mustExec(t, tx, `DELETE FROM oml.outbox WHERE tenant_id = $1 AND journal_seq > 25`, id)
				mustExec(t, tx, `UPDATE oml.chain_heads h SET seq = j.seq, hash = j.hash
FROM oml.journal j WHERE h.tenant_id = $1 AND j.tenant_id = $1 AND j.seq = 25`, id)
				return id, 26, chainverify.ReasonTailLost
			}},
		{name: "tail deleted without rewinding the head", tamper: func(t *testing.T, d *deployment, tx pgx.Tx) (uuid.UUID, int64, chainverify.Reason) {
			id := d.tenants[2]
			mustExec(t, tx, `DELETE FROM oml.journal WHERE tenant_id = $1 AND seq > 27`, id)
			return id, 28, chainverify.ReasonHeadMismatch
		}},
		{name: "two events swapped", tamper: func(t *testing.T, d *deployment, tx pgx.Tx) (uuid.UUID, int64, chainverify.Reason) {
			id := d.tenants[0]
			mustExec(t, tx, `UPDATE oml.journal SET seq = 1000000 WHERE tenant_id = $1 AND seq = 20`, id)
			mustExec(t, tx, `UPDATE oml.journal SET seq = 20 WHERE tenant_id = $1 AND seq = 21`, id)
			mustExec(t, tx, `UPDATE oml.journal SET seq = 21 WHERE tenant_id = $1 AND seq = 1000000`, id)
			return id, 20, chainverify.ReasonBrokenLink
		}},
		{name: "edited event re-signed with a never-issued key", tamper: func(t *testing.T, d *deployment, tx pgx.Tx) (uuid.UUID, int64, chainverify.Reason) {
			id := d.tenants[1]
			ev := readRow(t, tx, id, 9)
			ev.Payload = append(ev.Payload[:len(ev.Payload)-1], []byte(`,"x":1}`)...)
			reseal(t, tx, ev, strangerKey{stranger})
			return id, 9, chainverify.ReasonUnknownKey
		}},
		{name: "genesis pointed at another tenant's provider event", tamper: func(t *testing.T, d *deployment, tx pgx.Tx) (uuid.UUID, int64, chainverify.Reason) {
			victim, other := d.tenants[2], d.tenants[0]
			var pseq int64
			var phash []byte
			require.NoError(t, tx.QueryRow(context.Background(),
				`SELECT provider_seq, provider_hash FROM oml.tenants WHERE id = $1`, other).Scan(&pseq, &phash))
			ev := readRow(t, tx, victim, 1)
			ev.Payload = []byte(fmt.Sprintf(`{"tenant_id":%q,"name":"charlie","provider_seq":%d,"provider_hash":%q}`,
				victim, pseq, hex.EncodeToString(phash)))
			reseal(t, tx, ev, d.key)
			return victim, 1, chainverify.ReasonBadGenesis
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := newDeployment(t)
			if tc.checkpointFirst {
				require.Empty(t, verify(t, d, chainverify.DBOptions{}).Findings)
			}
			var id uuid.UUID
			var seq int64
			var reason chainverify.Reason
			d.tamper(t, func(tx pgx.Tx) { id, seq, reason = tc.tamper(t, d, tx) })
			rep := verify(t, d, chainverify.DBOptions{PageSize: 5})
			requireFinding(t, rep, id, seq, reason)
			// A checkpoint is never stored for the broken chain, so the
			// finding stays until someone repairs the chain.
			rep = verify(t, d, chainverify.DBOptions{})
			requireFinding(t, rep, id, seq, reason)
		})
	}
}

func TestVerifyDB_WholeChainDeletedIsFound(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	id := d.tenants[1]
	d.tamper(t, func(tx pgx.Tx) {
		mustExec(t, tx, `DELETE FROM oml.journal WHERE tenant_id = $1`, id)
		mustExec(t, tx, `DELETE FROM oml.chain_heads WHERE tenant_id = $1`, id)
	})
	rep := verify(t, d, chainverify.DBOptions{})
	requireFinding(t, rep, id, 1, chainverify.ReasonBadGenesis)
	require.Contains(t, rep.Findings[0].Detail, "chain is missing")

	rep = verify(t, d, chainverify.DBOptions{Tenant: &id})
	require.Len(t, rep.Findings, 1)
	require.Equal(t, chainverify.ReasonBadGenesis, rep.Findings[0].Reason)

	stranger := uuid.New()
	_, err := chainverify.VerifyDB(context.Background(), d.pool, chainverify.DBOptions{Tenant: &stranger})
	require.ErrorContains(t, err, "never created it")
}

func TestVerifyDB_ProviderChainDeletedBreaksEveryChain(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	d.tamper(t, func(tx pgx.Tx) {
		mustExec(t, tx, `DELETE FROM oml.journal WHERE tenant_id = $1`, chainverify.ProviderTenant)
		mustExec(t, tx, `DELETE FROM oml.chain_heads WHERE tenant_id = $1`, chainverify.ProviderTenant)
	})
	rep := verify(t, d, chainverify.DBOptions{})
	require.Len(t, rep.Findings, 4)
	require.Equal(t, chainverify.ProviderTenant, rep.Findings[0].Tenant)
	for _, f := range rep.Findings {
		require.Equal(t, chainverify.ReasonBadGenesis, f.Reason, "%v", f)
		require.EqualValues(t, 1, f.Seq)
	}
}

func TestVerifyDB_TailLostWithoutAnchorIsInvisible(t *testing.T) {
	t.Parallel()
	// The lost-failover case with no checkpoint and no witness: the chain
	// that remains is perfectly valid on its own. This is why heads are
	// witnessed outside PostgreSQL.
	d := newDeployment(t)
	id := d.tenants[0]
	d.tamper(t, func(tx pgx.Tx) {
		mustExec(t, tx, `DELETE FROM oml.journal WHERE tenant_id = $1 AND seq > 25`, id)
		// The lost tail's outbox rows went with it (they commit together).
		mustExec(t, tx, `DELETE FROM oml.outbox WHERE tenant_id = $1 AND journal_seq > 25`, id)
		mustExec(t, tx, `UPDATE oml.chain_heads h SET seq = j.seq, hash = j.hash
FROM oml.journal j WHERE h.tenant_id = $1 AND j.tenant_id = $1 AND j.seq = 25`, id)
	})
	require.Empty(t, verify(t, d, chainverify.DBOptions{}).Findings)
}

func TestVerifyDB_WitnessAnchors(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	id := d.tenants[0]
	var witnessed chainverify.Head
	require.NoError(t, d.pool.QueryRow(context.Background(),
		`SELECT seq, hash FROM oml.chain_heads WHERE tenant_id = $1`, id).Scan(&witnessed.Seq, &witnessed.Hash))
	wit := func(t uuid.UUID) (chainverify.Head, bool) {
		if t == id {
			return witnessed, true
		}
		return chainverify.Head{}, false
	}
	require.Empty(t, verify(t, d, chainverify.DBOptions{Witnessed: wit, NoCheckpoint: true}).Findings)

	// Failover lost the tail: tail-lost, both heads as evidence.
	d.tamper(t, func(tx pgx.Tx) {
		mustExec(t, tx, `DELETE FROM oml.journal WHERE tenant_id = $1 AND seq > 25`, id)
		// The lost tail's outbox rows went with it (they commit together).
		mustExec(t, tx, `DELETE FROM oml.outbox WHERE tenant_id = $1 AND journal_seq > 25`, id)
		mustExec(t, tx, `UPDATE oml.chain_heads h SET seq = j.seq, hash = j.hash
FROM oml.journal j WHERE h.tenant_id = $1 AND j.tenant_id = $1 AND j.seq = 25`, id)
	})
	rep := verify(t, d, chainverify.DBOptions{Witnessed: wit, NoCheckpoint: true})
	requireFinding(t, rep, id, 26, chainverify.ReasonTailLost)
	ev := rep.Findings[0].Evidence
	require.Equal(t, fmt.Sprint(witnessed.Seq), ev["anchor_seq"])
	require.Equal(t, witnessed.HashHex(), ev["anchor_hash"])
	require.Equal(t, "25", ev["db_seq"])

	// ... and the writer went on appending: a fork at the witnessed seq.
	d.appendClaims(t, id, 10)
	rep = verify(t, d, chainverify.DBOptions{Witnessed: wit, NoCheckpoint: true})
	requireFinding(t, rep, id, witnessed.Seq, chainverify.ReasonFork)
	require.NotEqual(t, rep.Findings[0].Evidence["anchor_hash"], rep.Findings[0].Evidence["db_hash"])
}

func TestVerifyDB_TrustedFromHead(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	id := d.tenants[1]
	var h chainverify.Head
	require.NoError(t, d.pool.QueryRow(context.Background(),
		`SELECT seq, hash FROM oml.journal WHERE tenant_id = $1 AND seq = 20`, id).Scan(&h.Seq, &h.Hash))
	rep := verify(t, d, chainverify.DBOptions{Tenant: &id, From: &h, NoCheckpoint: true})
	require.Empty(t, rep.Findings)
	require.EqualValues(t, 4+10, rep.Events)

	bad := chainverify.Head{Seq: 20, Hash: make([]byte, 32)}
	rep = verify(t, d, chainverify.DBOptions{Tenant: &id, From: &bad, NoCheckpoint: true})
	require.Len(t, rep.Findings, 1)
	require.Equal(t, chainverify.ReasonFork, rep.Findings[0].Reason)
	require.EqualValues(t, 20, rep.Findings[0].Seq)
}

func TestVerifyDB_EmptyDatabaseIsAnError(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t).Pool(t)
	_, err := chainverify.VerifyDB(context.Background(), pool, chainverify.DBOptions{})
	require.ErrorIs(t, err, chainverify.ErrNoProvider)
}

// strangerKey is a key the deployment never issued.
type strangerKey struct{ priv ed25519.PrivateKey }

func (s strangerKey) KeyID() string          { return keys.KeyID(s.priv.Public().(ed25519.PublicKey)) }
func (s strangerKey) Sign(msg []byte) []byte { return ed25519.Sign(s.priv, msg) }

func TestForkCheck_AgainstPublishedWitnesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDeployment(t)
	st, heads := witnessedLake(t, d)
	require.Len(t, heads, 4)
	res, err := chainverify.ForkCheck(ctx, d.pool, st, nil)
	require.NoError(t, err)
	require.Empty(t, res.Findings)
	require.Len(t, res.Witnessed, 4)

	id := d.tenants[2]
	loseTailAfter20(t, d, id)
	res, err = chainverify.ForkCheck(ctx, d.pool, st, nil)
	require.NoError(t, err)
	require.Len(t, res.Findings, 1)
	f, forked := res.Forked(id)
	require.True(t, forked)
	require.Equal(t, chainverify.ReasonTailLost, f.Reason)
	require.EqualValues(t, 21, f.Seq)
	require.Equal(t, "20", f.Evidence["db_seq"])
	require.NotEmpty(t, f.Evidence["db_head_hash"])
	require.EqualValues(t, fmt.Sprint(eventsPerTenant), f.Evidence["anchor_seq"])

	d.appendClaims(t, id, 15)
	res, err = chainverify.ForkCheck(ctx, d.pool, st, &id)
	require.NoError(t, err)
	f, forked = res.Forked(id)
	require.True(t, forked)
	require.Equal(t, chainverify.ReasonFork, f.Reason)
	require.EqualValues(t, eventsPerTenant, f.Seq)

	// Publishing the forked head at a witnessed seq is refused as a conflict.
	now, err := witness.Capture(ctx, d.pool, &id, time.Now())
	require.NoError(t, err)
	w := now[0]
	var hashAt30 []byte
	require.NoError(t, d.pool.QueryRow(ctx, `SELECT hash FROM oml.journal WHERE tenant_id = $1 AND seq = $2`, id, eventsPerTenant).Scan(&hashAt30))
	w.Seq, w.Hash = eventsPerTenant, hex.EncodeToString(hashAt30)
	require.NoError(t, w.Sign(d.key))
	_, err = witness.Publish(ctx, st, w)
	require.ErrorIs(t, err, witness.ErrConflict)
}

// The fork check's anchors in several statements, side by side on the
// pool (one anchor each here; 5,000 in production, three statements at
// 5,000 tenants), and the chain check's in its transaction one after
// another: a lost tail in any chunk is found, with its evidence.
func TestForkCheck_AnchorsInSeveralChunks_LostTailFound(t *testing.T) { //nolint:paralleltest // sets the package's chunk size
	defer chainverify.SetAnchorChunk(1)()
	ctx := context.Background()
	d := newDeployment(t)
	st, heads := witnessedLake(t, d)
	res, err := chainverify.ForkCheck(ctx, d.pool, st, nil)
	require.NoError(t, err)
	require.Empty(t, res.Findings)
	require.Len(t, res.Witnessed, len(heads))

	for _, id := range []uuid.UUID{d.tenants[0], d.tenants[2]} {
		loseTailAfter20(t, d, id)
	}
	res, err = chainverify.ForkCheck(ctx, d.pool, st, nil)
	require.NoError(t, err)
	require.Len(t, res.Findings, 2)
	for _, id := range []uuid.UUID{d.tenants[0], d.tenants[2]} {
		f, forked := res.Forked(id)
		require.True(t, forked, "tenant %s", id)
		require.Equal(t, chainverify.ReasonTailLost, f.Reason)
		require.EqualValues(t, 21, f.Seq)
		require.Equal(t, "20", f.Evidence["db_seq"])
	}

	witnessed := map[uuid.UUID]chainverify.Head{}
	for _, h := range heads {
		witnessed[h.Tenant] = chainverify.Head{Seq: h.Seq, Hash: h.HashBytes()}
	}
	rep, err := chainverify.VerifyDB(ctx, d.pool, chainverify.DBOptions{NoCheckpoint: true,
		Witnessed: func(id uuid.UUID) (chainverify.Head, bool) { h, ok := witnessed[id]; return h, ok }})
	require.NoError(t, err)
	require.Len(t, rep.Findings, 2, "the chain check's witness anchors, one chunk after another in its transaction")
}

// witnessedLake is a file lake holding every chain's current head,
// witnessed as `oml chain witness` does.
func witnessedLake(t *testing.T, d *deployment) (store.Store, []*witness.Head) {
	t.Helper()
	ctx := context.Background()
	st, err := store.NewFile(t.TempDir())
	require.NoError(t, err)
	heads, err := witness.Capture(ctx, d.pool, nil, time.Now())
	require.NoError(t, err)
	for _, h := range heads {
		require.NoError(t, h.Sign(d.key))
		_, err := witness.Publish(ctx, st, h)
		require.NoError(t, err)
	}
	return st, heads
}

// loseTailAfter20 drops tenant id's events after seq 20, as a failover
// that lost them would: the journal, their outbox rows (they commit
// together) and the head.
func loseTailAfter20(t *testing.T, d *deployment, id uuid.UUID) {
	t.Helper()
	d.tamper(t, func(tx pgx.Tx) {
		mustExec(t, tx, `DELETE FROM oml.journal WHERE tenant_id = $1 AND seq > 20`, id)
		mustExec(t, tx, `DELETE FROM oml.outbox WHERE tenant_id = $1 AND journal_seq > 20`, id)
		mustExec(t, tx, `UPDATE oml.chain_heads h SET seq = j.seq, hash = j.hash
FROM oml.journal j WHERE h.tenant_id = $1 AND j.tenant_id = $1 AND j.seq = 20`, id)
	})
}

func TestVerifyDB_UnmigratedDatabaseSaysMigrate(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t, testdb.Empty()).Pool(t)
	_, err := chainverify.VerifyDB(context.Background(), pool, chainverify.DBOptions{})
	require.ErrorContains(t, err, "run oml migrate")
}

// TestVerifyDB_AnchorsOfManyTenantsInOnePlan: the plan compares every
// chain's anchors with the journal in one statement (checkAnchors); each
// verdict must land on its own tenant and anchor: a tail lost below one
// tenant's checkpoint, a fork against another's witness, and the third
// tenant still resumes from its checkpoint.
func TestVerifyDB_AnchorsOfManyTenantsInOnePlan(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	require.Empty(t, verify(t, d, chainverify.DBOptions{}).Findings) // stores the checkpoints
	lost, forked := d.tenants[1], d.tenants[2]
	d.tamper(t, func(tx pgx.Tx) {
		mustExec(t, tx, `DELETE FROM oml.journal WHERE tenant_id = $1 AND seq > 25`, lost)
		mustExec(t, tx, `DELETE FROM oml.outbox WHERE tenant_id = $1 AND journal_seq > 25`, lost)
		mustExec(t, tx, `UPDATE oml.chain_heads h SET seq = j.seq, hash = j.hash
FROM oml.journal j WHERE h.tenant_id = $1 AND j.tenant_id = $1 AND j.seq = 25`, lost)
	})
	wit := func(id uuid.UUID) (chainverify.Head, bool) {
		if id == forked {
			return chainverify.Head{Seq: 12, Hash: make([]byte, 32)}, true
		}
		return chainverify.Head{}, false
	}
	rep := verify(t, d, chainverify.DBOptions{SinceCheckpoint: true, Witnessed: wit, NoCheckpoint: true})
	byTenant := map[uuid.UUID]chainverify.Finding{}
	for _, f := range rep.Findings {
		byTenant[f.Tenant] = f
	}
	require.Len(t, byTenant, 2, "findings: %v", rep.Findings)
	require.Equal(t, chainverify.ReasonTailLost, byTenant[lost].Reason, "%v", byTenant[lost])
	require.EqualValues(t, 26, byTenant[lost].Seq)
	require.Equal(t, "checkpoint", byTenant[lost].Evidence["anchor"])
	require.Equal(t, "25", byTenant[lost].Evidence["db_seq"])
	require.Equal(t, chainverify.ReasonFork, byTenant[forked].Reason, "%v", byTenant[forked])
	require.EqualValues(t, 12, byTenant[forked].Seq)
	require.Equal(t, chainverify.AnchorWitness, byTenant[forked].Evidence["anchor"])
	require.Equal(t, 1, rep.Resumed, "only the untouched tenant resumes from its checkpoint")
}

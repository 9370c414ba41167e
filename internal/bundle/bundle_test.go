package bundle_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/bundle"
	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/keyring"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/witness"
	"github.com/omlhq/oml/internal/workload"
)

func TestMain(m *testing.M) { testkit.Main(m) }

type fixture struct {
	d      *testkit.Deployment
	lake   store.Store
	tenant uuid.UUID
}

// drained is a deployment with a workload drained into a file lake (so the
// lake writer has witnessed heads).
func drained(t *testing.T) *fixture {
	t.Helper()
	d := testkit.NewDeployment(t, 2)
	lake, err := store.NewFile(t.TempDir())
	require.NoError(t, err)
	_, err = workload.Run(context.Background(), d.Pool, d.Key, workload.Config{Tenants: d.Tenants, Claims: 25, PromoteRatio: 0.7, RetractRatio: 0.3, Seed: 3})
	require.NoError(t, err)
	o := d.DrainOptions(lake)
	w, err := lakewriter.New(o)
	require.NoError(t, err)
	d.DrainAll(t, w)
	return &fixture{d: d, lake: lake, tenant: d.Tenants[0]}
}

func (fx *fixture) export(t *testing.T, opts bundle.ExportOptions) string {
	t.Helper()
	if opts.Tenant == (uuid.UUID{}) {
		opts.Tenant = fx.tenant
	}
	path := filepath.Join(t.TempDir(), "chain.bundle")
	f, err := os.Create(path)
	require.NoError(t, err)
	_, err = bundle.Export(context.Background(), fx.d.Pool, f, opts)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	return path
}

// copyAlone copies the bundle into a fresh, empty directory: verification
// reads nothing but that file.
func copyAlone(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "copy.bundle")
	require.NoError(t, os.WriteFile(out, b, 0o600))
	return out
}

// rewrite applies edit to every line of the bundle and writes it back.
func rewrite(t *testing.T, path string, edit func(i int, line map[string]any) (keep bool)) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	i := 0
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m))
		if edit(i, m) {
			line, err := json.Marshal(m)
			require.NoError(t, err)
			out.Write(line)
			out.WriteByte('\n')
		}
		i++
	}
	require.NoError(t, os.WriteFile(path, out.Bytes(), 0o600))
}

func rootKeyID(t *testing.T, fx *fixture) string {
	var id string
	require.NoError(t, fx.d.Pool.QueryRow(context.Background(), `SELECT key_id FROM oml.journal WHERE tenant_id = $1 AND seq = 1`, chainverify.ProviderTenant).Scan(&id))
	return id
}

func TestBundle_ExportedTenant_VerifiesAloneWithWitnesses(t *testing.T) {
	t.Parallel()
	fx := drained(t)
	path := copyAlone(t, fx.export(t, bundle.ExportOptions{Lake: fx.lake, Signer: fx.d.Key}))

	res, err := bundle.VerifyFile(context.Background(), path, bundle.VerifyOptions{RootKeyID: rootKeyID(t, fx)})
	require.NoError(t, err)
	require.True(t, res.OK(), "findings %+v witnesses %+v", res.Findings, res.Witnesses)
	require.True(t, res.RootPinned)
	var head int64
	require.NoError(t, fx.d.Pool.QueryRow(context.Background(), `SELECT seq FROM oml.chain_heads WHERE tenant_id = $1`, fx.tenant).Scan(&head))
	require.Equal(t, head, res.HeadSeq)
	require.Equal(t, head, res.CoveredTo, "the head signed at export covers the whole chain")
	sources := map[string]int{}
	for _, w := range res.Witnesses {
		sources[w.Source]++
		require.Equal(t, bundle.WitnessOK, w.Status, "%+v", w)
	}
	require.Positive(t, sources["lake"], "the lake writer's witnessed heads are in the bundle")
	require.Equal(t, 1, sources["export"])
}

func TestBundle_OneByteOfOneEventChanged_NamesThatEvent(t *testing.T) {
	t.Parallel()
	fx := drained(t)
	path := fx.export(t, bundle.ExportOptions{Lake: fx.lake})
	const target = int64(7)
	rewrite(t, path, func(_ int, m map[string]any) bool {
		if m["kind"] == bundle.KindEvent && m["tenant_id"] == fx.tenant.String() && int64(m["seq"].(float64)) == target {
			p, err := base64.StdEncoding.DecodeString(m["payload"].(string))
			require.NoError(t, err)
			i := bytes.IndexByte(p, ':') + 2 // inside the first value
			p[i] ^= 0x01
			m["payload"] = base64.StdEncoding.EncodeToString(p)
		}
		return true
	})
	res, err := bundle.VerifyFile(context.Background(), path, bundle.VerifyOptions{})
	require.NoError(t, err)
	require.False(t, res.OK())
	require.NotEmpty(t, res.Findings)
	f := res.Findings[0]
	require.Equal(t, fx.tenant, f.Tenant)
	require.Equal(t, target, f.Seq)
	require.Equal(t, chainverify.ReasonHashMismatch, f.Reason)
}

func TestBundle_LastEventsDroppedAndTrailerFixed_WitnessAboveIsTailLost(t *testing.T) {
	t.Parallel()
	fx := drained(t)
	path := fx.export(t, bundle.ExportOptions{Lake: fx.lake, Signer: fx.d.Key})
	var head int64
	require.NoError(t, fx.d.Pool.QueryRow(context.Background(), `SELECT seq FROM oml.chain_heads WHERE tenant_id = $1`, fx.tenant).Scan(&head))
	cut := head - 3
	rewrite(t, path, func(_ int, m map[string]any) bool {
		switch {
		case m["kind"] == bundle.KindEvent && m["tenant_id"] == fx.tenant.String() && int64(m["seq"].(float64)) > cut:
			return false
		case m["kind"] == bundle.KindTrailer:
			m["events"] = m["events"].(float64) - 3
			m["to_seq"] = float64(cut)
		}
		return true
	})
	res, err := bundle.VerifyFile(context.Background(), path, bundle.VerifyOptions{})
	require.NoError(t, err)
	require.False(t, res.OK())
	var lost bool
	for _, f := range res.Findings {
		if f.Reason == chainverify.ReasonTailLost && f.Seq == head {
			lost = true
		}
	}
	require.True(t, lost, "the head signed at export names seq %d, above the bundle's last event: %+v", head, res.Findings)
}

func TestBundle_CutShort_IsMalformed(t *testing.T) {
	t.Parallel()
	fx := drained(t)
	path := fx.export(t, bundle.ExportOptions{})
	// Without the trailer.
	rewrite(t, path, func(_ int, m map[string]any) bool { return m["kind"] != bundle.KindTrailer })
	_, err := bundle.VerifyFile(context.Background(), path, bundle.VerifyOptions{})
	require.ErrorIs(t, err, bundle.ErrMalformed)
	require.ErrorContains(t, err, "cut short")

	// An event removed from the middle, trailer intact.
	path = fx.export(t, bundle.ExportOptions{})
	rewrite(t, path, func(_ int, m map[string]any) bool {
		return !(m["kind"] == bundle.KindEvent && m["tenant_id"] == fx.tenant.String() && int64(m["seq"].(float64)) == 4)
	})
	_, err = bundle.VerifyFile(context.Background(), path, bundle.VerifyOptions{})
	require.ErrorIs(t, err, bundle.ErrMalformed)
	require.ErrorContains(t, err, "cut or spliced")
}

func TestBundle_GarbageOrForeignSignedHead_IsInvalidNeverIgnored(t *testing.T) {
	t.Parallel()
	fx := drained(t)
	path := fx.export(t, bundle.ExportOptions{Lake: fx.lake})
	stranger, err := keys.Generate()
	require.NoError(t, err)
	var head int64
	var hash []byte
	require.NoError(t, fx.d.Pool.QueryRow(context.Background(), `SELECT seq, hash FROM oml.chain_heads WHERE tenant_id = $1`, fx.tenant).Scan(&head, &hash))
	forged := &witness.Head{Version: 1, Tenant: fx.tenant, Seq: head + 50, Hash: strings.Repeat("ab", 32)}
	require.NoError(t, forged.Sign(stranger))
	rewrite(t, path, func(_ int, m map[string]any) bool {
		if m["kind"] == bundle.KindTrailer {
			m["witnesses"] = m["witnesses"].(float64) + 2
		}
		return true
	})
	// Append the two heads before the trailer.
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	fj, _ := json.Marshal(map[string]any{"kind": "witness", "source": "lake", "head": forged})
	lines = append(lines[:len(lines)-1], `{"kind":"witness","source":"lake","head":"garbage"}`, string(fj), lines[len(lines)-1])
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600))

	res, err := bundle.VerifyFile(context.Background(), path, bundle.VerifyOptions{})
	require.NoError(t, err)
	require.False(t, res.OK())
	invalid := 0
	for _, w := range res.Witnesses {
		if w.Status == bundle.WitnessInvalid {
			invalid++
		}
	}
	require.Equal(t, 2, invalid, "%+v", res.Witnesses)
	require.Empty(t, res.Findings, "a head signed by a key never issued proves nothing about the chain")
}

func TestBundle_FromASeq_ProvesTheSegmentExtendsItsAnchor(t *testing.T) {
	t.Parallel()
	fx := drained(t)
	path := fx.export(t, bundle.ExportOptions{From: 10})
	res, err := bundle.VerifyFile(context.Background(), path, bundle.VerifyOptions{})
	require.NoError(t, err)
	require.True(t, res.OK(), "%+v", res.Findings)
	require.NotNil(t, res.Header.Anchor)
	require.EqualValues(t, 9, res.Header.Anchor.Seq)

	// A wrong anchor is a broken link at the first event.
	rewrite(t, path, func(i int, m map[string]any) bool {
		if i == 0 {
			m["anchor"].(map[string]any)["hash"] = strings.Repeat("00", 32)
		}
		return true
	})
	res, err = bundle.VerifyFile(context.Background(), path, bundle.VerifyOptions{})
	require.NoError(t, err)
	require.False(t, res.OK())
	require.EqualValues(t, 10, res.Findings[0].Seq)
	require.Equal(t, chainverify.ReasonBrokenLink, res.Findings[0].Reason)
}

func TestBundle_RootPinnedToAnotherKey_Refused(t *testing.T) {
	t.Parallel()
	fx := drained(t)
	path := fx.export(t, bundle.ExportOptions{})
	other, err := keys.Generate()
	require.NoError(t, err)
	res, err := bundle.VerifyFile(context.Background(), path, bundle.VerifyOptions{RootKeyID: other.KeyID()})
	require.NoError(t, err)
	require.False(t, res.OK())
	require.Equal(t, chainverify.ProviderTenant, res.Findings[0].Tenant)
}

// TestBundle_HeadSignedByARevokedKeyAfterItsPoint_IsInvalid: after a
// rotation and a revocation, a head the old key signs above the chain's
// recorded point is not trusted by the bundle verifier either.
func TestBundle_HeadSignedByARevokedKeyAfterItsPoint_IsInvalid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := drained(t)
	next, err := keys.Generate()
	require.NoError(t, err)
	_, err = keyring.Rotate(ctx, fx.d.Pool, fx.d.Key, next)
	require.NoError(t, err)
	_, err = keyring.Revoke(ctx, fx.d.Pool, next, fx.d.Key.KeyID(), "test", "leak")
	require.NoError(t, err)
	path := fx.export(t, bundle.ExportOptions{Signer: next})
	var head int64
	require.NoError(t, fx.d.Pool.QueryRow(ctx, `SELECT seq FROM oml.chain_heads WHERE tenant_id = $1`, fx.tenant).Scan(&head))
	forged := &witness.Head{Version: 1, Tenant: fx.tenant, Seq: head + 3, Hash: strings.Repeat("cd", 32)}
	require.NoError(t, forged.Sign(fx.d.Key))
	rewrite(t, path, func(_ int, m map[string]any) bool {
		if m["kind"] == bundle.KindTrailer {
			m["witnesses"] = m["witnesses"].(float64) + 1
		}
		return true
	})
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	fj, _ := json.Marshal(map[string]any{"kind": "witness", "source": "lake", "head": forged})
	lines = append(lines[:len(lines)-1], string(fj), lines[len(lines)-1])
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600))

	res, err := bundle.VerifyFile(ctx, path, bundle.VerifyOptions{})
	require.NoError(t, err)
	require.False(t, res.OK())
	var invalid int
	for _, w := range res.Witnesses {
		switch w.Source {
		case "export":
			require.Equal(t, bundle.WitnessOK, w.Status, "the head the new key signed at export is valid")
		default:
			require.Equal(t, bundle.WitnessInvalid, w.Status, "%+v", w)
			invalid++
		}
	}
	require.Equal(t, 1, invalid)
}

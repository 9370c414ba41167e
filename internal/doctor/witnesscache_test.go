package doctor_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/doctor"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/witness"
)

// witnessedBundle is a deployment whose heads are witnessed, with one
// doctor run behind it (the verified-witness summary stored).
func witnessedBundle(t *testing.T, tenants int) *bundle {
	t.Helper()
	b := setup(t, tenants)
	b.load(t, 3, 0, 21)
	b.witnessAll(t)
	c := requireStatus(t, b.doctor(t, nil), doctor.IDFork, doctor.StatusOK)
	require.Equal(t, "absent", c.Data["witness_summary_state"])
	return b
}

// newestWitnessFile is the path and listing of tenant i's newest witness.
func newestWitnessFile(t *testing.T, b *bundle, i int) (string, store.ObjectInfo) {
	t.Helper()
	infos, err := b.lake.List(context.Background(), witness.Prefix+b.tenants[i].String()+"/", "")
	require.NoError(t, err)
	var newest store.ObjectInfo
	for _, o := range infos {
		if strings.HasSuffix(o.Key, ".json") {
			newest = o
		}
	}
	require.NotEmpty(t, newest.Key)
	return filepath.Join(b.lake.(*store.File).Root(), filepath.FromSlash(newest.Key)), newest
}

// flipSignature rewrites a witness in place with one signature character
// changed: the same size, a signature that no longer verifies.
func flipSignature(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	i := strings.Index(string(data), `"signature":"`) + len(`"signature":"`)
	if data[i] == 'A' {
		data[i] = 'B'
	} else {
		data[i] = 'A'
	}
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

func TestDoctor_WitnessSummary_SecondRunVerifiesOnlyTheScrubsShare(t *testing.T) {
	t.Parallel()
	b := witnessedBundle(t, 3)
	c := requireStatus(t, b.doctor(t, nil), doctor.IDFork, doctor.StatusOK)
	require.Equal(t, "ok", c.Data["witness_summary_state"])
	all := c.Data["tenants_witnessed"].(int)
	require.Equal(t, 1, c.Data["witnesses_scrubbed"], "ceil(%d/64) scrubbed", all)
	require.Equal(t, 1, c.Data["witnesses_verified"])
	require.Equal(t, all-1, c.Data["witnesses_from_summary"])
	require.NotNil(t, c.Data["oldest_witness_verified_at"])
}

// A witness rewritten after the summary stored it (its listing changes:
// a new modification time) is read and verified again: bad-witness.
func TestDoctor_WitnessSummary_WitnessRewrittenAfterIt_IsABadWitness(t *testing.T) {
	t.Parallel()
	b := witnessedBundle(t, 3)
	path, _ := newestWitnessFile(t, b, 1)
	flipSignature(t, path)
	later := time.Now().Add(time.Minute) // a rewrite within the file system's time resolution still moves it
	require.NoError(t, os.Chtimes(path, later, later))
	c := requireStatus(t, b.doctor(t, nil), doctor.IDFork, doctor.StatusFail)
	require.Contains(t, strings.Join(c.Details, "\n"), "bad-witness")
	require.Len(t, c.Data["untrusted_witnesses"], 1)
}

// A witness rewritten in place with its size and time kept looks
// unchanged to the listing; the scrub verifies it anyway, at the latest
// once its verification is older than witness.CacheMaxAge, and from then
// on every run finds it (a bad witness is never kept).
func TestDoctor_WitnessSummary_RewriteKeepingSizeAndTime_FoundByTheScrub(t *testing.T) {
	t.Parallel()
	b := witnessedBundle(t, 3)
	requireStatus(t, b.doctor(t, nil), doctor.IDFork, doctor.StatusOK) // every entry now has been kept once
	path, info := newestWitnessFile(t, b, 2)
	flipSignature(t, path)
	require.NoError(t, os.Chtimes(path, info.ModTime, info.ModTime))

	o := b.options(nil)
	o.Now = func() time.Time { return time.Now().Add(witness.CacheMaxAge + time.Hour) }
	c := requireStatus(t, doctor.Run(context.Background(), o), doctor.IDFork, doctor.StatusFail)
	require.Contains(t, strings.Join(c.Details, "\n"), "bad-witness")
	for range 2 {
		c = requireStatus(t, b.doctor(t, nil), doctor.IDFork, doctor.StatusFail)
		require.Len(t, c.Data["untrusted_witnesses"], 1)
	}
}

// A summary that does not hash to its header is ignored whole: every
// witness is verified, and the run stores a good one again.
func TestDoctor_WitnessSummary_Garbage_IsIgnored(t *testing.T) {
	t.Parallel()
	b := witnessedBundle(t, 2)
	ctx := context.Background()
	data, err := b.lake.Get(ctx, witness.CacheKey)
	require.NoError(t, err)
	data[len(data)-3] ^= 1
	require.NoError(t, b.lake.Put(ctx, witness.CacheKey, strings.NewReader(string(data)), int64(len(data))))
	c := requireStatus(t, b.doctor(t, nil), doctor.IDFork, doctor.StatusOK)
	require.Contains(t, c.Data["witness_summary_state"], "invalid")
	require.Equal(t, 0, c.Data["witnesses_from_summary"])
	c = requireStatus(t, b.doctor(t, nil), doctor.IDFork, doctor.StatusOK)
	require.Equal(t, "ok", c.Data["witness_summary_state"])
}

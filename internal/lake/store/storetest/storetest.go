package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/stretchr/testify/require"
)

// LargeSize is the body size of the large-object test: big enough to go
// through a multipart upload on an S3 store configured with the minimum
// 5 MiB part size and threshold (see MultipartConfig).
const LargeSize = 12<<20 + 12345

// MultipartConfig makes an S3 store upload LargeSize bodies in three parts.
func MultipartConfig(c *store.S3Config) {
	c.PartSize = 5 << 20
	c.MultipartThreshold = 5 << 20
}

// Run runs the conformance suite. newStore must return a fresh, empty store
// for each call (subtests run in parallel).
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"PutThenGetReturnsTheBody", testPutGet},
		{"PutReplacesAnExistingObject", testPutReplaces},
		{"EmptyObjectRoundTrips", testEmpty},
		{"MissingKeyIsNotFoundForEveryRead", testNotFound},
		{"StatReportsSize", testStat},
		{"InvalidKeysAreRefused", testInvalidKeys},
		{"ListIsRecursiveAndSortedByKeyBytes", testListOrder},
		{"ListStartAfterSkipsUpToAndIncludingTheKey", testListStartAfter},
		{"ListPrefixNeedNotEndAtSlash", testListPrefix},
		{"ListOfEmptyOrMissingPrefixIsEmpty", testListEmpty},
		{"DeleteRemovesAndMissingIsNoError", testDelete},
		{"SubScopesKeysUnderAPrefix", testSub},
		{"PutIfAbsentWritesOnceAndNeverOverwrites", testPutIfAbsent},
		{"PutIfAbsentRaceHasExactlyOneWinner", testPutIfAbsentRace},
		{"PutFromAFailingReaderLeavesNoObject", testPutFailingReader},
		{"ConcurrentReadersNeverSeeAPartialPut", testPutAtomicForReaders},
		{"LargeObjectRoundTripsWithRanges", testLarge},
		{"OpenReadsRanges", testOpenRanges},
		{"CanceledContextFailsOperations", testCanceled},
		{"ProbeConfirmsPutIfAbsent", testProbe},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func put(t *testing.T, s store.Store, key string, body []byte) {
	t.Helper()
	require.NoError(t, s.Put(ctxT(t), key, bytes.NewReader(body), int64(len(body))))
}

func keys(infos []store.ObjectInfo) []string {
	out := make([]string, 0, len(infos))
	for _, i := range infos {
		out = append(out, i.Key)
	}
	return out
}

func testPutGet(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	put(t, s, "a/b/c.json", []byte(`{"x":1}`))
	got, err := s.Get(ctx, "a/b/c.json")
	require.NoError(t, err)
	require.Equal(t, `{"x":1}`, string(got))
}

func testPutReplaces(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	put(t, s, "_last_checkpoint", []byte("one"))
	put(t, s, "_last_checkpoint", []byte("two, longer"))
	got, err := s.Get(ctx, "_last_checkpoint")
	require.NoError(t, err)
	require.Equal(t, "two, longer", string(got))
}

func testEmpty(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	put(t, s, "empty", nil)
	got, err := s.Get(ctx, "empty")
	require.NoError(t, err)
	require.Empty(t, got)
	require.NoError(t, s.PutIfAbsent(ctx, "empty2", nil))
	info, err := s.Stat(ctx, "empty2")
	require.NoError(t, err)
	require.Zero(t, info.Size)
}

func testNotFound(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	put(t, s, "dir/present", []byte("x"))
	for _, key := range []string{"missing", "dir/missing", "nodir/missing", "dir"} {
		_, err := s.Get(ctx, key)
		require.ErrorIs(t, err, store.ErrNotFound, "get %s", key)
		_, err = s.Stat(ctx, key)
		require.ErrorIs(t, err, store.ErrNotFound, "stat %s", key)
		_, err = s.Open(ctx, key)
		require.ErrorIs(t, err, store.ErrNotFound, "open %s", key)
	}
}

func testStat(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	before := time.Now().Add(-time.Hour)
	put(t, s, "k", []byte("12345"))
	info, err := s.Stat(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "k", info.Key)
	require.EqualValues(t, 5, info.Size)
	require.True(t, info.ModTime.After(before), "modification time %s", info.ModTime)
}

func testInvalidKeys(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	for _, key := range []string{"", "/abs", "a//b", "../up", "a/./b", "a/../b", "trailing/", `back\slash`, ".x.oml-tmp", "d/.x.1234.oml-tmp"} {
		_, err := s.Get(ctx, key)
		require.ErrorIs(t, err, store.ErrInvalidKey, "get %q", key)
		err = s.Put(ctx, key, bytes.NewReader(nil), 0)
		require.ErrorIs(t, err, store.ErrInvalidKey, "put %q", key)
		err = s.PutIfAbsent(ctx, key, nil)
		require.ErrorIs(t, err, store.ErrInvalidKey, "put-if-absent %q", key)
		err = s.Delete(ctx, key)
		require.ErrorIs(t, err, store.ErrInvalidKey, "delete %q", key)
	}
	_, err := s.List(ctx, "../", "")
	require.ErrorIs(t, err, store.ErrInvalidKey)
}

func testListOrder(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	// '-' (0x2d) < '.' (0x2e) < '/' (0x2f) < '0' < '_' < 'a': a directory walk
	// in name order would put "a/…" before "a-…"; S3 order does not.
	want := []string{"a-c", "a.d", "a/b", "a/z/y", "a0", "b", "_delta_log/00000000000000000000.json", ".hidden.crc"}
	for i, k := range want {
		put(t, s, k, []byte(fmt.Sprint(i)))
	}
	sort.Strings(want)
	got, err := s.List(ctx, "", "")
	require.NoError(t, err)
	require.Equal(t, want, keys(got))
	for _, info := range got {
		require.Positive(t, info.Size)
	}
}

func testListStartAfter(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	var all []string
	for v := 0; v < 12; v++ {
		k := fmt.Sprintf("_delta_log/%020d.json", v)
		all = append(all, k)
		require.NoError(t, s.PutIfAbsent(ctx, k, []byte("{}")))
	}
	got, err := s.List(ctx, "_delta_log/", all[4])
	require.NoError(t, err)
	require.Equal(t, all[5:], keys(got))
	// startAfter need not exist ("…7.checkpoint.parquet" sorts before
	// "…7.json"), and may sort before the prefix.
	got, err = s.List(ctx, "_delta_log/", fmt.Sprintf("_delta_log/%020d.checkpoint.parquet", 7))
	require.NoError(t, err)
	require.Equal(t, all[7:], keys(got))
	got, err = s.List(ctx, "_delta_log/", "_a")
	require.NoError(t, err)
	require.Equal(t, all, keys(got))
	got, err = s.List(ctx, "_delta_log/", all[11])
	require.NoError(t, err)
	require.Empty(t, got)
}

func testListPrefix(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	for _, k := range []string{"_delta_log/00000000000000000009.json", "_delta_log/00000000000000000010.json",
		"_delta_log/00000000000000000010.checkpoint.parquet", "_delta_log/_last_checkpoint",
		"part-0001.parquet", "part-0002.parquet", "partition=1/part-0003.parquet"} {
		put(t, s, k, []byte("x"))
	}
	got, err := s.List(ctx, "_delta_log/0000000000000000001", "")
	require.NoError(t, err)
	require.Equal(t, []string{"_delta_log/00000000000000000010.checkpoint.parquet", "_delta_log/00000000000000000010.json"}, keys(got))
	got, err = s.List(ctx, "part", "")
	require.NoError(t, err)
	require.Equal(t, []string{"part-0001.parquet", "part-0002.parquet", "partition=1/part-0003.parquet"}, keys(got))
	got, err = s.List(ctx, "partition=1/", "")
	require.NoError(t, err)
	require.Equal(t, []string{"partition=1/part-0003.parquet"}, keys(got))
}

func testListEmpty(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	got, err := s.List(ctx, "", "")
	require.NoError(t, err)
	require.Empty(t, got)
	got, err = s.List(ctx, "no/such/dir/", "")
	require.NoError(t, err)
	require.Empty(t, got)
}

func testDelete(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	put(t, s, "d/x", []byte("1"))
	put(t, s, "d/y", []byte("2"))
	require.NoError(t, s.Delete(ctx, "d/x"))
	_, err := s.Get(ctx, "d/x")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.NoError(t, s.Delete(ctx, "d/x"), "deleting a missing key")
	require.NoError(t, s.Delete(ctx, "never/was"))
	got, err := s.List(ctx, "", "")
	require.NoError(t, err)
	require.Equal(t, []string{"d/y"}, keys(got))
	// A deleted key can be put-if-absent again.
	require.NoError(t, s.PutIfAbsent(ctx, "d/x", []byte("3")))
}

func testSub(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant, err := store.Sub(s, "tenant-1")
	require.NoError(t, err)
	table, err := store.Sub(tenant, "bronze/events/")
	require.NoError(t, err)
	require.NoError(t, table.PutIfAbsent(ctx, "_delta_log/00000000000000000000.json", []byte("v0")))
	put(t, table, "part-1.parquet", []byte("data"))
	put(t, s, "tenant-1/bronze/eventsX/other", []byte("not in the table"))

	got, err := s.Get(ctx, "tenant-1/bronze/events/_delta_log/00000000000000000000.json")
	require.NoError(t, err)
	require.Equal(t, "v0", string(got))

	infos, err := table.List(ctx, "", "")
	require.NoError(t, err)
	require.Equal(t, []string{"_delta_log/00000000000000000000.json", "part-1.parquet"}, keys(infos))
	infos, err = table.List(ctx, "_delta_log/", "_delta_log/00000000000000000000.json")
	require.NoError(t, err)
	require.Empty(t, infos)
	infos, err = tenant.List(ctx, "bronze/", "")
	require.NoError(t, err)
	require.Equal(t, []string{"bronze/events/_delta_log/00000000000000000000.json", "bronze/events/part-1.parquet", "bronze/eventsX/other"}, keys(infos))

	info, err := table.Stat(ctx, "part-1.parquet")
	require.NoError(t, err)
	require.Equal(t, "part-1.parquet", info.Key)
	err = table.PutIfAbsent(ctx, "_delta_log/00000000000000000000.json", []byte("again"))
	require.ErrorIs(t, err, store.ErrExists)
	require.NoError(t, table.Delete(ctx, "part-1.parquet"))
	_, err = s.Stat(ctx, "tenant-1/bronze/events/part-1.parquet")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = table.Get(ctx, "../x")
	require.ErrorIs(t, err, store.ErrInvalidKey)
	require.Contains(t, table.String(), "tenant-1/bronze/events")
}

func testPutIfAbsent(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	key := "_delta_log/00000000000000000001.json"
	require.NoError(t, s.PutIfAbsent(ctx, key, []byte("first")))
	err := s.PutIfAbsent(ctx, key, []byte("second"))
	require.ErrorIs(t, err, store.ErrExists)
	require.NotErrorIs(t, err, store.ErrAmbiguous)
	got, err := s.Get(ctx, key)
	require.NoError(t, err)
	require.Equal(t, "first", string(got))
	// An object written by Put also blocks put-if-absent.
	put(t, s, "by-put", []byte("p"))
	require.ErrorIs(t, s.PutIfAbsent(ctx, "by-put", []byte("q")), store.ErrExists)
	infos, err := s.List(ctx, "", "")
	require.NoError(t, err)
	require.Equal(t, []string{key, "by-put"}, keys(infos), "no temporary or extra objects are visible")
}

// testPutIfAbsentRace: 16 goroutines race for each of several keys with
// different bodies; exactly one wins each key and its body is what is stored.
func testPutIfAbsentRace(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	const writers, rounds = 16, 4
	for round := 0; round < rounds; round++ {
		key := fmt.Sprintf("_delta_log/%020d.json", round)
		start := make(chan struct{})
		errs := make([]error, writers)
		var wg sync.WaitGroup
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[w] = s.PutIfAbsent(ctx, key, []byte(fmt.Sprintf("writer %d of round %d", w, round)))
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for w, err := range errs {
			if err == nil {
				require.Equal(t, -1, winner, "round %d: writers %d and %d both won", round, winner, w)
				winner = w
				continue
			}
			require.ErrorIs(t, err, store.ErrExists, "round %d writer %d", round, w)
		}
		require.NotEqual(t, -1, winner, "round %d: nobody won", round)
		got, err := s.Get(ctx, key)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("writer %d of round %d", winner, round), string(got))
	}
}

type failingReader struct {
	r     io.Reader
	after int
	n     int
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n >= f.after {
		return 0, errors.New("disk on fire")
	}
	if len(p) > f.after-f.n {
		p = p[:f.after-f.n]
	}
	n, err := f.r.Read(p)
	f.n += n
	return n, err
}

func testPutFailingReader(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	for _, size := range []int{1000, LargeSize} {
		body := randomBytes(t, size)
		key := fmt.Sprintf("part-%d.parquet", size)
		err := s.Put(ctx, key, &failingReader{r: bytes.NewReader(body), after: size - 10}, int64(size))
		require.Error(t, err)
		_, err = s.Stat(ctx, key)
		require.ErrorIs(t, err, store.ErrNotFound, "a failed put left an object behind")
		// A short body with a declared size is refused too.
		err = s.Put(ctx, key, bytes.NewReader(body[:size-1]), int64(size))
		require.Error(t, err)
		_, err = s.Stat(ctx, key)
		require.ErrorIs(t, err, store.ErrNotFound, "a short put left an object behind")
	}
	infos, err := s.List(ctx, "", "")
	require.NoError(t, err)
	require.Empty(t, infos)
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return b
}

func testLarge(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	body := randomBytes(t, LargeSize)
	require.NoError(t, s.Put(ctx, "big/part-0.parquet", bytes.NewReader(body), int64(len(body))))
	info, err := s.Stat(ctx, "big/part-0.parquet")
	require.NoError(t, err)
	require.EqualValues(t, LargeSize, info.Size)
	got, err := s.Get(ctx, "big/part-0.parquet")
	require.NoError(t, err)
	require.True(t, bytes.Equal(body, got), "large body differs")

	obj, err := s.Open(ctx, "big/part-0.parquet")
	require.NoError(t, err)
	defer obj.Close()
	require.EqualValues(t, LargeSize, obj.Size())
	// A Parquet reader's pattern: the footer, then ranges across part
	// boundaries (5 MiB parts).
	for _, r := range [][2]int64{{LargeSize - 8, 8}, {0, 4}, {5<<20 - 100, 200}, {10<<20 - 1, 2 << 20}} {
		buf := make([]byte, r[1])
		n, err := obj.ReadAt(buf, r[0])
		require.NoError(t, err)
		require.EqualValues(t, r[1], n)
		require.True(t, bytes.Equal(body[r[0]:r[0]+r[1]], buf), "range %v differs", r)
	}
	// Unknown size (-1) works too.
	require.NoError(t, s.Put(ctx, "big/part-1.parquet", bytes.NewReader(body), -1))
	got, err = s.Get(ctx, "big/part-1.parquet")
	require.NoError(t, err)
	require.True(t, bytes.Equal(body, got), "large body of unknown size differs")
}

func testOpenRanges(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	body := []byte("0123456789abcdef")
	put(t, s, "f", body)
	obj, err := s.Open(ctx, "f")
	require.NoError(t, err)
	defer obj.Close()
	require.EqualValues(t, 16, obj.Size())

	buf := make([]byte, 4)
	n, err := obj.ReadAt(buf, 3)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.Equal(t, "3456", string(buf))

	// A read running past the end returns what there is and io.EOF.
	buf = make([]byte, 10)
	n, err = obj.ReadAt(buf, 12)
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, 4, n)
	require.Equal(t, "cdef", string(buf[:n]))

	// At or past the end: nothing and io.EOF.
	n, err = obj.ReadAt(buf, 16)
	require.ErrorIs(t, err, io.EOF)
	require.Zero(t, n)
	n, err = obj.ReadAt(buf, 100)
	require.ErrorIs(t, err, io.EOF)
	require.Zero(t, n)

	// Exactly to the end is not an error.
	buf = make([]byte, 16)
	n, err = obj.ReadAt(buf, 0)
	require.NoError(t, err)
	require.Equal(t, 16, n)

	// ReadAt is usable through io.SectionReader, as Parquet readers use it.
	sec, err := io.ReadAll(io.NewSectionReader(obj, 10, 6))
	require.NoError(t, err)
	require.Equal(t, "abcdef", string(sec))
}

func testCanceled(t *testing.T, s store.Store) {
	put(t, s, "k", []byte("v"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Get(ctx, "k")
	require.Error(t, err)
	err = s.PutIfAbsent(ctx, "new", []byte("v"))
	require.Error(t, err)
	require.NotErrorIs(t, err, store.ErrExists)
	_, err = s.Stat(ctxT(t), "new")
	require.ErrorIs(t, err, store.ErrNotFound, "a put-if-absent with a canceled context wrote")
	_, err = s.List(ctx, "", "")
	require.Error(t, err)
}

func testProbe(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	require.NoError(t, store.Probe(ctx, s))
	infos, err := s.List(ctx, "", "")
	require.NoError(t, err)
	require.Empty(t, infos, "the probe cleans up after itself")
}

// testPutAtomicForReaders replaces one object (like _last_checkpoint) over
// and over while readers read it: every read is one whole body, never a mix
// or a prefix. Bodies are a repeated byte with the length as a header.
func testPutAtomicForReaders(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	body := func(i int) []byte {
		n := 1000 + (i%7)*3000
		return append([]byte(fmt.Sprintf("%08d", n)), bytes.Repeat([]byte{byte('a' + i%26)}, n)...)
	}
	put(t, s, "_delta_log/_last_checkpoint", body(0))
	const writes, readers = 40, 3
	done := make(chan struct{})
	errs := make(chan error, readers)
	var wg sync.WaitGroup
	for r := 0; r < readers; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				got, err := s.Get(ctx, "_delta_log/_last_checkpoint")
				if err != nil {
					errs <- err
					return
				}
				var n int
				if _, err := fmt.Sscanf(string(got[:min(8, len(got))]), "%08d", &n); err != nil || len(got) != 8+n ||
					!bytes.Equal(got[8:], bytes.Repeat(got[8:9], n)) {
					errs <- fmt.Errorf("a reader saw a partial or mixed object of %d bytes", len(got))
					return
				}
			}
		}()
	}
	for i := 1; i <= writes; i++ {
		b := body(i)
		require.NoError(t, s.Put(ctx, "_delta_log/_last_checkpoint", bytes.NewReader(b), int64(len(b))))
	}
	close(done)
	wg.Wait()
	for r := 0; r < readers; r++ {
		require.NoError(t, <-errs)
	}
}

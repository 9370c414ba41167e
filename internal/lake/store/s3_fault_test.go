package store_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/omlhq/oml/internal/lake/s3test"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/store/storetest"
	"github.com/stretchr/testify/require"
)

// faultBucket is a fresh bucket reached directly (direct) and through a
// fault proxy (viaProxy) whose decisions apply to put-if-absent requests
// (a PUT carrying If-None-Match) until the returned counter says otherwise.
func faultBucket(t *testing.T, decide func(n int32, r *http.Request) s3test.Decision) (direct, viaProxy store.Store, condPuts *atomic.Int32) {
	t.Helper()
	b := s3test.NewBucket(t, nil)
	condPuts = new(atomic.Int32)
	proxy := s3test.NewProxy(t, b.Server.Endpoint, func(r *http.Request) s3test.Decision {
		if r.Method == http.MethodPut && r.Header.Get("If-None-Match") == "*" {
			return decide(condPuts.Add(1), r)
		}
		return s3test.Decision{Action: s3test.Pass}
	})
	cfg := b.Server.Config(b.Name)
	cfg.Endpoint = proxy.URL
	cfg.RequestTimeout = 2 * time.Second
	cfg.MaxBackoff = 20 * time.Millisecond
	s, err := store.OpenS3(context.Background(), cfg)
	require.NoError(t, err)
	return b.Store, s, condPuts
}

func TestS3PutIfAbsentWhoseResponseIsLostIsAmbiguousAndLanded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct, s, puts := faultBucket(t, func(n int32, _ *http.Request) s3test.Decision {
		return s3test.Decision{Action: s3test.DropResponse}
	})
	key := "_delta_log/00000000000000000003.json"
	err := s.PutIfAbsent(ctx, key, []byte("mine"))
	require.ErrorIs(t, err, store.ErrAmbiguous)
	require.NotErrorIs(t, err, store.ErrExists)
	require.EqualValues(t, 1, puts.Load(), "an ambiguous conditional write must not be retried")
	// Resolution by reading back: it landed, and it is ours.
	got, err := direct.Get(ctx, key)
	require.NoError(t, err)
	require.Equal(t, "mine", string(got))
}

func TestS3PutIfAbsentThatTimesOutIsAmbiguous(t *testing.T) {
	t.Parallel()
	direct, s, puts := faultBucket(t, func(int32, *http.Request) s3test.Decision {
		return s3test.Decision{Action: s3test.Hang}
	})
	err := s.PutIfAbsent(context.Background(), "k", []byte("v"))
	require.ErrorIs(t, err, store.ErrAmbiguous)
	require.EqualValues(t, 1, puts.Load())
	_, err = direct.Stat(context.Background(), "k")
	require.ErrorIs(t, err, store.ErrNotFound, "this time the request never reached the server")
}

func TestS3PutIfAbsentRetriesThrottlingThenWins(t *testing.T) {
	t.Parallel()
	direct, s, puts := faultBucket(t, func(n int32, _ *http.Request) s3test.Decision {
		switch n {
		case 1:
			return s3test.Decision{Action: s3test.Respond, Status: http.StatusServiceUnavailable, Code: "SlowDown"}
		case 2:
			return s3test.Decision{Action: s3test.Respond, Status: http.StatusTooManyRequests, Code: "TooManyRequests"}
		}
		return s3test.Decision{Action: s3test.Pass}
	})
	require.NoError(t, s.PutIfAbsent(context.Background(), "k", []byte("v")))
	require.EqualValues(t, 3, puts.Load())
	got, err := direct.Get(context.Background(), "k")
	require.NoError(t, err)
	require.Equal(t, "v", string(got))
}

func TestS3PutIfAbsentConflictIsResolvedByReadingBack(t *testing.T) {
	t.Parallel()
	conflictOnce := func(n int32, _ *http.Request) s3test.Decision {
		if n == 1 {
			return s3test.Decision{Action: s3test.Respond, Status: http.StatusConflict, Code: "ConditionalRequestConflict"}
		}
		return s3test.Decision{Action: s3test.Pass}
	}
	t.Run("KeyStillAbsentSoTheWriteIsRetried", func(t *testing.T) {
		t.Parallel()
		direct, s, puts := faultBucket(t, conflictOnce)
		require.NoError(t, s.PutIfAbsent(context.Background(), "k", []byte("mine")))
		require.EqualValues(t, 2, puts.Load())
		got, err := direct.Get(context.Background(), "k")
		require.NoError(t, err)
		require.Equal(t, "mine", string(got))
	})
	t.Run("KeyNowExistsSoSomeoneElseWon", func(t *testing.T) {
		t.Parallel()
		direct, s, puts := faultBucket(t, conflictOnce)
		require.NoError(t, direct.PutIfAbsent(context.Background(), "k", []byte("theirs")))
		err := s.PutIfAbsent(context.Background(), "k", []byte("mine"))
		require.ErrorIs(t, err, store.ErrExists)
		require.EqualValues(t, 1, puts.Load())
		got, err := direct.Get(context.Background(), "k")
		require.NoError(t, err)
		require.Equal(t, "theirs", string(got))
	})
}

func TestS3PutIfAbsentInternalErrorIsAmbiguousNotRetried(t *testing.T) {
	t.Parallel()
	_, s, puts := faultBucket(t, func(int32, *http.Request) s3test.Decision {
		return s3test.Decision{Action: s3test.Respond, Status: http.StatusInternalServerError, Code: "InternalError"}
	})
	err := s.PutIfAbsent(context.Background(), "k", []byte("v"))
	require.ErrorIs(t, err, store.ErrAmbiguous)
	require.EqualValues(t, 1, puts.Load())
}

func TestS3PutIfAbsentRefusedIsNotAmbiguous(t *testing.T) {
	t.Parallel()
	_, s, _ := faultBucket(t, func(int32, *http.Request) s3test.Decision {
		return s3test.Decision{Action: s3test.Respond, Status: http.StatusForbidden, Code: "AccessDenied"}
	})
	err := s.PutIfAbsent(context.Background(), "k", []byte("v"))
	require.Error(t, err)
	require.NotErrorIs(t, err, store.ErrAmbiguous)
	require.NotErrorIs(t, err, store.ErrExists)
	require.ErrorContains(t, err, "AccessDenied")
}

func TestS3ReadsAndPutsAreRetriedOnServerErrors(t *testing.T) {
	t.Parallel()
	b := s3test.NewBucket(t, nil)
	var gets, puts atomic.Int32
	proxy := s3test.NewProxy(t, b.Server.Endpoint, func(r *http.Request) s3test.Decision {
		switch {
		case r.Method == http.MethodGet && r.URL.Query().Get("list-type") == "" && gets.Add(1) <= 2:
			return s3test.Decision{Action: s3test.Respond, Status: http.StatusServiceUnavailable, Code: "SlowDown"}
		case r.Method == http.MethodPut && r.Header.Get("If-None-Match") == "" && puts.Add(1) == 1:
			return s3test.Decision{Action: s3test.DropResponse}
		}
		return s3test.Decision{Action: s3test.Pass}
	})
	cfg := b.Server.Config(b.Name)
	cfg.Endpoint = proxy.URL
	cfg.MaxBackoff = 20 * time.Millisecond
	s, err := store.OpenS3(context.Background(), cfg)
	require.NoError(t, err)
	ctx := context.Background()
	// A plain Put is idempotent: a lost response is simply retried.
	require.NoError(t, s.Put(ctx, "part-0.parquet", nil, 0))
	require.EqualValues(t, 2, puts.Load())
	got, err := s.Get(ctx, "part-0.parquet")
	require.NoError(t, err)
	require.Empty(t, got)
	require.EqualValues(t, 3, gets.Load())
}

func TestS3UnreachableEndpointFailsWithoutAmbiguity(t *testing.T) {
	t.Parallel()
	cfg := store.S3Config{Bucket: "oml-none", Endpoint: "http://127.0.0.1:1", Region: s3test.Region,
		AccessKeyID: "x", SecretAccessKey: "y", MaxAttempts: 3, MaxBackoff: 10 * time.Millisecond}
	s, err := store.OpenS3(context.Background(), cfg)
	require.NoError(t, err)
	err = s.PutIfAbsent(context.Background(), "k", []byte("v"))
	require.Error(t, err)
	require.NotErrorIs(t, err, store.ErrAmbiguous, "a refused connection never sent the write")
	require.ErrorContains(t, err, "not applied after 3 attempts")
}

func TestS3ReadsRetryABodyCutMidway(t *testing.T) {
	t.Parallel()
	b := s3test.NewBucket(t, nil)
	var cuts atomic.Int32
	proxy := s3test.NewProxy(t, b.Server.Endpoint, func(r *http.Request) s3test.Decision {
		if r.Method == http.MethodGet && r.URL.Query().Get("list-type") == "" && cuts.Add(1)%2 == 1 {
			return s3test.Decision{Action: s3test.CutBody} // every other GET
		}
		return s3test.Decision{Action: s3test.Pass}
	})
	cfg := b.Server.Config(b.Name)
	cfg.Endpoint = proxy.URL
	cfg.MaxBackoff = 20 * time.Millisecond
	s, err := store.OpenS3(context.Background(), cfg)
	require.NoError(t, err)
	ctx := context.Background()
	body := []byte("0123456789abcdefghijklmnopqrstuvwxyz")
	require.NoError(t, b.Store.Put(ctx, "part-0.parquet", bytes.NewReader(body), int64(len(body))))

	got, err := s.Get(ctx, "part-0.parquet")
	require.NoError(t, err)
	require.Equal(t, body, got)

	obj, err := s.Open(ctx, "part-0.parquet")
	require.NoError(t, err)
	buf := make([]byte, 10)
	n, err := obj.ReadAt(buf, 20)
	require.NoError(t, err)
	require.Equal(t, "klmnopqrst", string(buf[:n]))
	require.EqualValues(t, 4, cuts.Load(), "two cut bodies, two retries")
}

func TestS3FailedMultipartPutIsAbortedAndInvisible(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := s3test.NewBucket(t, storetest.MultipartConfig)
	body := make([]byte, storetest.LargeSize)
	r := io.MultiReader(bytes.NewReader(body[:11<<20]), iotest.ErrReader(errors.New("disk on fire")))
	err := b.Store.Put(ctx, "part-0.parquet", r, int64(len(body)))
	require.ErrorContains(t, err, "disk on fire")
	_, err = b.Store.Stat(ctx, "part-0.parquet")
	require.ErrorIs(t, err, store.ErrNotFound)
	ups, err := b.Store.Client().ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(b.Name)})
	require.NoError(t, err)
	require.Empty(t, ups.Uploads, "the failed upload was not aborted")
}

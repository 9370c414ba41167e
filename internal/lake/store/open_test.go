package store_test

import (
	"context"
	"testing"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/stretchr/testify/require"
)

func TestOpenRefusesBadLakeURLsWithOneLineErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ url, want string }{
		{"", "no lake URL given"},
		{"file://relative/path", "not an absolute file URL"},
		{"file:relative", "not an absolute file URL"},
		{"file:///abs?x=1", "takes only one parameter, sync"},
		{"file:///abs?sync=group&sync=file", "takes only one parameter, sync"},
		{"file:///abs?sync=fast", `"fast" is not a sync mode`},
		{"file:///abs#frag", "takes no fragment"},
		{"/abs/path", "has no scheme"},
		{"gs://bucket/x", `unsupported scheme "gs"`},
		{"s3:///prefix", "names no bucket"},
		{"s3://Bad_Bucket/x", "not a valid S3 bucket name"},
		{"s3://bucket/a/../b", "not a valid key prefix"},
		{"s3://user:secret@bucket/x", "takes no user"},
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			t.Parallel()
			_, err := store.Open(context.Background(), tc.url)
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "\n")
			require.NotContains(t, err.Error(), "secret", "the error leaks a secret")
		})
	}
}

func TestOpenFileURL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := store.Open(context.Background(), "file://"+dir+"/lake/")
	require.NoError(t, err)
	require.Equal(t, "file://"+dir+"/lake", s.String())
	require.NoError(t, s.PutIfAbsent(context.Background(), "x", []byte("1")))

	_, err = store.Open(context.Background(), "file://"+dir+"/lake/x")
	require.ErrorContains(t, err, "not a directory")
}

func TestOpenFileURLSelectsTheSyncMode_AutoByDefault(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for url, want := range map[string]store.FileSync{
		"file://" + dir:                 store.SyncAuto,
		"file://" + dir + "?sync=auto":  store.SyncAuto,
		"file://" + dir + "?sync=file":  store.SyncPerFile,
		"file://" + dir + "?sync=group": store.SyncGroup,
	} {
		s, err := store.Open(context.Background(), url)
		require.NoError(t, err, url)
		f := s.(*store.File)
		require.Equal(t, want, f.SyncMode(), url)
		require.Equal(t, "file://"+dir, s.String(), "the sync mode is no part of the store's name")
		require.NoError(t, store.ValidateURL(url))
		if want != store.SyncAuto {
			require.Equal(t, want, f.SyncInEffect(), url)
		}
		wantPar := store.FileConcurrency
		if f.SyncInEffect() == store.SyncGroup {
			wantPar = store.FileGroupConcurrency
		}
		require.Equal(t, wantPar, store.Concurrency(s), url)
	}
}

func TestOpenS3URLNeedsARegion(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	_, err := store.Open(context.Background(), "s3://bucket/prefix")
	require.ErrorContains(t, err, "set AWS_REGION")
}

func TestOpenS3URLTakesEndpointFromEnvironment(t *testing.T) {
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
	t.Setenv("AWS_ACCESS_KEY_ID", "ak")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "sk")
	s, err := store.Open(context.Background(), "s3://bucket/lake/root/")
	require.NoError(t, err)
	require.Equal(t, "s3://bucket/lake/root", s.String())
	o := s.(*store.S3).Client().Options()
	require.Equal(t, "http://127.0.0.1:1", *o.BaseEndpoint)
	require.True(t, o.UsePathStyle, "a custom endpoint uses path-style addressing")
	require.Equal(t, "eu-west-1", o.Region)
}

func TestSubRefusesInvalidPrefix(t *testing.T) {
	t.Parallel()
	_, err := store.Sub(store.NewMem(), "a/../b")
	require.ErrorIs(t, err, store.ErrInvalidKey)
	m := store.NewMem()
	same, err := store.Sub(m, "/")
	require.NoError(t, err)
	require.Same(t, m, same.(*store.Mem))
}

// Whatever a bad lake URL carries in its userinfo, query or fragment (an
// s3 URL pasted with a presigned query, a token) is masked in the error,
// never partly printed.
func TestOpen_BadLakeURLErrorsMaskUserinfoQueryAndFragmentFully(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"s3://bucket/x?X-Amz-Credential=AKIASECRET&X-Amz-Signature=sekrit",
		"s3://bucket/x?token=sekrit#frag-sekrit",
		"s3://AKIASECRET:sekrit@bucket/x",
		"file:///abs?token=sekrit",
		"file://AKIASECRET:sekrit@host/abs",
		"s3://bucket/x?token=sek%zzrit",
		"s3://AKIASECRET:sek rit@bu cket/%zz?token=sekrit",
		"gs://AKIASECRET:sekrit@bucket/x?token=sekrit",
		"s3:///prefix?token=sekrit",
		"file:sekrit",
	} {
		_, err := store.Open(context.Background(), u)
		require.Error(t, err, u)
		for _, secret := range []string{"sekrit", "AKIASECRET", "sek"} {
			require.NotContains(t, err.Error(), secret, "%s: %v", u, err)
		}
	}
}

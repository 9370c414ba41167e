package cliutil

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/iostreams"
)

func testFactory(env map[string]string) *Factory {
	io, _, _, _ := iostreams.Test()
	f := New(io)
	f.Getenv = func(k string) string { return env[k] }
	return f
}

func TestFactory_LakeNotConfigured_FailsWithTheCommandsSentence(t *testing.T) {
	t.Parallel()
	f := testFactory(nil)
	_, err := f.Lake(context.Background(), "oml reconcile reads the lake, but no lake is configured")
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "oml reconcile reads the lake, but no lake is configured", err.Error())

	_, err = f.Lake(context.Background(), "")
	require.ErrorAs(t, err, &ce)
	require.Equal(t, NoLake, err.Error())

	st, err := f.OptionalLake(context.Background())
	require.NoError(t, err)
	require.Nil(t, st, "no lake configured: OptionalLake is nil, not an error")
}

func TestFactory_Lake_FlagWinsOverEnvAndIsOpenedOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := testFactory(map[string]string{EnvLakeURL: "file://" + filepath.Join(dir, "from-env")})
	f.Flags.Lake = "file://" + filepath.Join(dir, "from-flag")
	a, err := f.Lake(context.Background(), "")
	require.NoError(t, err)
	require.Contains(t, a.String(), "from-flag")
	b, err := f.OptionalLake(context.Background())
	require.NoError(t, err)
	require.Same(t, a, b, "the lake root is opened once and shared")
}

func TestFactory_BadLakeURL_IsAConfigError(t *testing.T) {
	t.Parallel()
	f := testFactory(map[string]string{EnvLakeURL: "./relative/lake"})
	_, err := f.OptionalLake(context.Background())
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, ExitUsage, ExitCodeFor(err))
}

func TestFactory_DBOpenFailed_TriedAgainOnTheNextCall(t *testing.T) {
	t.Parallel()
	reads := 0
	io, _, _, _ := iostreams.Test()
	f := New(io)
	f.Getenv = func(k string) string {
		if k == EnvDatabaseURL {
			reads++
			return "postgres://oml@[::1"
		}
		return ""
	}
	for range 2 {
		_, err := f.DB(context.Background())
		var ce *ConfigError
		require.ErrorAs(t, err, &ce)
	}
	require.Equal(t, 2, reads, "a failed open must not be remembered (doctor --watch retries a database that was down)")
}

func TestFactory_SignerNotConfigured_IsNil(t *testing.T) {
	t.Parallel()
	f := testFactory(nil)
	k, err := f.Signer()
	require.NoError(t, err)
	require.Nil(t, k)

	f.Flags.SigningKey = filepath.Join(t.TempDir(), "missing.key")
	_, err = f.Signer()
	var ce *ConfigError
	require.True(t, errors.As(err, &ce), "a key file that cannot be read is a configuration error: %v", err)
}

func TestNonNil_NilListIsAnEmptyJSONArray(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	require.NoError(t, WriteJSON(&b, struct {
		L []int `json:"l"`
	}{NonNil([]int(nil))}))
	require.JSONEq(t, `{"l": []}`, b.String())
	require.Equal(t, []int{1}, NonNil([]int{1}))
}

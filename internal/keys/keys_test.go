package keys

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGenerateWriteLoadRoundTrip(t *testing.T) {
	t.Parallel()
	k, err := Generate()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "deploy.key")
	require.NoError(t, WriteFile(path, k, WriteOptions{}))

	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	got, err := LoadFile(path)
	require.NoError(t, err)
	require.Equal(t, k.KeyID(), got.KeyID())
	require.True(t, ed25519.Verify(got.Public(), []byte("m"), k.Sign([]byte("m"))))
	require.Len(t, k.KeyID(), 32)
	require.NotContains(t, k.String(), "PRIVATE")
}

func TestWriteRefusesExistingUnlessForced(t *testing.T) {
	t.Parallel()
	a, _ := Generate()
	b, _ := Generate()
	path := filepath.Join(t.TempDir(), "k")
	require.NoError(t, WriteFile(path, a, WriteOptions{}))
	err := WriteFile(path, b, WriteOptions{})
	require.ErrorIs(t, err, ErrExists)
	got, err := LoadFile(path)
	require.NoError(t, err)
	require.Equal(t, a.KeyID(), got.KeyID(), "a refused write must leave the old key")

	require.NoError(t, WriteFile(path, b, WriteOptions{Force: true}))
	got, err = LoadFile(path)
	require.NoError(t, err)
	require.Equal(t, b.KeyID(), got.KeyID())
	st, _ := os.Stat(path)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
}

func TestLoadErrorsAreOneClearLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	k, _ := Generate()
	good, _ := k.MarshalPEM()
	write := func(name string, data []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, data, mode))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	cases := []struct {
		name, path, want string
	}{
		{"missing file", filepath.Join(dir, "nope"), "does not exist"},
		{"no path", "", "no signing key given"},
		{"world readable", write("wide", good, 0o644), "chmod 600"},
		{"not pem", write("junk", []byte("hello"), 0o600), "not a PEM file"},
		{"wrong pem type", write("cert", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), 0o600), `"CERTIFICATE"`},
		{"bad der", write("bad", []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), 0o600), "not a valid PKCS#8"},
		{"trailing data", write("two", append(append([]byte{}, good...), good...), 0o600), "exactly one key"},
		{"directory", dir, "is a directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadFile(tc.path)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			require.NotContains(t, err.Error(), "\n")
			require.False(t, strings.Contains(err.Error(), string(good[30:60])), "error must not echo key material")
		})
	}
}

func TestKeyIDIsFirst16BytesOfSHA256OfPublicKey(t *testing.T) {
	t.Parallel()
	// RFC 8032 test 1 seed.
	seed := mustHex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
	k, err := FromSeed(seed)
	require.NoError(t, err)
	require.Equal(t, "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", hexs(k.Public()))
	require.Equal(t, "21fe31dfa154a261626bf854046fd2271b7bed4b6abe45aa58877ef47f9721b9"[:32], k.KeyID())
}

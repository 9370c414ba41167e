package keys

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// PEMType is the PEM block type of a key file (PKCS#8).
const PEMType = "PRIVATE KEY"

// Key is a loaded ed25519 deployment key.
type Key struct {
	priv ed25519.PrivateKey
	id   string
}

// Generate makes a new random key.
func Generate() (*Key, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate an ed25519 key: %w", err)
	}
	return fromPrivate(priv), nil
}

// FromSeed builds the key whose RFC 8032 seed is seed (32 bytes). It exists
// for test vectors and tests; production keys come from Generate.
func FromSeed(seed []byte) (*Key, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("an ed25519 seed is %d bytes, got %d", ed25519.SeedSize, len(seed))
	}
	return fromPrivate(ed25519.NewKeyFromSeed(seed)), nil
}

func fromPrivate(priv ed25519.PrivateKey) *Key {
	return &Key{priv: priv, id: KeyID(priv.Public().(ed25519.PublicKey))}
}

// KeyID names a public key: lowercase hex of the first 16 bytes of
// SHA-256(public key).
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:16])
}

// KeyID is the key's id (see the package function KeyID).
func (k *Key) KeyID() string { return k.id }

// Public is the 32-byte public key.
func (k *Key) Public() ed25519.PublicKey { return k.priv.Public().(ed25519.PublicKey) }

// Sign signs msg (pure Ed25519, RFC 8032).
func (k *Key) Sign(msg []byte) []byte { return ed25519.Sign(k.priv, msg) }

// String never reveals key material.
func (k *Key) String() string { return "ed25519 key " + k.id }

// MarshalPEM encodes the key in the file format.
func (k *Key) MarshalPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k.priv)
	if err != nil {
		return nil, fmt.Errorf("encode the key as PKCS#8: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: PEMType, Bytes: der}), nil
}

// ParsePEM decodes a key file's contents. Errors never echo the contents.
func ParsePEM(data []byte) (*Key, error) {
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, errors.New("it is not a PEM file (expected a \"-----BEGIN PRIVATE KEY-----\" block as written by `oml key generate`)")
	}
	if block.Type != PEMType {
		return nil, fmt.Errorf("its PEM block is %q, expected %q (an ed25519 PKCS#8 key as written by `oml key generate`)", block.Type, PEMType)
	}
	if len(trimSpace(rest)) != 0 {
		return nil, errors.New("it has data after the PEM block; a key file holds exactly one key")
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, errors.New("its PEM block is not a valid PKCS#8 private key")
	}
	priv, ok := parsed.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("it holds a %T, but oml signs with ed25519 keys only", parsed)
	}
	return fromPrivate(priv), nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\n' || b[0] == '\r' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}

// ErrExists is returned by WriteFile when the file exists and
// WriteOptions.Force is off.
var ErrExists = errors.New("key file exists")

// WriteOptions say how WriteFile treats an existing file.
type WriteOptions struct {
	// Force replaces an existing file (atomically) instead of refusing it.
	Force bool
}

// WriteFile writes k to path with mode 0600. It refuses an existing file
// unless opts.Force is set; then it replaces it atomically.
func WriteFile(path string, k *Key, opts WriteOptions) error {
	data, err := k.MarshalPEM()
	if err != nil {
		return err
	}
	if !opts.Force {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s already exists; refusing to overwrite a signing key (pass --force to replace it, which orphans every chain it signed)", ErrExists, path)
		}
		if err != nil {
			return fmt.Errorf("cannot create the key file: %w", err)
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			os.Remove(path)
			return fmt.Errorf("cannot write the key file %s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return fmt.Errorf("cannot sync the key file %s: %w", path, err)
		}
		return f.Close()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".oml-key-*")
	if err != nil {
		return fmt.Errorf("cannot create a temporary key file next to %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("cannot set mode 0600 on the key file: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("cannot write the key file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("cannot sync the key file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("cannot write the key file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("cannot move the new key into place at %s: %w", path, err)
	}
	return nil
}

// LoadFile reads a key file, refusing missing, group/world-accessible or
// malformed files with a one-sentence error naming the file and the fix.
func LoadFile(path string) (*Key, error) {
	if path == "" {
		return nil, errors.New("no signing key given: pass --signing-key FILE or set OML_SIGNING_KEY_FILE (create one with `oml key generate --out FILE`)")
	}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("the signing key file %s does not exist: check --signing-key/OML_SIGNING_KEY_FILE, or create one with `oml key generate --out %s`", path, path)
	case err != nil:
		return nil, fmt.Errorf("cannot read the signing key file %s: %v", path, errors.Unwrap(err))
	case st.IsDir():
		return nil, fmt.Errorf("the signing key path %s is a directory, not a key file", path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("the signing key file %s has mode %04o, readable or writable by other users: run `chmod 600 %s` (and consider the key leaked if others could read it)", path, perm, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the signing key file %s: %v", path, errors.Unwrap(err))
	}
	k, err := ParsePEM(data)
	if err != nil {
		return nil, fmt.Errorf("the signing key file %s is malformed: %v", path, err)
	}
	return k, nil
}

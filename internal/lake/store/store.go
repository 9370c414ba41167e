package store

import (
	"context"
	"errors"
	"io"
	"time"
)

// Errors every backend returns (wrapped, test with errors.Is).
var (
	// ErrNotFound: the key does not exist.
	ErrNotFound = errors.New("object not found")
	// ErrExists: PutIfAbsent lost — the key already exists (someone else won).
	ErrExists = errors.New("object already exists")
	// ErrAmbiguous: a write may or may not have happened (a timeout or a lost
	// connection after the request was sent). The caller must read back to
	// learn the outcome; it must never blindly retry into a different key.
	ErrAmbiguous = errors.New("write outcome unknown")
	// ErrUnsupported: the store cannot do what was asked (e.g. it does not
	// honor put-if-absent); never silently degraded.
	ErrUnsupported = errors.New("operation not supported by this store")
	// ErrConfig: the store refused the request because of how it is
	// configured (credentials it does not accept, a bucket that does not
	// exist, no permission, the wrong region). Retrying cannot help; the
	// operator must fix the configuration. Errors wrapping it are
	// *ConfigError.
	ErrConfig = errors.New("object store configuration error")
)

// ConfigError is a request the store refused because of its configuration.
// Its message is one sentence naming the store, what was refused and what to
// fix; it never holds a secret.
type ConfigError struct {
	Store   string // the store's String()
	Problem string // e.g. "the server does not know the access key id (InvalidAccessKeyId): check AWS_ACCESS_KEY_ID"
	Err     error  // the backend's error
}

func (e *ConfigError) Error() string { return e.Store + ": " + e.Problem }

// Unwrap makes errors.Is(err, ErrConfig) and the backend's error both work.
func (e *ConfigError) Unwrap() []error { return []error{ErrConfig, e.Err} }

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key     string // relative to the store root, '/'-separated
	Size    int64
	ModTime time.Time
}

// Object is an open object for random-access reads (Parquet footers, pages).
type Object interface {
	io.ReaderAt
	io.Closer
	Size() int64
}

// Store is the narrow object-store interface the Delta layer is written
// against. Keys are '/'-separated paths relative to the store's root and
// never start with '/'.
//
// Transient failures (throttling, 5xx, connection resets before the request
// was sent) are retried inside the backend with backoff, bounded by ctx.
// What reaches the caller is either success, one of the sentinel errors
// above, or a terminal error. Every method refuses a key that ValidateKey
// rejects with ErrInvalidKey, on every backend.
type Store interface {
	// Get reads a whole object.
	Get(ctx context.Context, key string) ([]byte, error)
	// Open opens an object for ranged reads. On S3 the reads are bounded by
	// ctx (keep it alive while reading) and pinned to the version opened.
	Open(ctx context.Context, key string) (Object, error)
	// Stat returns an object's size and modification time.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// Put writes a whole object, replacing any existing one. The object
	// becomes visible atomically: readers see all of it or none of it.
	// Used for data files (unique names) and hints such as _last_checkpoint.
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	// PutIfAbsent writes a whole object only if key does not exist yet.
	// Exactly one of any number of concurrent callers for one key succeeds;
	// the others get ErrExists. An existing object is never overwritten.
	PutIfAbsent(ctx context.Context, key string, data []byte) error
	// List returns the objects whose keys start with prefix and sort after
	// startAfter (empty: from the beginning), in lexicographic key order.
	List(ctx context.Context, prefix, startAfter string) ([]ObjectInfo, error)
	// Delete removes an object; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// String describes the store for messages (URL with no secrets).
	String() string
}

// ErrInvalidKey: a key that is not a clean relative '/'-separated path (empty,
// leading '/', empty or "."/".." segments, a backslash or NUL byte, or a name
// that matches the file backend's temporary-file pattern).
var ErrInvalidKey = errors.New("invalid object key")

// OpKind names a Store operation; the fault injector, the in-memory store and
// the operation traces use it.
type OpKind int

// The Store operations.
const (
	OpGet OpKind = iota
	OpOpen
	OpStat
	OpPut
	OpPutIfAbsent
	OpList
	OpDelete
	// OpRead is one ReadAt on an opened object. Only the fault injector
	// uses it, and only for rules that name it (see Rule).
	OpRead
)

var opNames = [...]string{"get", "open", "stat", "put", "put-if-absent", "list", "delete", "read"}

func (k OpKind) String() string {
	if k < 0 || int(k) >= len(opNames) {
		return "op?"
	}
	return opNames[k]
}

// IsWrite reports whether the operation changes the store.
func (k OpKind) IsWrite() bool { return k == OpPut || k == OpPutIfAbsent || k == OpDelete }

package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"strings"
)

// Open opens the store a lake URL names:
//
//	file:///abs/path     a directory on a local filesystem; ?sync=auto (the
//	                     default), ?sync=file or ?sync=group say how writes
//	                     are flushed (SyncAuto, SyncPerFile, SyncGroup)
//	s3://bucket/prefix   an S3 bucket (endpoint, region and credentials from
//	                     the standard AWS environment; see OpenS3)
func Open(ctx context.Context, rawURL string) (Store, error) {
	u, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme == "file" {
		mode := DefaultFileSync
		if v := u.Query().Get("sync"); v != "" {
			mode = FileSync(v) // checked by parseURL
		}
		return NewFile(u.Path, WithSync(mode))
	}
	return OpenS3(ctx, S3Config{Bucket: u.Host, Prefix: strings.Trim(u.Path, "/")})
}

// ValidateURL checks a lake URL's form without opening anything, so a
// command can refuse a malformed --lake (a relative path, a missing scheme)
// as a configuration error before it runs.
func ValidateURL(rawURL string) error {
	_, err := parseURL(rawURL)
	return err
}

// parseURL parses and checks a lake URL; the scheme of what it returns is
// "file" or "s3".
func parseURL(rawURL string) (*url.URL, error) {
	if rawURL == "" {
		return nil, fmt.Errorf("no lake URL given: use file:///abs/path or s3://bucket/prefix")
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		// Not echoed: an unparseable URL may carry a secret anywhere.
		why := err
		var ue *url.Error
		if errors.As(err, &ue) {
			why = ue.Err
		}
		return nil, fmt.Errorf("the lake URL cannot be parsed (%v): use file:///abs/path or s3://bucket/prefix", why)
	}
	switch u.Scheme {
	case "file":
		if u.Opaque != "" || (u.Host != "" && u.Host != "localhost") || !strings.HasPrefix(u.Path, "/") {
			return nil, fmt.Errorf("lake URL %q is not an absolute file URL: write file:///abs/path (three slashes)", redactURL(u))
		}
		if err := checkFileQuery(u); err != nil {
			return nil, err
		}
		return u, nil
	case "s3":
		if u.Host == "" {
			return nil, fmt.Errorf("lake URL %q names no bucket: write s3://bucket/prefix", redactURL(u))
		}
		if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return nil, fmt.Errorf("lake URL %q: an s3 URL takes no user, query or fragment; credentials come from the AWS environment", redactURL(u))
		}
		return u, nil
	case "":
		return nil, fmt.Errorf("lake URL %q has no scheme: use file:///abs/path or s3://bucket/prefix", redactURL(u))
	default:
		return nil, fmt.Errorf("lake URL %q has unsupported scheme %q: use file:///abs/path or s3://bucket/prefix", redactURL(u), u.Scheme)
	}
}

// checkFileQuery allows a file URL one parameter, sync (auto, file or group), and
// no fragment.
func checkFileQuery(u *url.URL) error {
	if u.Fragment != "" {
		return fmt.Errorf("lake URL %q: a file URL takes no fragment", redactURL(u))
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return fmt.Errorf("lake URL %q: its query cannot be parsed: a file URL takes only ?sync=auto, ?sync=file or ?sync=group", redactURL(u))
	}
	for k, vs := range q {
		if k != "sync" || len(vs) != 1 {
			return fmt.Errorf("lake URL %q: a file URL takes only one parameter, sync (?sync=auto, ?sync=file or ?sync=group)", redactURL(u))
		}
		if _, err := parseFileSync(vs[0]); err != nil {
			return fmt.Errorf("lake URL %q: %w", redactURL(u), err)
		}
	}
	return nil
}

// RootMissing reports whether s is a file store whose root directory does
// not exist. Read-only commands ask before doing anything that would write
// (doctor's put-if-absent probe), because a write creates the tree: a
// mistyped --lake must never be brought into existence by a health check.
// Other backends have no such root and report false.
func RootMissing(s Store) (bool, error) {
	if sub, ok := s.(*subStore); ok {
		s = sub.inner
	}
	f, ok := s.(*File)
	if !ok {
		return false, nil
	}
	_, err := os.Stat(f.root)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	return false, err
}

// redactURL is u safe to print: the whole userinfo and the whole query
// (an s3 URL's query may carry a presigned credential, a token or a
// signature, in any parameter) and the fragment are masked, never partly
// shown.
func redactURL(u *url.URL) string {
	c := *u
	if c.User != nil {
		c.User = url.User("xxxxx")
	}
	if c.RawQuery != "" || c.ForceQuery {
		c.RawQuery, c.ForceQuery = "xxxxx", false
	}
	if c.Fragment != "" {
		c.Fragment, c.RawFragment = "xxxxx", ""
	}
	if c.Opaque != "" {
		c.Opaque = "xxxxx"
	}
	return c.String()
}

// Sub returns a Store whose keys live under prefix in s ("tenant/bronze/events"
// makes key "_delta_log/0.json" land at "tenant/bronze/events/_delta_log/0.json").
// An empty prefix returns s itself. prefix must be a valid key.
func Sub(s Store, prefix string) (Store, error) {
	prefix = strings.Trim(prefix, "/")
	if prefix == "" {
		return s, nil
	}
	if err := ValidateKey(prefix); err != nil {
		return nil, fmt.Errorf("sub-store prefix: %w", err)
	}
	if sub, ok := s.(*subStore); ok {
		return &subStore{inner: sub.inner, prefix: sub.prefix + prefix + "/"}, nil
	}
	return &subStore{inner: s, prefix: prefix + "/"}, nil
}

// MustSub is Sub for prefixes known to be valid (constants, tests).
func MustSub(s Store, prefix string) Store {
	sub, err := Sub(s, prefix)
	if err != nil {
		panic(err)
	}
	return sub
}

type subStore struct {
	inner  Store
	prefix string // ends in '/'
}

func (s *subStore) key(k string) (string, error) {
	if err := ValidateKey(k); err != nil {
		return "", err
	}
	return s.prefix + k, nil
}

func (s *subStore) String() string {
	return strings.TrimSuffix(s.inner.String(), "/") + "/" + strings.TrimSuffix(s.prefix, "/")
}

func (s *subStore) Get(ctx context.Context, key string) ([]byte, error) {
	k, err := s.key(key)
	if err != nil {
		return nil, err
	}
	return s.inner.Get(ctx, k)
}

func (s *subStore) Open(ctx context.Context, key string) (Object, error) {
	k, err := s.key(key)
	if err != nil {
		return nil, err
	}
	return s.inner.Open(ctx, k)
}

func (s *subStore) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	k, err := s.key(key)
	if err != nil {
		return ObjectInfo{}, err
	}
	info, err := s.inner.Stat(ctx, k)
	info.Key = key
	return info, err
}

func (s *subStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	k, err := s.key(key)
	if err != nil {
		return err
	}
	return s.inner.Put(ctx, k, r, size)
}

func (s *subStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	k, err := s.key(key)
	if err != nil {
		return err
	}
	return s.inner.PutIfAbsent(ctx, k, data)
}

func (s *subStore) List(ctx context.Context, prefix, startAfter string) ([]ObjectInfo, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	sa := ""
	if startAfter != "" {
		sa = s.prefix + startAfter
	}
	infos, err := s.inner.List(ctx, s.prefix+prefix, sa)
	if err != nil {
		return nil, err
	}
	for i := range infos {
		infos[i].Key = strings.TrimPrefix(infos[i].Key, s.prefix)
	}
	return infos, nil
}

func (s *subStore) Delete(ctx context.Context, key string) error {
	k, err := s.key(key)
	if err != nil {
		return err
	}
	return s.inner.Delete(ctx, k)
}

package keycmd

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/keyring"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/testkit/runtest"
)

// seeded is a fixed key, so key ids in the golden files do not change.
func seeded(t *testing.T, b byte) *keys.Key {
	t.Helper()
	k, err := keys.FromSeed(bytes.Repeat([]byte{b}, 32))
	require.NoError(t, err)
	return k
}

func openNone(context.Context) (*pgxpool.Pool, error) { return nil, nil }

// The key verbs' run functions without a database or key files: what they
// print (tty on and off, golden -o json), that they ask before journalling
// on a terminal, and the exit of a refusal (1).
func TestKeyRuns_PrintAskAndExit(t *testing.T) {
	old, next := seeded(t, 1), seeded(t, 2)
	listed := []keyring.Key{
		{KeyID: old.KeyID(), Role: "root", PublicKey: "AAAA", IssuedSeq: 1, IssuedAt: runtest.At, RevokedSeq: runtest.Ptr(int64(9)), RevokedAt: runtest.Ptr(runtest.At), LastUsedAt: runtest.Ptr(runtest.At)},
		{KeyID: next.KeyID(), Role: "rotated", PublicKey: "BBBB", IssuedSeq: 5, IssuedAt: runtest.At},
	}
	refused := fmt.Errorf("%w: key %s is already revoked", keyring.ErrRefused, old.KeyID())
	rotate := func(ans string, err error) func(*runtest.Streams, bool, bool) error {
		return func(s *runtest.Streams, json, yes bool) error {
			s.In.WriteString(ans)
			return rotateRun(context.Background(), &RotateOptions{IO: s.IO, Format: runtest.Format(json), Open: openNone, New: "/etc/oml/next.key", Yes: yes,
				Signer:  func() (*keys.Key, error) { return old, nil },
				LoadNew: func(string) (*keys.Key, error) { return next, nil },
				Rotate:  func(context.Context, *pgxpool.Pool, chain.Signer, *keys.Key) (int64, error) { return 7, err }})
		}
	}
	revoke := func(ans string, err error) func(*runtest.Streams, bool, bool) error {
		return func(s *runtest.Streams, json, yes bool) error {
			s.In.WriteString(ans)
			return revokeRun(context.Background(), &RevokeOptions{IO: s.IO, Format: runtest.Format(json), Open: openNone, KeyID: old.KeyID(), By: "ops", Reason: "lost", Yes: yes,
				Signer: func() (*keys.Key, error) { return next, nil },
				Revoke: func(_ context.Context, _ *pgxpool.Pool, s chain.Signer, id, by, reason string) (keyring.RevokeResult, error) {
					require.Equal(t, []string{old.KeyID(), "ops", "lost"}, []string{id, by, reason})
					return keyring.RevokeResult{KeyID: id, ProviderSeq: 8, Chains: 3, SignedBy: s.KeyID()}, err
				}})
		}
	}
	list := func(s *runtest.Streams, json, _ bool) error {
		return listRun(context.Background(), &ListOptions{IO: s.IO, Format: runtest.Format(json), Keys: func(context.Context) ([]keyring.Key, error) { return listed, nil }})
	}
	show := func(s *runtest.Streams, json, _ bool) error {
		return showRun(&ShowOptions{IO: s.IO, Format: runtest.Format(json), Key: func() (*keys.Key, error) { return old, nil }, Path: func() string { return "/etc/oml/deploy.key" }})
	}
	generate := func(s *runtest.Streams, json, _ bool) error {
		return generateRun(&GenerateOptions{IO: s.IO, Format: runtest.Format(json), Out: "/etc/oml/new.key",
			Generate: func() (*keys.Key, error) { return next, nil },
			Write: func(path string, k *keys.Key, o keys.WriteOptions) error {
				require.Equal(t, "/etc/oml/new.key", path)
				require.Same(t, next, k)
				if !o.Force {
					return keys.ErrExists
				}
				return nil
			}, Force: !json})
	}
	cases := []struct {
		name      string
		run       func(s *runtest.Streams, json, yes bool) error
		tty, json bool
		yes       bool
		wantCode  cliutil.ExitCode
	}{
		{name: "list-tty", run: list, tty: true},
		{name: "list-no-tty", run: list},
		{name: "list-json", run: list, json: true},
		{name: "show", run: show},
		{name: "show-json", run: show, json: true},
		{name: "generate", run: generate},
		{name: "generate-exists", run: generate, json: true, wantCode: cliutil.ExitUsage},
		{name: "rotate-yes", run: rotate("", nil), yes: true},
		{name: "rotate-json", run: rotate("", nil), yes: true, json: true},
		{name: "rotate-tty-yes", run: rotate("y\n", nil), tty: true},
		{name: "rotate-tty-no", run: rotate("n\n", nil), tty: true},
		{name: "rotate-refused", run: rotate("", refused), yes: true, wantCode: cliutil.ExitFindings},
		{name: "revoke-yes", run: revoke("", nil), yes: true},
		{name: "revoke-json", run: revoke("", nil), yes: true, json: true},
		{name: "revoke-tty-no", run: revoke("\n", nil), tty: true},
		{name: "revoke-refused", run: revoke("", refused), yes: true, wantCode: cliutil.ExitFindings},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := runtest.IO(tc.tty)
			err := tc.run(&s, tc.json, tc.yes)
			runtest.RequireStreams(t, s, err, tc.wantCode)
		})
	}
}

package pgconn

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRedact_NeverPrintsThePassword(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{
		"postgres://alice:s3cr3t@db.example:5432/oml?sslmode=disable",
		"postgres://alice@db.example/oml?password=s3cr3t",
		"host=db.example user=alice password=s3cr3t dbname=oml",
	} {
		require.NotContains(t, Redact(dsn), "s3cr3t", dsn)
		require.NotContains(t, redactErr(errors.New("failed for s3cr3t"), dsn), "s3cr3t", dsn)
	}
}

func TestParseConfig_BadURLIsOneSentenceWithoutSecret(t *testing.T) {
	t.Parallel()
	_, err := ParseConfig("postgres://alice:s3cr3t@db.example:notaport/oml", Options{})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cr3t")
	require.NotContains(t, err.Error(), "\n")
	require.Contains(t, err.Error(), "malformed")

	_, err = ParseConfig("  ", Options{})
	require.ErrorContains(t, err, "OML_DATABASE_URL")
}

func TestParseConfig_DefaultsApplicationNameAndTimeout(t *testing.T) {
	t.Parallel()
	cfg, err := ParseConfig("postgres://u@h/db", Options{})
	require.NoError(t, err)
	require.Equal(t, "oml", cfg.ConnConfig.RuntimeParams["application_name"])
	require.NotZero(t, cfg.ConnConfig.ConnectTimeout)

	cfg, err = ParseConfig("postgres://u@h/db?application_name=mine", Options{})
	require.NoError(t, err)
	require.Equal(t, "mine", cfg.ConnConfig.RuntimeParams["application_name"])
}

func TestOneLine_FoldsRepeatedLines(t *testing.T) {
	t.Parallel()
	got := oneLine("failed to connect:\n\t1.2.3.4: refused\n\t1.2.3.4: refused\n")
	require.Equal(t, "failed to connect: 1.2.3.4: refused", got)
	require.False(t, strings.Contains(got, "\n"))
}

// Each DSN carries the secret "s3 cr@t" (or a part of it) in a form a naive
// mask misses: a quoted keyword/value password with a space, spaces around
// '=', an escaped quote, an unterminated quote, an unescaped '@' in a URL
// password, a percent-encoded one, an sslpassword.
func TestRedact_MasksPasswordsInEveryFormLibpqAccepts(t *testing.T) {
	t.Parallel()
	for dsn, pieces := range map[string][]string{
		"host=db password='s3 cr@t' user=alice":          {"s3", "cr@t"},
		"host=db password = s3cr@t user=alice":           {"s3cr@t"},
		`host=db password='it\'s s3cr@t' user=alice`:     {"s3cr@t", "it"},
		"host=db password='s3 cr@t user=alice":           {"s3", "cr@t"},
		"postgres://alice:s3cr@t@db.example:5432/oml":    {"s3cr@t", "s3cr"},
		"postgres://alice:s3cr%40t@db.example:5432/oml":  {"s3cr%40t", "s3cr@t"},
		"postgres://alice@db/oml?sslpassword=s3cr@t":     {"s3cr@t"},
		"postgres://alice:s3cr@t@db:badport/oml?x=1":     {"s3cr@t", "s3cr"},
		"host=db sslpassword='s3 cr@t' password=s3cr@t2": {"s3", "cr@t"},
	} {
		red := Redact(dsn)
		msg := redactErr(errors.New("cannot parse "+dsn+": failed"), dsn)
		for _, p := range pieces {
			require.NotContains(t, red, p, "Redact(%q) = %q", dsn, red)
			require.NotContains(t, msg, p, "redactErr for %q = %q", dsn, msg)
		}
		require.Contains(t, red, "xxxxx", dsn)
	}
	require.Equal(t, "host=db password=xxxxx user=alice", Redact("host=db password='s3 cr@t' user=alice"))
	require.Equal(t, "postgres://alice:xxxxx@db.example:5432/oml", Redact("postgres://alice:s3cr@t@db.example:5432/oml"))
}

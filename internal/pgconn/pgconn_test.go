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

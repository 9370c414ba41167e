package e2e_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
)

// A misspelt verb under any noun is a usage error (exit 2) that names the
// typo and suggests the verb, exactly like a misspelt top-level command; a
// cron job with a typo must not "pass" with the noun's help.
func TestBinary_TypodVerb_Exit2DidYouMean(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want string // the suggestion, or "" when nothing is close
	}{
		{[]string{"chain", "verfy"}, "verify"},
		{[]string{"tenant", "lst"}, "list"},
		{[]string{"lake", "frobnicate"}, ""},
		{[]string{"lake", "statsu"}, "status"},
		{[]string{"deadletter", "shwo"}, "show"},
		{[]string{"dev", "lod"}, "load"},
		{[]string{"key", "genrate"}, "generate"},
		{[]string{"verfy"}, ""}, // top level (cobra's own path)
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, "_"), func(t *testing.T) {
			r := env{}.bin(t, c.args...)
			require.Equal(t, cliutil.ExitUsage, r.code, "stdout %q stderr %q", r.stdout, r.stderr)
			require.Empty(t, r.stdout, "no help on stdout for a typo")
			typo := c.args[len(c.args)-1]
			require.Contains(t, r.stderr, `unknown command "`+typo+`"`)
			if c.want != "" {
				require.Contains(t, r.stderr, "Did you mean this?\n\t"+c.want+"\n")
			}
		})
	}
	// The bare noun still prints its help and succeeds.
	r := env{}.bin(t, "chain")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "Available Commands:")
}

package lakecmd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/replication"
	"github.com/omlhq/oml/internal/testkit/runtest"
)

// --durable-on and --durable-timeout are checked by cliutil.DurableWait
// (drain) and DurableOn (status): the policy reaches the run function, a
// bad value is a usage error naming the flag.
func TestDurableFlags_DrainAndStatus(t *testing.T) {
	t.Parallel()
	one, err := replication.ParsePolicy("1")
	require.NoError(t, err)
	runtest.RunFlagCases(t, NewCmdDrain, []runtest.FlagCase[DrainOptions]{
		{Args: "--once --durable-on 1", Check: func(t *testing.T, o *DrainOptions) { require.Equal(t, one, o.durable) }},
		{Args: "--once --durable-on some", WantErr: `--durable-on "some"`},
		{Args: "--once --durable-timeout 0s", WantErr: "--durable-timeout must be positive"},
	})
	runtest.RunFlagCases(t, NewCmdStatus, []runtest.FlagCase[StatusOptions]{
		{Args: "--durable-on 1", Check: func(t *testing.T, o *StatusOptions) { require.Equal(t, one, o.durable) }},
		{Args: "--durable-on some", WantErr: `--durable-on "some"`},
	})
}

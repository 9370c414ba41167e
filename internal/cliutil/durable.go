package cliutil

import (
	"time"

	"github.com/omlhq/oml/internal/replication"
)

// DurableOn parses --durable-on (status, lake status, lake drain, chain
// witness): a usage error when it is not a policy.
func DurableOn(s string) (replication.Policy, error) {
	p, err := replication.ParsePolicy(s)
	if err != nil {
		return p, FlagErrorf("%v", err)
	}
	return p, nil
}

// DurableWait parses --durable-on and checks --durable-timeout, the pair
// of the commands that wait for the standbys (lake drain, chain witness).
func DurableWait(on string, timeout time.Duration) (replication.Policy, error) {
	p, err := DurableOn(on)
	if err != nil {
		return p, err
	}
	if timeout <= 0 {
		return p, FlagErrorf("--durable-timeout must be positive")
	}
	return p, nil
}

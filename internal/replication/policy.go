package replication

import (
	"fmt"
	"strconv"
	"strings"
)

// Mode is how a Policy chooses the standbys it waits for.
type Mode int

// The modes. The zero Mode is auto, so a zero Policy is the default.
const (
	ModeAuto  Mode = iota // every standby streaming at the time
	ModeNone              // never wait
	ModeCount             // at least N streaming standbys
)

// Policy is the value of --durable-on.
type Policy struct {
	Mode Mode
	N    int // ModeCount only, ≥ 1
}

// DefaultPolicyText is --durable-on's default, for every command that has
// the flag (oml lake drain, oml lake status, oml chain witness).
const DefaultPolicyText = "auto"

// DefaultPolicy is DefaultPolicyText parsed (the zero Policy).
var DefaultPolicy = Policy{Mode: ModeAuto}

// FlagUsage is --durable-on's help text.
const FlagUsage = "cover only WAL flushed by: auto (every streaming standby), none (no wait), or N (at least N streaming standbys)"

// StatusFlagUsage is --durable-on's help text on the status commands, which
// judge rather than wait.
const StatusFlagUsage = "judge the stable prefix as a lake writer with this --durable-on would: auto, none or N"

// ParsePolicy reads auto, none or a positive count.
func ParsePolicy(s string) (Policy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "auto":
		return Policy{Mode: ModeAuto}, nil
	case "none":
		return Policy{Mode: ModeNone}, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 {
		return Policy{}, fmt.Errorf("--durable-on %q: use auto, none, or a number of standbys (1 or more)", s)
	}
	return Policy{Mode: ModeCount, N: n}, nil
}

// String is the policy as the flag spells it.
func (p Policy) String() string {
	switch p.Mode {
	case ModeNone:
		return "none"
	case ModeCount:
		return strconv.Itoa(p.N)
	}
	return "auto"
}

// Waits reports whether the policy ever waits (none does not, and needs no
// WAL position or standby reading at all).
func (p Policy) Waits() bool { return p.Mode != ModeNone }

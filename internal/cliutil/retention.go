package cliutil

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// maxRetentionDays is the most whole days a time.Duration holds.
const maxRetentionDays = int64(math.MaxInt64 / int64(24*time.Hour))

// ParseRetention parses a retention flag (lake vacuum --retain, outbox
// prune --older-than): 7d, 36h, 90m or any Go duration; never negative,
// never longer than a time.Duration holds.
func ParseRetention(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(d, 10, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) || n < 0 {
			return 0, fmt.Errorf("%q is not a number of days", s)
		}
		// A Duration holds at most ~292 years; more would wrap negative
		// (106752d became a retention in the past, deleting everything).
		if errors.Is(err, strconv.ErrRange) || n > maxRetentionDays {
			return 0, fmt.Errorf("%q is longer than the longest retention oml can hold (%dd)", s, maxRetentionDays)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a duration (e.g. 7d, 168h)", s)
	}
	return d, nil
}

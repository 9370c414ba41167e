package cliutil

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseBytes parses a size such as 64MiB, 10MB, 512k or 1048576 (bytes).
// Binary (KiB, MiB, GiB) and decimal (KB, MB, GB) units are both accepted;
// a bare K/M/G means the binary unit.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("empty size")
	}
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') && t[i-1] != '.' {
		i--
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult := map[string]float64{
		"": 1, "b": 1,
		"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
		"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
		"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("size %q has an unknown unit %q (use B, KiB, MiB, GiB, KB, MB or GB)", s, t[i:])
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("size %q is not a number of bytes", s)
	}
	return int64(v * mult), nil
}

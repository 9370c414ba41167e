package store

import (
	"fmt"
	"strings"
)

// Temporary files of the file backend are named
//
//	.<final-name>.<random hex>.oml-tmp
//
// in the directory of the final name. Delta never writes a name that both
// starts with '.' and ends in ".oml-tmp" (Hadoop's hidden checksum files are
// ".<name>.crc"), and ValidateKey refuses such names on every backend, so a
// temporary file can never be mistaken for, or collide with, a real object.
const (
	tempPrefix = "."
	tempSuffix = ".oml-tmp"
)

func isTempName(base string) bool {
	return strings.HasPrefix(base, tempPrefix) && strings.HasSuffix(base, tempSuffix)
}

// ValidateKey checks that key is a clean relative object key: non-empty,
// '/'-separated, no leading or trailing '/', no empty, "." or ".." segment, no
// backslash or NUL, and no segment matching the temporary-file pattern.
// Every backend applies it, so a key that works on one works on all.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: the key is empty", ErrInvalidKey)
	}
	if strings.ContainsAny(key, "\\\x00") {
		return fmt.Errorf("%w %q: keys may not contain a backslash or NUL byte", ErrInvalidKey, key)
	}
	for _, seg := range strings.Split(key, "/") {
		switch {
		case seg == "":
			return fmt.Errorf("%w %q: keys are relative '/'-separated paths with no empty segment", ErrInvalidKey, key)
		case seg == "." || seg == "..":
			return fmt.Errorf("%w %q: keys may not contain \".\" or \"..\" segments", ErrInvalidKey, key)
		case isTempName(seg):
			return fmt.Errorf("%w %q: names of the form .NAME.oml-tmp are reserved for temporary files", ErrInvalidKey, key)
		}
	}
	return nil
}

// validatePrefix checks a List prefix: empty, or the beginning of a valid key.
// Every segment before the last '/' must be a valid segment; the part after
// it may be any partial name (e.g. "_delta_log/0000").
func validatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if strings.ContainsAny(prefix, "\\\x00") {
		return fmt.Errorf("%w: the list prefix %q contains a backslash or NUL byte", ErrInvalidKey, prefix)
	}
	i := strings.LastIndex(prefix, "/")
	if i < 0 {
		return nil
	}
	if err := ValidateKey(prefix[:i]); err != nil {
		return fmt.Errorf("list prefix %q: %w", prefix, err)
	}
	return nil
}

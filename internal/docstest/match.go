package docstest

import (
	"fmt"
	"regexp"
	"strings"
)

// Placeholder stands for any text within one line of shown output: ids,
// times, counts, hashes (`took: …`, `Wrote ed25519 key … to deploy.key`).
const Placeholder = "…"

var spaceRun = regexp.MustCompile(`[ \t]+`)

// lineRegexp turns one shown line into the regular expression an output
// line must match: the whole line, Placeholder matching any text, a run of
// spaces or tabs matching any run of spaces or tabs (column widths follow
// the data), leading and trailing blanks ignored.
func lineRegexp(shown string) *regexp.Regexp {
	parts := strings.Split(strings.TrimSpace(shown), Placeholder)
	for i, p := range parts {
		words := spaceRun.Split(p, -1)
		for j, w := range words {
			words[j] = regexp.QuoteMeta(w)
		}
		parts[i] = strings.Join(words, `[ \t]+`)
	}
	return regexp.MustCompile(`^[ \t]*` + strings.Join(parts, `.*?`) + `[ \t]*$`)
}

// MatchOutput checks that every shown line appears in out, in order (other
// lines may come between). It returns "" when they do, else which shown
// line was not found.
func MatchOutput(shown []string, out string) string {
	got := strings.Split(strings.ReplaceAll(out, "\r\n", "\n"), "\n")
	k := 0
	for _, s := range shown {
		re := lineRegexp(s)
		for k < len(got) && !re.MatchString(got[k]) {
			k++
		}
		if k == len(got) {
			return fmt.Sprintf("shown line %q not found (in order) in the output", strings.TrimSpace(s))
		}
		k++
	}
	return ""
}

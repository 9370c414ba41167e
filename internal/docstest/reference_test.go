package docstest

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

// TestDocs_CommandReferenceIsCurrent fails when docs/reference/ is not what
// the command tree generates: a command or flag added, renamed or removed
// without `make docs`.
func TestDocs_CommandReferenceIsCurrent(t *testing.T) {
	want := Reference(Root())
	dir := filepath.Join(repoRoot(), ReferenceDir)
	have, err := filepath.Glob(filepath.Join(dir, "*.md"))
	require.NoError(t, err)
	for _, f := range have {
		if _, ok := want[filepath.Base(f)]; !ok {
			t.Errorf("%s/%s documents a command that no longer exists: run `make docs`", ReferenceDir, filepath.Base(f))
		}
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		got, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Errorf("%s/%s is missing: run `make docs`", ReferenceDir, n)
			continue
		}
		if string(got) != want[n] {
			t.Errorf("%s/%s differs from what the command tree generates (a command or flag changed): run `make docs`\n%s", ReferenceDir, n, firstDiff(string(got), want[n]))
		}
	}
}

func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "line " + strconv.Itoa(i+1) + ":\n  checked in: " + gl + "\n  generated:  " + wl
		}
	}
	return ""
}

// handWritten is every documentation page except the generated reference.
func handWritten(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, rel := range docPages(t) {
		src, err := os.ReadFile(filepath.Join(repoRoot(), rel))
		require.NoError(t, err)
		out[rel] = string(src)
	}
	return out
}

// TestDocs_FlagsInPagesExist fails when a hand-written page names a flag
// (`oml lake drain --once`, in a code block or an inline code span) that
// the command it names does not have: the page went stale when the flag
// was renamed or removed.
func TestDocs_FlagsInPagesExist(t *testing.T) {
	root := Root()
	root.InitDefaultHelpFlag()
	n := 0
	for rel, src := range handWritten(t) {
		for _, m := range Mentions(root, src) {
			n++
			t.Errorf("%s:%s", rel, strings.TrimPrefix(m.String(), "line "))
		}
	}
	if n > 0 {
		t.Logf("%d stale flag mention(s): fix the page (the flags of every command are in %s)", n, ReferenceDir)
	}
}

// TestDocs_EveryCommandHasAHandWrittenPage fails when a command is only in
// the generated reference: every command is explained somewhere an operator
// reads (README.md or docs/), by its full path (`oml lake drain`).
func TestDocs_EveryCommandHasAHandWrittenPage(t *testing.T) {
	pages := handWritten(t)
	var all strings.Builder
	for _, src := range pages {
		all.WriteString(src)
		all.WriteString("\n")
	}
	text := strings.Join(strings.Fields(all.String()), " ")
	for _, c := range Commands(Root()) {
		if !c.HasParent() {
			continue
		}
		path := strings.TrimPrefix(c.CommandPath(), "oml ")
		if !strings.Contains(text, "oml "+path) {
			t.Errorf("`%s` is not mentioned in README.md or docs/ (outside %s): document it", c.CommandPath(), ReferenceDir)
		}
	}
}

// TestDocs_FlagsNamedAloneExist: a flag named on its own in a page (an
// inline code span that starts with it, as in a flag table: `--poison-budget`)
// must be a flag of some oml command; the per-command scan above cannot
// tell which command a table row is about.
func TestDocs_FlagsNamedAloneExist(t *testing.T) {
	known := map[string]bool{"help": true}
	for _, c := range Commands(Root()) {
		c.Flags().VisitAll(func(f *pflag.Flag) { known[f.Name] = true })
		c.InheritedFlags().VisitAll(func(f *pflag.Flag) { known[f.Name] = true })
	}
	re := regexp.MustCompile("`--([a-z][a-z0-9-]*)")
	for rel, src := range handWritten(t) {
		for i, line := range strings.Split(src, "\n") {
			for _, m := range re.FindAllStringSubmatch(line, -1) {
				if !known[m[1]] {
					t.Errorf("%s:%d: `--%s` is not a flag of any oml command", rel, i+1, m[1])
				}
			}
		}
	}
}

// TestDocs_HelpExamplesNameExistingFlags: the Examples of `oml COMMAND
// --help` are documentation too; a flag they name must exist.
func TestDocs_HelpExamplesNameExistingFlags(t *testing.T) {
	root := Root()
	root.InitDefaultHelpFlag()
	for _, c := range Commands(root) {
		if c.Example == "" {
			continue
		}
		for _, m := range Mentions(root, "```text\n"+c.Example+"\n```") {
			t.Errorf("`%s --help`, Examples %s", c.CommandPath(), m)
		}
	}
}

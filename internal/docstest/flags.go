package docstest

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
)

// Mention is one `oml VERB ... --flag` a page names.
type Mention struct {
	Line    int
	Command string // the command path it resolved to, e.g. "oml lake drain"
	Flag    string // as written: --once, -o
}

var (
	omlStartRe = regexp.MustCompile("(^|[\\s(`\"'$])(bin/)?oml\\s+")
	inlineRe   = regexp.MustCompile("`[^`]+`")
	stopTokens = map[string]bool{"|": true, ";": true, "&&": true, "||": true, "#": true, ">": true, "2>": true, "<": true}
	flagTokRe  = regexp.MustCompile(`^(--[a-z][a-z0-9-]*|-[a-zA-Z])(=.*)?$`)
)

// contexts cuts a markdown page into the pieces a command can be written
// in, each with the line it starts on: every line of a code block (a
// command's continuation lines joined), and every inline code span of the
// prose (a paragraph's lines joined, so a span may wrap).
func contexts(src string) (out []struct {
	Line int
	Text string
}) {
	add := func(line int, text string) {
		out = append(out, struct {
			Line int
			Text string
		}{line, text})
	}
	lines := strings.Split(src, "\n")
	var para []string
	paraLine := 0
	flush := func() {
		if len(para) > 0 {
			for _, m := range inlineRe.FindAllString(strings.Join(para, " "), -1) {
				add(paraLine, strings.Trim(m, "`"))
			}
		}
		para = nil
	}
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if fm := fenceRe.FindStringSubmatch(strings.TrimSpace(l)); fm != nil {
			flush()
			j := i + 1
			for ; j < len(lines) && !(strings.HasPrefix(strings.TrimSpace(lines[j]), fm[1]) && strings.Trim(strings.TrimSpace(lines[j]), "`") == ""); j++ {
				cur, start := lines[j], j
				for strings.HasSuffix(strings.TrimRight(cur, " "), "\\") && j+1 < len(lines) {
					j++
					cur = strings.TrimSuffix(strings.TrimRight(cur, " "), "\\") + " " + lines[j]
				}
				add(start+1, cur)
			}
			i = j
			continue
		}
		if strings.TrimSpace(l) == "" {
			flush()
			continue
		}
		if len(para) == 0 {
			paraLine = i + 1
		}
		para = append(para, l)
	}
	flush()
	return out
}

// Mentions finds every `oml VERB ... --flag` in a page and resolves it
// against the command tree: the words after `oml` descend into
// subcommands as long as they name one; the flags up to the end of the
// command (a pipe, `;`, `&&`, a comment, a redirection) are its flags.
// Unknown reports the flags that command does not have.
func Mentions(root *cobra.Command, src string) (unknown []Mention) {
	for _, ctx := range contexts(src) {
		text := ctx.Text
		if exitTwoRe.MatchString(text) {
			continue // a usage error shown on purpose
		}
		for _, loc := range omlStartRe.FindAllStringIndex(text, -1) {
			if !commandPosition(text[:loc[0]+len(text[loc[0]:loc[1]])-len(strings.TrimLeft(text[loc[0]:loc[1]], "\t\n (`\"'$"))]) {
				continue
			}
			toks := strings.Fields(text[loc[1]:])
			c := root
			descending := true
			for _, tok := range toks {
				tok = strings.Trim(tok, `"'),.:`)
				if stopTokens[tok] || strings.HasPrefix(tok, "#") {
					break
				}
				if tok == "oml" || strings.HasSuffix(tok, "/oml") {
					break // the next command of the same line is found on its own
				}
				if m := flagTokRe.FindStringSubmatch(tok); m != nil {
					if !hasFlag(c, m[1]) {
						unknown = append(unknown, Mention{ctx.Line, c.CommandPath(), m[1]})
					}
					continue
				}
				if descending {
					if sub := findSub(c, tok); sub != nil {
						c = sub
						continue
					}
					descending = false
				}
			}
		}
	}
	return unknown
}

var (
	exitTwoRe = regexp.MustCompile(`#\s*exit 2\b`)
	assignRe  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	// Words after which the next word is a command.
	commandWords = map[string]bool{"|": true, ";": true, "&&": true, "||": true, "then": true, "do": true,
		"time": true, "exec": true, "env": true, "nohup": true, "watch": true, "!": true}
)

// commandPosition says whether what follows before is a command's name
// (start of the text, after a separator, inside $( or a quote), rather than
// an argument (`install -o oml`).
func commandPosition(before string) bool {
	t := strings.TrimRight(before, " \t")
	if t == "" || strings.HasSuffix(t, "$(") || strings.HasSuffix(t, "(") || strings.HasSuffix(t, "`") || strings.HasSuffix(t, "\"") {
		return true
	}
	f := strings.Fields(t)
	last := f[len(f)-1]
	return commandWords[last] || assignRe.MatchString(last) && (len(f) == 1 || commandPosition(strings.Join(f[:len(f)-1], " ")))
}

func findSub(c *cobra.Command, name string) *cobra.Command {
	for _, s := range c.Commands() {
		if s.Name() == name || s.HasAlias(name) {
			return s
		}
	}
	return nil
}

func hasFlag(c *cobra.Command, tok string) bool {
	if tok == "--help" || tok == "-h" {
		return true
	}
	if strings.HasPrefix(tok, "--") {
		name := tok[2:]
		return c.Flags().Lookup(name) != nil || c.InheritedFlags().Lookup(name) != nil || c.PersistentFlags().Lookup(name) != nil
	}
	s := tok[1:]
	return c.Flags().ShorthandLookup(s) != nil || c.InheritedFlags().ShorthandLookup(s) != nil || c.PersistentFlags().ShorthandLookup(s) != nil
}

func (m Mention) String() string {
	return fmt.Sprintf("line %d: `%s ... %s`: %s has no flag %s", m.Line, m.Command, m.Flag, m.Command, m.Flag)
}

package docstest

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Fixtures a page can ask for with <!-- docstest: fixture NAME -->.
const (
	// FixtureDeployment (the default): OML_DATABASE_URL, OML_LAKE_URL (a
	// file:// lake) and OML_SIGNING_KEY_FILE set; the key generated, `oml
	// init` done, tenant acme created, a small `oml dev load` drained.
	FixtureDeployment = "deployment"
	// FixtureS3 is FixtureDeployment whose lake is s3://lake/prod on the S3
	// test server, with the standard AWS environment pointing at it.
	FixtureS3 = "s3"
	// FixtureNone: no OML_* variable, no database; the page brings its own
	// (oml dev up).
	FixtureNone = "none"
)

// Page is one markdown file's examples, in page order.
type Page struct {
	File    string
	Fixture string
	Blocks  []*Block
}

// Block is one example: a ```sh block, or a hidden setup script.
type Block struct {
	Line     int    // 1-based line of the opening fence (or of the setup marker)
	Text     string // the script
	Setup    bool   // a <!-- docstest: setup ... --> script: run, not shown
	Skip     string // the reason given by <!-- docstest: skip — REASON -->; "" runs it
	Output   []string
	OutLine  int // line of the ```console block, 0 if none
	Commands []Command
}

// Command is one shell command of a block (continuation lines and
// multi-line quotes joined) with the exit status it must have.
type Command struct {
	Line int
	Text string
	Exit int
}

var (
	fenceRe  = regexp.MustCompile("^(`{3,})\\s*([A-Za-z0-9_+-]*)\\s*$")
	markerRe = regexp.MustCompile(`^<!--\s*docstest:\s*(.*?)\s*(-->)?\s*$`)
	skipRe   = regexp.MustCompile(`^skip\s*[—–:-]?\s*(.*)$`)
	exitRe   = regexp.MustCompile(`^#\s*exit\s+(\d+)\b`)
)

// ParsePage extracts the examples of one markdown file and checks the
// markers. Errors name the file and line.
func ParsePage(file string, src string) (*Page, error) {
	p := &Page{File: file, Fixture: FixtureDeployment}
	lines := strings.Split(src, "\n")
	var pendingSkip string
	pendingLine := 0
	fail := func(line int, format string, args ...any) (*Page, error) {
		return nil, fmt.Errorf("%s:%d: %s", file, line, fmt.Sprintf(format, args...))
	}
	var last *Block // the most recent ```sh block, while only blank lines follow it
	for i := 0; i < len(lines); i++ {
		ln := i + 1
		line := strings.TrimRight(lines[i], " \t\r")
		if m := markerRe.FindStringSubmatch(line); m != nil {
			last = nil
			body := m[1]
			switch {
			case strings.HasPrefix(body, "fixture"):
				if m[2] == "" {
					return fail(ln, "a fixture marker is one line: <!-- docstest: fixture NAME -->")
				}
				name := strings.TrimSpace(strings.TrimPrefix(body, "fixture"))
				switch name {
				case FixtureDeployment, FixtureS3, FixtureNone:
					p.Fixture = name
				default:
					return fail(ln, "unknown fixture %q (want deployment, s3 or none)", name)
				}
			case strings.HasPrefix(body, "skip"):
				if m[2] == "" {
					return fail(ln, "a skip marker is one line: <!-- docstest: skip — REASON -->")
				}
				reason := strings.TrimSpace(skipRe.FindStringSubmatch(body)[1])
				if len(strings.Fields(reason)) < 2 {
					return fail(ln, "a skip marker needs a reason of a few words: <!-- docstest: skip — REASON -->")
				}
				pendingSkip, pendingLine = reason, ln
			case body == "setup":
				if m[2] != "" {
					return fail(ln, "a setup marker opens a script: <!-- docstest: setup, the commands, then --> on its own line")
				}
				var script []string
				j := i + 1
				for ; j < len(lines) && strings.TrimSpace(lines[j]) != "-->"; j++ {
					script = append(script, lines[j])
				}
				if j == len(lines) {
					return fail(ln, "setup script not closed by a --> line")
				}
				b := &Block{Line: ln, Setup: true, Text: strings.Join(script, "\n")}
				if err := b.split(file); err != nil {
					return nil, err
				}
				for _, c := range b.Commands {
					if why := HostEffect(c.Text); why != "" {
						return fail(c.Line, "the test will not run `%s`: %s", c.Text, why)
					}
				}
				p.Blocks = append(p.Blocks, b)
				i = j
			default:
				return fail(ln, "unknown docstest marker %q (want skip — REASON, setup, or fixture NAME)", body)
			}
			continue
		}
		fm := fenceRe.FindStringSubmatch(line)
		if fm == nil {
			if line != "" {
				last = nil
				if pendingSkip != "" {
					return fail(pendingLine, "a skip marker must come right before a ```sh block")
				}
			}
			continue
		}
		// A code block: find its end.
		fence, lang := fm[1], fm[2]
		j := i + 1
		for ; j < len(lines); j++ {
			if strings.HasPrefix(strings.TrimSpace(lines[j]), fence) && strings.Trim(strings.TrimSpace(lines[j]), "`") == "" {
				break
			}
		}
		if j == len(lines) {
			return fail(ln, "code block not closed")
		}
		body := lines[i+1 : j]
		i = j
		if pendingSkip != "" && lang != "sh" {
			return fail(pendingLine, "a skip marker must come right before a ```sh block, not ```%s", lang)
		}
		switch lang {
		case "sh":
			b := &Block{Line: ln, Text: strings.Join(body, "\n"), Skip: pendingSkip}
			if err := b.split(file); err != nil {
				return nil, err
			}
			if b.Skip == "" {
				for _, c := range b.Commands {
					if why := HostEffect(c.Text); why != "" {
						return fail(c.Line, "the test will not run `%s`: %s; mark the block <!-- docstest: skip — REASON -->", c.Text, why)
					}
				}
			}
			p.Blocks = append(p.Blocks, b)
			pendingSkip = ""
			last = b
			continue
		case "console":
			if last == nil {
				return fail(ln, "a ```console block shows the output of the ```sh block right before it, and there is none")
			}
			for _, l := range body {
				if strings.TrimSpace(l) != "" {
					last.Output = append(last.Output, l)
				}
			}
			last.OutLine = ln
		case "":
			// An unlabelled block that holds commands escapes the test:
			// it must say what it is.
			for _, l := range body {
				t := strings.TrimSpace(l)
				if strings.HasPrefix(t, "oml ") || strings.HasPrefix(t, "$ ") || strings.HasPrefix(t, "bin/oml ") {
					return fail(ln, "an unlabelled code block holds a command (%q): label it ```sh (it is run) or ```text", t)
				}
			}
		}
		last = nil
	}
	if pendingSkip != "" {
		return fail(pendingLine, "a skip marker must come right before a ```sh block")
	}
	return p, nil
}

// split cuts the block's script into commands: a line ending in a
// backslash, or one that leaves a quote open, continues on the next. A
// trailing comment starting "exit N" (`oml doctor   # exit 1: ...`) sets the
// exit status the command must have; every other command must exit 0.
func (b *Block) split(file string) error {
	lines := strings.Split(b.Text, "\n")
	var cur []string
	start := 0
	var q quoteState
	for i, l := range lines {
		if len(cur) == 0 {
			if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") {
				continue
			}
			start = i
		}
		cur = append(cur, l)
		comment := q.scan(l)
		if q.open() || (comment == "" && strings.HasSuffix(strings.TrimRight(l, " \t"), "\\")) {
			continue
		}
		c := Command{Line: b.Line + 1 + start, Text: strings.Join(cur, "\n")}
		if m := exitRe.FindStringSubmatch(comment); m != nil {
			c.Exit, _ = strconv.Atoi(m[1])
		}
		b.Commands = append(b.Commands, c)
		cur = nil
	}
	if len(cur) > 0 {
		return fmt.Errorf("%s:%d: a command of this block leaves a quote open", file, b.Line)
	}
	return nil
}

// quoteState follows POSIX shell quoting across the lines of one command,
// well enough for documentation: single and double quotes, backslashes,
// and comments.
type quoteState struct{ single, double bool }

func (q *quoteState) open() bool { return q.single || q.double }

// scan advances over one line and returns the comment that ends it
// ("" if none), starting at its '#'.
func (q *quoteState) scan(l string) string {
	prevSpace := true
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case q.single:
			if c == '\'' {
				q.single = false
			}
		case c == '\\':
			i++
		case q.double:
			if c == '"' {
				q.double = false
			}
		case c == '\'':
			q.single = true
		case c == '"':
			q.double = true
		case c == '#' && prevSpace:
			return l[i:]
		}
		prevSpace = c == ' ' || c == '\t'
	}
	return ""
}

var (
	hostPathRe = regexp.MustCompile(`(^|[\s=('"])/(etc|usr|var|srv|opt|root|home|boot|lib|run)(/|\s|$)`)
	segmentRe  = regexp.MustCompile(`&&|\|\||[|;&()]|\$\(`)
	// Programs that act on the machine rather than on the deployment.
	hostPrograms = map[string]bool{
		"systemctl": true, "journalctl": true, "useradd": true, "userdel": true, "groupadd": true,
		"apt-get": true, "apt": true, "sudo": true, "ssh": true, "install": true, "crontab": true,
		"chown": true, "mount": true, "reboot": true, "kill": true, "pkill": true, "killall": true,
	}
)

// HostEffect says why a command would act on the machine the test runs on
// (a path under /etc, /var, /usr, ...; systemctl, useradd, install, ssh,
// ...), or "" if it stays inside its working directory and the deployment.
// Such an example must be marked skip: the test refuses to run it.
func HostEffect(command string) string {
	code := command
	var q quoteState
	var kept []string
	for _, l := range strings.Split(code, "\n") {
		if c := q.scan(l); c != "" {
			l = strings.TrimSuffix(l, c)
		}
		kept = append(kept, l)
	}
	code = strings.Join(kept, "\n")
	if m := hostPathRe.FindString(code); m != "" {
		return "it names a path outside its working directory (" + strings.TrimSpace(m) + "...)"
	}
	for _, seg := range segmentRe.Split(code, -1) {
		f := strings.Fields(seg)
		if len(f) > 0 && hostPrograms[f[0]] {
			return "it runs " + f[0] + " on the machine"
		}
	}
	return ""
}

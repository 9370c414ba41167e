package docstest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParsePage_BlocksMarkersAndOutput(t *testing.T) {
	src := strings.Join([]string{
		"# page",
		"<!-- docstest: fixture none -->",
		"```sh",
		"oml dev up      # start",
		"oml doctor --strict   # exit 1: a check warns",
		`psql "$OML_DATABASE_URL" -c "`,
		`  select 1"`,
		"oml lake status \\",
		"  --tables",
		"```",
		"",
		"```console",
		"Started PostgreSQL … (pid …)",
		"```",
		"<!-- docstest: setup",
		"oml tenant create acme",
		"-->",
		"<!-- docstest: skip — installs a unit on the host -->",
		"```sh",
		"systemctl enable --now oml-lakewriter",
		"```",
		"```text",
		"oml: an error message, not run",
		"```",
	}, "\n")
	p, err := ParsePage("x.md", src)
	require.NoError(t, err)
	require.Equal(t, FixtureNone, p.Fixture)
	require.Len(t, p.Blocks, 3)
	b := p.Blocks[0]
	require.Equal(t, 3, b.Line)
	require.Len(t, b.Commands, 4)
	require.Equal(t, 0, b.Commands[0].Exit)
	require.Equal(t, 1, b.Commands[1].Exit)
	require.Equal(t, 5, b.Commands[1].Line)
	require.Equal(t, "psql \"$OML_DATABASE_URL\" -c \"\n  select 1\"", b.Commands[2].Text)
	require.Equal(t, "oml lake status \\\n  --tables", b.Commands[3].Text)
	require.Equal(t, []string{"Started PostgreSQL … (pid …)"}, b.Output)
	require.True(t, p.Blocks[1].Setup)
	require.Equal(t, "installs a unit on the host", p.Blocks[2].Skip)
}

func TestParsePage_RefusesWhatWouldEscapeTheTest(t *testing.T) {
	for name, src := range map[string]string{
		"skip without a reason":       "<!-- docstest: skip -->\n```sh\noml doctor\n```",
		"skip before a text block":    "<!-- docstest: skip — a reason here -->\n```text\nx\n```",
		"unlabelled block of oml":     "```\noml doctor\n```",
		"transcript in a bare block":  "```\n$ oml doctor\n```",
		"console after no sh block":   "text\n\n```console\nx\n```",
		"unknown marker":              "<!-- docstest: run twice -->",
		"unknown fixture":             "<!-- docstest: fixture prod -->",
		"unclosed quote":              "```sh\noml tenant create \"acme\n```",
		"a path on the host":          "```sh\noml key generate --out /etc/oml/deploy.key\n```",
		"systemctl in a pipeline":     "```sh\noml lake status && systemctl restart oml-lakewriter\n```",
		"host effect in setup script": "<!-- docstest: setup\ninstall -m 0755 bin/oml /usr/local/bin/oml\n-->",
	} {
		_, err := ParsePage("x.md", src)
		require.Error(t, err, name)
		require.Contains(t, err.Error(), "x.md:", name)
	}
}

func TestHostEffect(t *testing.T) {
	for cmd, hostile := range map[string]bool{
		"oml lake status": false,
		`oml key generate --out "$PWD/.oml/deploy.key"`:      false,
		"oml chain verify --bronze file:///var/lib/x/bronze": false, // a URL, read only
		"oml doctor --metrics-file /var/lib/node_exporter/x": true,
		"ssh HOST ps -p PID":                                   true,
		"(cd docs && sudo make)":                               true,
		"oml lake status   # see /etc/oml/lakewriter.env":      false, // a comment
		"install -m 0600 -o oml -g oml /dev/null lakewriter.e": true,
	} {
		require.Equal(t, hostile, HostEffect(cmd) != "", cmd)
	}
}

func TestMatchOutput_PlaceholdersAndColumns(t *testing.T) {
	out := "Wrote ed25519 key 3b1f9a to deploy.key (mode 0600).\n" +
		"TABLE\tTENANT\tTASK\n" +
		"9bef/bronze/events\tacme\t-\n" +
		"took:   12ms\n"
	require.Empty(t, MatchOutput([]string{"Wrote ed25519 key … to deploy.key (mode 0600).", "TABLE  TENANT  TASK", "…/bronze/events acme -", "took: …"}, out))
	require.Empty(t, MatchOutput([]string{"TABLE TENANT TASK", "took: …ms"}, out), "lines between shown lines are allowed")
	require.NotEmpty(t, MatchOutput([]string{"took: …", "TABLE TENANT TASK"}, out), "order matters")
	require.NotEmpty(t, MatchOutput([]string{"TABLE TENANT"}, out), "a shown line matches a whole line")
	require.NotEmpty(t, MatchOutput([]string{"Wrote ed25519 key … to other.key …"}, out))
}

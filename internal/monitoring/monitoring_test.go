package monitoring_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/omlhq/oml/internal/doctor"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/workload"
)

func TestMain(m *testing.M) { testkit.Main(m) }

const dir = "../../docs/monitoring"

var (
	alertsFile    = filepath.Join(dir, "oml-alerts.yml")
	recordingFile = filepath.Join(dir, "oml-recording.yml")
	testsFile     = filepath.Join(dir, "oml-alerts.test.yml")
	dashboardFile = filepath.Join(dir, "oml-dashboard.json")
)

// promtool finds promtool, failing under CI (make deps installs it) and
// skipping elsewhere with the command that installs it.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("promtool is not installed: run scripts/ensure-promtool.sh (make deps does)")
		}
		t.Skip("promtool is not installed: run scripts/ensure-promtool.sh (make deps does)")
	}
	return p
}

func TestShippedRules_PromtoolAcceptsThem(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(promtool(t), "check", "rules", recordingFile, alertsFile).CombinedOutput()
	require.NoError(t, err, "promtool check rules:\n%s", out)
}

func TestShippedRules_PromtoolUnitTestsPass(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(promtool(t), "test", "rules", filepath.Base(testsFile))
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool test rules:\n%s", out)
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func readRules(t *testing.T, path string) ruleFile {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var f ruleFile
	require.NoError(t, yaml.Unmarshal(b, &f), path)
	return f
}

func TestShippedRules_EveryAlertFiresAndStaysQuietInATest(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(testsFile)
	require.NoError(t, err)
	var tf struct {
		Tests []struct {
			Name      string `yaml:"name"`
			AlertTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	require.NoError(t, yaml.Unmarshal(b, &tf))
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tf.Tests {
		for _, a := range tc.AlertTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	alerts := 0
	for _, g := range readRules(t, alertsFile).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			require.True(t, fires[r.Alert], "alert %s has no promtool test in which it fires", r.Alert)
			require.True(t, quiet[r.Alert], "alert %s has no promtool test in which it stays quiet", r.Alert)
			require.Contains(t, []string{"warning", "critical"}, r.Labels["severity"], "alert %s: severity", r.Alert)
			for _, k := range []string{"summary", "description", "runbook_url"} {
				require.NotEmpty(t, r.Annotations[k], "alert %s: annotation %s", r.Alert, k)
			}
			_, err := os.Stat(filepath.Join("../..", r.Annotations["runbook_url"]))
			require.NoError(t, err, "alert %s links to a runbook that does not exist", r.Alert)
		}
	}
	require.Positive(t, alerts)
}

// selector is one metric a rule or panel reads, with the label matchers that
// pin doctor's values.
type selector struct {
	metric, check, key, where string
}

var (
	metricRe  = regexp.MustCompile(`\b(oml[_:][a-zA-Z0-9_:]+)(\{[^}]*\})?`)
	matcherRe = regexp.MustCompile(`(\w+)\s*=\s*"([^"]*)"`)
)

func selectors(expr, where string) []selector {
	var out []selector
	for _, m := range metricRe.FindAllStringSubmatch(expr, -1) {
		s := selector{metric: m[1], where: where}
		for _, lm := range matcherRe.FindAllStringSubmatch(m[2], -1) {
			switch lm[1] {
			case "check":
				s.check = lm[2]
			case "key":
				s.key = lm[2]
			}
		}
		out = append(out, s)
	}
	return out
}

func shippedSelectors(t *testing.T) []selector {
	t.Helper()
	var out []selector
	for _, f := range []string{recordingFile, alertsFile} {
		for _, g := range readRules(t, f).Groups {
			for _, r := range g.Rules {
				out = append(out, selectors(r.Expr, filepath.Base(f)+" "+r.Alert+r.Record)...)
			}
		}
	}
	b, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(b, &dash), "the dashboard is not valid JSON")
	require.NotEmpty(t, dash.Panels)
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		for _, tg := range p.Targets {
			out = append(out, selectors(tg.Expr, "dashboard panel "+p.Title)...)
		}
	}
	return out
}

func TestShippedRules_NameOnlyMetricsOmlExports(t *testing.T) {
	t.Parallel()
	d := testkit.NewDeployment(t, 2)
	lake, err := store.NewFile(t.TempDir())
	require.NoError(t, err)
	ctx := context.Background()
	_, err = workload.Run(ctx, d.Pool, d.Key, workload.Config{Tenants: d.Tenants, Claims: 20, PromoteRatio: 0.7, RetractRatio: 0.2, Poison: 1, Seed: 7})
	require.NoError(t, err)

	// A real drain, with metrics and a poison row, so every vector the
	// rules read has its children.
	reg := prometheus.NewRegistry()
	o := d.DrainOptions(lake)
	o.Metrics = lakewriter.NewMetrics(reg)
	w, err := lakewriter.New(o)
	require.NoError(t, err)
	d.DrainAll(t, w)

	exported := map[string]bool{}
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		exported[f.GetName()] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				exported[f.GetName()+s] = true
			}
		}
	}

	// A real doctor run on the same deployment: the (check, key) pairs it
	// exports are the ones a selector may name.
	rep := doctor.Run(ctx, doctor.Options{
		DB:      func(context.Context) (*pgxpool.Pool, error) { return d.Pool, nil },
		Lake:    func(context.Context) (store.Store, error) { return lake, nil },
		Deep:    true,
		Timeout: time.Minute,
	})
	g, err := doctor.Gatherer(&rep)
	require.NoError(t, err)
	dfam, err := g.Gather()
	require.NoError(t, err)
	pairs := map[[2]string]bool{}
	checks := map[string]bool{}
	for _, f := range dfam {
		exported[f.GetName()] = true
		for _, m := range f.GetMetric() {
			var check, key string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "check":
					check = l.GetValue()
				case "key":
					key = l.GetValue()
				}
			}
			checks[check] = true
			pairs[[2]string{check, key}] = true
		}
	}

	// Recording rules are metrics too.
	for _, g := range readRules(t, recordingFile).Groups {
		for _, r := range g.Rules {
			exported[r.Record] = true
		}
	}

	var bad []string
	for _, s := range shippedSelectors(t) {
		switch {
		case !exported[s.metric]:
			bad = append(bad, s.where+": "+s.metric+" is not a metric oml exports")
		case s.metric == doctor.MetricCheckValue && !pairs[[2]string{s.check, s.key}]:
			bad = append(bad, s.where+": doctor exports no value check="+s.check+" key="+s.key)
		case s.metric == doctor.MetricCheckStatus && s.check != "" && !checks[s.check]:
			bad = append(bad, s.where+": doctor has no check "+s.check)
		}
	}
	sort.Strings(bad)
	require.Empty(t, bad, "rules and dashboard name metrics that do not exist:\n%s", strings.Join(bad, "\n"))
}

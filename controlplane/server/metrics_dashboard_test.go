package server_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
)

// The operator-facing files that name metrics, relative to this package.
const (
	dashboardFile = "../../deploy/grafana/qleet-dashboard.json"
	alertsFile    = "../../deploy/prometheus/alerts.yaml"
	metricsDoc    = "../../docs/guides/metrics.md"
)

// recordingRegisterer registers on a registry and remembers the collectors, so that metric vectors with
// no series yet (nothing reconciled in this test) are still known by name and type.
type recordingRegisterer struct {
	prometheus.Registerer
	collectors []prometheus.Collector
}

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registerer.Register(c)
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

var descName = regexp.MustCompile(`fqName: "([^"]+)"`)

// described adds the name and type of every metric the collectors describe to known.
func described(t *testing.T, cs []prometheus.Collector, known map[string]string) {
	t.Helper()
	for _, c := range cs {
		typ := "UNTYPED"
		// A Gauge has every method of a Counter, and a Summary those of a Histogram: the vectors are
		// matched by their types, and a Gauge is tried before a Counter (no plain Summary is exported).
		switch c.(type) {
		case *prometheus.HistogramVec, prometheus.Histogram:
			typ = "HISTOGRAM"
		case *prometheus.SummaryVec:
			typ = "SUMMARY"
		case *prometheus.GaugeVec, prometheus.Gauge:
			typ = "GAUGE"
		case *prometheus.CounterVec, prometheus.Counter:
			typ = "COUNTER"
		}
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := descName.FindStringSubmatch(d.String())
			require.NotNil(t, m, "no name in %s", d)
			known[m[1]] = typ
		}
	}
}

// servedMetrics returns the name and type of every metric of a running API server and of the
// controllers' reconcile.Metrics, registered on one registry as `qleet server` does.
func servedMetrics(t *testing.T) map[string]string {
	t.Helper()
	reg := prometheus.NewRegistry()
	e := setup(t, setupOpts{cfg: func(c *server.Config) { c.Registry = reg }})
	rec := &recordingRegisterer{Registerer: reg}
	reconcile.NewMetrics(rec)

	// A runtime and a support service, so that the per-runtime series exist; the requests make the
	// API's latency series.
	ctx := context.Background()
	rt, err := e.dev.KubernetesRuntimes().Create(ctx, localRuntime("metrics"))
	require.NoError(t, err)
	_, err = e.admin.SupportServices().Create(ctx, &api.SupportService{Meta: api.Meta{Name: "metrics-ingress"},
		Spec: api.SupportServiceSpec{RuntimeID: rt.ID, Type: api.SupportIngress}})
	require.NoError(t, err)

	families, err := reg.Gather()
	require.NoError(t, err)
	known := map[string]string{}
	for _, f := range families {
		known[f.GetName()] = f.GetType().String()
	}
	described(t, rec.collectors, known)
	return known
}

// promString matches PromQL string literals, whose contents are label values, not metric names.
var (
	promString = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	qleetName  = regexp.MustCompile(`\bqleet_[a-zA-Z0-9_:]*`)
)

// metricNames returns the qleet_ metric names an expression uses.
func metricNames(expr string) []string {
	return qleetName.FindAllString(promString.ReplaceAllString(expr, `""`), -1)
}

// unknownMetrics returns the qleet_ names that exprs use and that known does not serve: a name is known
// when it is served, or is a histogram's _bucket, _sum or _count series, or a summary's _sum or _count.
func unknownMetrics(exprs []string, known map[string]string) []string {
	var out []string
	for _, expr := range exprs {
		for _, name := range metricNames(expr) {
			if _, ok := known[name]; ok || slices.Contains(out, name) {
				continue
			}
			if servedSeries(name, known) {
				continue
			}
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func servedSeries(name string, known map[string]string) bool {
	for suffix, types := range map[string][]string{"_bucket": {"HISTOGRAM"}, "_sum": {"HISTOGRAM", "SUMMARY"}, "_count": {"HISTOGRAM", "SUMMARY"}} {
		if base, ok := strings.CutSuffix(name, suffix); ok && slices.Contains(types, known[base]) {
			return true
		}
	}
	return false
}

// dashboardExprs returns every PromQL expression of a Grafana dashboard: panel targets (in rows too)
// and template variable queries.
func dashboardExprs(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var dash struct {
		UID        string            `json:"uid"`
		Title      string            `json:"title"`
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(data, &dash), "the dashboard is JSON")
	require.NotEmpty(t, dash.UID, "a dashboard uid keeps links stable across imports")
	require.NotEmpty(t, dash.Title)
	require.NotEmpty(t, dash.Panels)

	type panel struct {
		Type    string `json:"type"`
		Title   string `json:"title"`
		GridPos *struct {
			H, W, X, Y int
		} `json:"gridPos"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var exprs []string
	var walk func(raw []json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p panel
			require.NoError(t, json.Unmarshal(r, &p))
			require.NotNil(t, p.GridPos, "panel %q has a place", p.Title)
			require.LessOrEqual(t, p.GridPos.X+p.GridPos.W, 24, "panel %q fits the grid", p.Title)
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			require.NotEmpty(t, p.Title, "every panel has a title")
			require.NotEmpty(t, p.Targets, "panel %q queries something", p.Title)
			for _, tg := range p.Targets {
				require.NotEmpty(t, strings.TrimSpace(tg.Expr), "panel %q has an empty query", p.Title)
				exprs = append(exprs, tg.Expr)
			}
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			require.NoError(t, json.Unmarshal(v.Query, &q.Query), "variable %s", v.Name)
		}
		exprs = append(exprs, q.Query)
	}
	return exprs
}

// ruleFile is the Prometheus rule file format (alerting rules only).
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

var alertName = regexp.MustCompile(`^Qleet[A-Z][A-Za-z]+$`)

// alertExprs checks the rule file's structure and returns its expressions.
func alertExprs(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var rf ruleFile
	require.NoError(t, yaml.UnmarshalStrict(data, &rf), "alerts.yaml has only the fields of a rule file")
	require.NotEmpty(t, rf.Groups)
	// Alert annotations are Go templates with Prometheus's functions.
	funcs := template.FuncMap{}
	for _, f := range []string{"humanize", "humanizeDuration", "humanizePercentage", "humanizeTimestamp", "printf", "title", "toUpper", "toLower"} {
		funcs[f] = func(...any) string { return "" }
	}
	var exprs []string
	seen := map[string]bool{}
	for _, g := range rf.Groups {
		require.NotEmpty(t, g.Name, "every group is named")
		require.NotEmpty(t, g.Rules, "group %s has rules", g.Name)
		for _, r := range g.Rules {
			require.Regexp(t, alertName, r.Alert, "alert names are QleetCamelCase")
			require.False(t, seen[r.Alert], "alert %s is defined once", r.Alert)
			seen[r.Alert] = true
			require.NotEmpty(t, strings.TrimSpace(r.Expr), "%s has an expr", r.Alert)
			require.Equal(t, strings.Count(r.Expr, "("), strings.Count(r.Expr, ")"), "%s: parentheses balance", r.Alert)
			require.Equal(t, strings.Count(r.Expr, "{"), strings.Count(r.Expr, "}"), "%s: braces balance", r.Alert)
			d, err := time.ParseDuration(r.For)
			require.NoError(t, err, "%s: for", r.Alert)
			require.Positive(t, d, "%s: for", r.Alert)
			require.Contains(t, []string{"critical", "warning", "info"}, r.Labels["severity"], "%s: labels.severity", r.Alert)
			require.NotEmpty(t, r.Annotations["summary"], "%s: annotations.summary", r.Alert)
			for k, a := range r.Annotations {
				// Prometheus defines these variables before expanding an annotation.
				defs := "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"
				tmpl, err := template.New(k).Funcs(funcs).Parse(defs + a)
				require.NoError(t, err, "%s: annotation %s", r.Alert, k)
				data := map[string]any{"Labels": map[string]string{}, "ExternalLabels": map[string]string{}, "ExternalURL": "", "Value": 0.0}
				require.NoError(t, tmpl.Execute(io.Discard, data),
					"%s: annotation %s", r.Alert, k)
			}
			exprs = append(exprs, r.Expr)
		}
	}
	return exprs
}

func TestDashboardsNameOnlyRealMetrics(t *testing.T) {
	t.Parallel()
	known := servedMetrics(t)
	var qleet []string
	for name := range known {
		if strings.HasPrefix(name, "qleet_") {
			qleet = append(qleet, name)
		}
	}
	sort.Strings(qleet)
	require.Contains(t, qleet, "qleet_reconcile_duration_seconds", "the controllers' metrics are known")
	require.Contains(t, qleet, "qleet_runtime_reachable", "the store gauges are known")

	t.Run("the dashboard's queries name only served metrics", func(t *testing.T) {
		require.Empty(t, unknownMetrics(dashboardExprs(t, dashboardFile), known))
	})
	t.Run("the alert rules are well formed and name only served metrics", func(t *testing.T) {
		require.Empty(t, unknownMetrics(alertExprs(t, alertsFile), known))
	})
	t.Run("a metric that is not served is reported", func(t *testing.T) {
		got := unknownMetrics([]string{
			`sum by (kind) (rate(qleet_reconcile_duration_seconds_bucket{kind="qleet_not_a_metric"}[5m]))`,
			`max(qleet_outbox_oldest_age_seconds) > 0 and qleet_made_up_total > 0`,
			`qleet_objects_count + qleet_api_request_duration_seconds_sum`,
		}, known)
		require.Equal(t, []string{"qleet_made_up_total", "qleet_objects_count"}, got,
			"a made-up name and a gauge with a histogram suffix; label values are not names")
	})
	t.Run("the metrics guide lists every served metric, and only those", func(t *testing.T) {
		data, err := os.ReadFile(metricsDoc)
		require.NoError(t, err)
		doc := string(data)
		for _, name := range qleet {
			require.Contains(t, doc, "| `"+name+"` |", "docs/guides/metrics.md documents %s", name)
		}
		require.Empty(t, unknownMetrics([]string{doc}, known))
	})
	t.Run("every served metric is on the dashboard", func(t *testing.T) {
		used := map[string]bool{}
		for _, expr := range dashboardExprs(t, dashboardFile) {
			for _, name := range metricNames(expr) {
				used[name] = true
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					used[strings.TrimSuffix(name, suffix)] = true
				}
			}
		}
		for _, name := range qleet {
			require.True(t, used[name], "the dashboard shows %s", name)
		}
	})
}

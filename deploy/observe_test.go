package deploy_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"go.yaml.in/yaml/v3"

	"github.com/omnigraph/omnigraph-worker/fleet"
	"github.com/omnigraph/omnigraph-worker/ingest"
)

// exported is every metric family the worker serves, name to type: a `worker run --graph`
// registry's (ingest.ExportedFamilies, read from the registry itself) and a fleet process's
// (its /metrics), so that a dashboard or rule naming anything else fails here.
func exported(t *testing.T) map[string]string {
	t.Helper()
	fams, err := ingest.ExportedFamilies()
	if err != nil {
		t.Fatal(err)
	}
	ns, err := ingest.StartEmbedded(t.TempDir(), -1)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	f, err := fleet.New(nc, fleet.Config{ID: "probe", Member: "probe", Graphs: []string{"probe"}},
		func(context.Context, string, *ingest.Metrics) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	f.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Result().Body)
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) (\S+)$`).FindAllStringSubmatch(string(body), -1) {
		if _, ok := fams[m[1]]; !ok {
			fams[m[1]] = strings.ToUpper(m[2])
		}
	}
	return fams
}

// promQLNames are the metric names an expression uses: identifiers that are not functions,
// keywords, label names (inside {…} or by/without/on/ignoring/group_…(…)), durations or
// numbers, with Grafana's $variables and strings taken out first.
func promQLNames(expr string) []string {
	e := regexp.MustCompile(`"(?:[^"\\]|\\.)*"`).ReplaceAllString(expr, `""`)
	e = regexp.MustCompile(`\{[^}]*\}`).ReplaceAllString(e, " ")
	e = regexp.MustCompile(`\[[^\]]*\]`).ReplaceAllString(e, " ")
	e = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`).ReplaceAllString(e, " ")
	e = regexp.MustCompile(`\$\w+`).ReplaceAllString(e, " ")
	keywords := map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true,
		"on": true, "ignoring": true, "group_left": true, "group_right": true, "inf": true, "nan": true}
	var out []string
	for _, ix := range regexp.MustCompile(`([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?`).FindAllStringSubmatchIndex(e, -1) {
		name := e[ix[2]:ix[3]]
		if ix[4] >= 0 || keywords[strings.ToLower(name)] {
			continue // a function or aggregation, or a keyword
		}
		if ix[0] > 0 && strings.ContainsAny(e[ix[0]-1:ix[0]], "0123456789.") {
			continue // the exponent of a number (1e3)
		}
		out = append(out, name)
	}
	return out
}

// known reports whether name is an exported family or one of a histogram's series.
func known(fams map[string]string, name string) bool {
	if _, ok := fams[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && (fams[base] == "HISTOGRAM" || fams[base] == "SUMMARY" && suffix != "_bucket") {
			return true
		}
	}
	return false
}

// exprs collects every "expr" string in a Grafana dashboard's JSON.
func exprs(v any, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "expr" {
				*out = append(*out, s)
			} else {
				exprs(x, out)
			}
		}
	case []any:
		for _, x := range v {
			exprs(x, out)
		}
	}
}

// TestDashboardAndAlertsNameExportedMetrics: deploy/grafana's dashboard and deploy/prometheus's
// alert rules name only metrics the worker exports, and cover what an operator watches.
func TestDashboardAndAlertsNameExportedMetrics(t *testing.T) {
	fams := exported(t)
	if len(fams) < 20 || fams["omnigraph_fleet_members"] == "" || fams["omnigraph_commit_lag_seconds"] != "HISTOGRAM" {
		t.Fatalf("exported families look wrong: %v", fams)
	}
	check := func(where string, all []string) map[string]bool {
		used := map[string]bool{}
		for _, e := range all {
			names := promQLNames(e)
			if len(names) == 0 {
				t.Errorf("%s: %q names no metric", where, e)
			}
			for _, n := range names {
				used[n] = true
				if !known(fams, n) {
					t.Errorf("%s: %q names %s, which the worker does not export", where, e, n)
				}
			}
		}
		return used
	}

	var dash map[string]any
	if err := json.Unmarshal([]byte(read(t, "grafana/omnigraph-worker.json")), &dash); err != nil {
		t.Fatal(err)
	}
	var dexprs []string
	exprs(dash["panels"], &dexprs)
	used := check("grafana/omnigraph-worker.json", dexprs)
	for _, need := range []string{"omnigraph_messages_total", "omnigraph_commit_lag_seconds_bucket", "omnigraph_dead_letters_total",
		"omnigraph_stalled", "omnigraph_operator_required", "omnigraph_lease_epoch", "omnigraph_lease_acquisitions_total", "omnigraph_unindexed_rows"} {
		if !used[need] {
			t.Errorf("the dashboard shows no %s", need)
		}
	}

	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(read(t, "prometheus/omnigraph-alerts.yml")))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatal(err)
	}
	alerts := map[string]string{}
	var rexprs []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Annotations["summary"] == "" || r.Labels["severity"] == "" {
				t.Errorf("rule %+v: an alert needs a name, an expr, a severity and a summary", r)
			}
			alerts[r.Alert] = r.Expr
			rexprs = append(rexprs, r.Expr)
		}
	}
	check("prometheus/omnigraph-alerts.yml", rexprs)
	for alert, metric := range map[string]string{"OmnigraphStalled": "omnigraph_stalled", "OmnigraphOperatorRequired": "omnigraph_operator_required",
		"OmnigraphDeadLettersIncreasing": "omnigraph_dead_letters_total", "OmnigraphCommitLagHigh": "omnigraph_commit_lag_seconds_bucket",
		"OmnigraphLeaseFlapping": "omnigraph_lease_acquisitions_total", "OmnigraphAcksFailing": "omnigraph_acks_failed_total"} {
		if !strings.Contains(alerts[alert], metric) {
			t.Errorf("alert %s missing or not on %s: %q", alert, metric, alerts[alert])
		}
	}
	names := make([]string, 0, len(alerts))
	for a := range alerts {
		names = append(names, a)
	}
	sort.Strings(names)
	t.Logf("alerts: %v", names)
}

// promQLNames takes out what is not a metric name.
func TestPromQLNames(t *testing.T) {
	got := promQLNames(`histogram_quantile(0.95, sum by (graph, le) (rate(omnigraph_commit_lag_seconds_bucket{graph=~"$graph"}[$__rate_interval]))) > 60 and on (graph) time() - max(omnigraph_x) > 1e3 or vector(0)`)
	if strings.Join(got, ",") != "omnigraph_commit_lag_seconds_bucket,omnigraph_x" {
		t.Fatalf("%v", got)
	}
	if !known(map[string]string{"h": "HISTOGRAM", "c": "COUNTER"}, "h_bucket") || known(map[string]string{"c": "COUNTER"}, "c_bucket") {
		t.Fatal("known")
	}
}

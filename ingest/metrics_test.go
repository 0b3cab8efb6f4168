package ingest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/internal/buildinfo"
)

func scrape(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

// TestMetricsConventional: /metrics carries the Go runtime's and the process's standard
// metrics beside every omnigraph_ metric with its type, and two Metrics in one process keep
// separate counts (no global registry).
func TestMetricsConventional(t *testing.T) {
	a, b := NewMetrics(), NewMetrics()
	a.message(outcomeCommitted, 3, 100, 20*time.Millisecond, "")
	a.message(outcomeDeadLetter, 0, 10, time.Millisecond, "invalid")
	a.compaction(resultOK, time.Second)
	a.recovered()
	a.SetLease(true)
	a.setPending(7)
	a.retryBudgetSpent("stalled")
	a.setOperator("table_drift", "table_drift: moved")
	a.recreated("consumer")

	code, out := scrape(t, a.Handler(), "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		"# TYPE go_goroutines gauge", "# TYPE go_memstats_alloc_bytes gauge",
		"# TYPE go_gc_heap_live_bytes gauge", "# TYPE go_gc_gomemlimit_bytes gauge",
		"# TYPE process_cpu_seconds_total counter", "# TYPE process_resident_memory_bytes gauge",
		"# TYPE omnigraph_messages_total counter", `omnigraph_messages_total{outcome="committed"} 1`,
		`omnigraph_messages_total{outcome="dead_lettered"} 1`,
		"# TYPE omnigraph_dead_letters_total counter", `omnigraph_dead_letters_total{reason="invalid"} 1`,
		"# TYPE omnigraph_rows_total counter", "omnigraph_rows_total 3",
		"# TYPE omnigraph_bytes_total counter", "omnigraph_bytes_total 100",
		"# TYPE omnigraph_recoveries_total counter", "omnigraph_recoveries_total 1",
		"# TYPE omnigraph_compactions_total counter", `omnigraph_compactions_total{result="ok"} 1`,
		"# TYPE omnigraph_compaction_seconds_total counter", "omnigraph_compaction_seconds_total 1",
		"# TYPE omnigraph_lease_held gauge", "omnigraph_lease_held 1",
		"# TYPE omnigraph_consumer_pending gauge", "omnigraph_consumer_pending 7",
		"# TYPE omnigraph_stalled gauge", "omnigraph_stalled 1",
		"# TYPE omnigraph_operator_required gauge", `omnigraph_operator_required{kind="table_drift"} 1`,
		`omnigraph_operator_required{kind="corrupt"} 0`,
		"# TYPE omnigraph_retry_budget_exhausted_total counter", `omnigraph_retry_budget_exhausted_total{action="stalled"} 1`,
		"# TYPE omnigraph_commit_seconds histogram", `omnigraph_commit_seconds_bucket{le="0.025"} 1`,
		`omnigraph_commit_seconds_bucket{le="0.01"} 0`, `omnigraph_commit_seconds_bucket{le="+Inf"} 1`,
		"omnigraph_commit_seconds_count 1",
		"# TYPE omnigraph_streams_recreated_total counter", `omnigraph_streams_recreated_total{what="consumer"} 1`,
		`omnigraph_streams_recreated_total{what="stream"} 0`, `omnigraph_streams_recreated_total{what="dlq_stream"} 0`,
		`omnigraph_streams_recreated_total{what="events_stream"} 0`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	var buf bytes.Buffer
	if _, err := b.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"omnigraph_rows_total 0\n", "omnigraph_lease_held 0\n", "go_goroutines "} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("second Metrics lacks %q: they share state", want)
		}
	}
}

// TestHealthEndpointsUnchanged: /healthz and /readyz keep their bodies and codes.
func TestHealthEndpointsUnchanged(t *testing.T) {
	m := NewMetrics()
	h := m.Handler()
	if code, body := scrape(t, h, "/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	if code, body := scrape(t, h, "/readyz"); code != 503 || body != "not consuming (standby or starting)\n" {
		t.Fatalf("/readyz not ready: %d %q", code, body)
	}
	m.SetReady(true)
	if code, body := scrape(t, h, "/readyz"); code != 200 || body != "ready\n" {
		t.Fatalf("/readyz ready: %d %q", code, body)
	}
	m.setStalled("storage: slow")
	if code, body := scrape(t, h, "/readyz"); code != 503 || body != "stalled: storage: slow\n" {
		t.Fatalf("/readyz stalled: %d %q", code, body)
	}
	m.setOperator("corrupt", "corrupt: bad")
	if code, body := scrape(t, h, "/readyz"); code != 503 || body != "operator required: corrupt: bad\n" {
		t.Fatalf("/readyz operator: %d %q", code, body)
	}
}

// /readyz follows the fetches: ready while they fail for less than FetchGrace, "not fetching"
// with the error past it, "stalled" past the retry budget (with omnigraph_stalled); a message's
// own stall or hold comes first; a worker not consuming because its lease bucket does not
// answer says why.
func TestReadyzFollowsFetching(t *testing.T) {
	m := NewMetrics()
	h := m.Handler()
	m.SetReady(true)
	readyz := func(code int, body string) {
		t.Helper()
		if c, b := scrape(t, h, "/readyz"); c != code || b != body {
			t.Fatalf("/readyz: %d %q, want %d %q", c, b, code, body)
		}
	}
	stalled := func(want string) {
		t.Helper()
		if _, out := scrape(t, h, "/metrics"); !strings.Contains(out, "omnigraph_stalled "+want+"\n") {
			t.Fatalf("omnigraph_stalled not %s", want)
		}
	}
	noResp := "nats: no responders available for request"
	m.setIntake("fetches", &intake{since: time.Now(), attempts: 1, err: noResp})
	readyz(200, "ready\n")
	since := time.Now().Add(-FetchGrace)
	at := since.UTC().Format(time.RFC3339)
	m.setIntake("fetches", &intake{since: since, attempts: 4, err: noResp})
	readyz(503, "not fetching: fetches failing since "+at+" (4 attempts): "+noResp+"\n")
	stalled("0")
	m.setIntake("fetches", &intake{since: since, attempts: 9, err: noResp, stalled: "fetches failing since " + at + " (9 attempts, retry budget 1s): " + noResp})
	readyz(503, "stalled: fetches failing since "+at+" (9 attempts, retry budget 1s): "+noResp+"\n")
	stalled("1")
	m.setStalled("stream seq 3 failing")
	readyz(503, "stalled: stream seq 3 failing\n")
	m.setStalled("")
	m.setIntake("fetches", nil)
	readyz(200, "ready\n")
	stalled("0")
	m.SetReady(false)
	m.setIntake("lease bucket", &intake{since: since, attempts: 9, err: "x", stalled: "lease bucket failing since " + at + ": x"})
	readyz(503, "stalled: lease bucket failing since "+at+": x\n")
	stalled("1")
}

// TestSeriesFromTheStart: a new worker's registry already has every outcome, dead-letter
// reason, compaction result, retry-budget action, operator kind and re-created thing at 0, each
// series labelled with its graph (as in a fleet), beside omnigraph_build_info.
func TestSeriesFromTheStart(t *testing.T) {
	m := NewMetricsFor("demo")
	_, out := scrape(t, m.Handler(), "/metrics")
	var want []string
	for _, o := range outcomes {
		want = append(want, `omnigraph_messages_total{graph="demo",outcome="`+string(o)+`"} 0`)
	}
	reasons := errs.DeadLetterReasons()
	if !slices.Contains(reasons, errs.ReasonMaxDeliver) || !slices.Contains(reasons, errs.KindRetryExhausted) {
		t.Fatalf("dead-letter reasons %v lack max_deliver or retry_exhausted", reasons)
	}
	for _, r := range reasons {
		want = append(want, `omnigraph_dead_letters_total{graph="demo",reason="`+r+`"} 0`)
	}
	for _, r := range []string{resultOK, resultStale, resultFailed} {
		want = append(want, `omnigraph_compactions_total{graph="demo",result="`+r+`"} 0`)
	}
	for _, a := range []string{actionStalled, actionDeadLettered} {
		want = append(want, `omnigraph_retry_budget_exhausted_total{action="`+a+`",graph="demo"} 0`)
	}
	for _, k := range errs.Catalogue() {
		if k.NeedsOperator {
			want = append(want, `omnigraph_operator_required{graph="demo",kind="`+k.Kind+`"} 0`)
		}
	}
	want = append(want, `omnigraph_last_commit_timestamp_seconds{graph="demo"} 0`, `omnigraph_commit_lag_seconds_count{graph="demo"} 0`,
		`omnigraph_lease_epoch{graph="demo"} 0`, `omnigraph_lease_acquisitions_total{graph="demo"} 0`, `omnigraph_stalled{graph="demo"} 0`)
	for _, w := range want {
		if !strings.Contains(out, w+"\n") {
			t.Errorf("/metrics lacks %s", w)
		}
	}
	bi := buildinfo.Read()
	build := regexp.MustCompile(`(?m)^omnigraph_build_info\{(.*)\} 1$`).FindStringSubmatch(out)
	if build == nil || !strings.Contains(build[1], `commit="`+bi.Commit+`"`) || !strings.Contains(build[1], `version="`+bi.Version+`"`) ||
		!strings.Contains(build[1], `go_version="`+bi.GoVersion+`"`) || !strings.Contains(build[1], `build_time="`) {
		t.Errorf("omnigraph_build_info: %v", build)
	}
	// Every omnigraph_ series but the process's build carries the graph.
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "omnigraph_") && !strings.HasPrefix(line, "omnigraph_build_info") && !strings.Contains(line, `graph="demo"`) {
			t.Errorf("a series without its graph: %s", line)
		}
	}
}

// TestCommitLag: a commit made visible sets the last commit's time and observes its lag from
// the JetStream publish; a message that made no commit changes neither.
func TestCommitLag(t *testing.T) {
	m := NewMetrics()
	now := time.Unix(1_800_000_000, 0)
	m.visible(now.Add(-3*time.Second), now, &applied{event: Event{GraphCommitID: "c1"}})
	m.visible(now.Add(-time.Hour), now.Add(time.Second), &applied{event: Event{GraphCommitID: "c0", AlreadyApplied: true}})
	m.visible(now.Add(-time.Hour), now.Add(time.Second), &applied{event: Event{Kind: "cleanup"}})
	m.visible(now, now, nil)
	_, out := scrape(t, m.Handler(), "/metrics")
	for _, w := range []string{"omnigraph_last_commit_timestamp_seconds 1.8e+09", `omnigraph_commit_lag_seconds_bucket{le="2.5"} 0`,
		`omnigraph_commit_lag_seconds_bucket{le="5"} 1`, "omnigraph_commit_lag_seconds_count 1", "omnigraph_commit_lag_seconds_sum 3"} {
		if !strings.Contains(out, w+"\n") {
			t.Errorf("/metrics lacks %s", w)
		}
	}
}

// TestCommitLagThroughTheWorker: a batch published and committed is counted once in
// omnigraph_commit_lag_seconds, between its publish and its event, and sets
// omnigraph_last_commit_timestamp_seconds; its redelivery (already applied) is not counted;
// taking the lease sets the epoch and counts the acquisition.
func TestCommitLagThroughTheWorker(t *testing.T) {
	m := NewMetricsFor("demo")
	var lease *Lease
	h := start(t, func(w *Worker) {
		w.UseMetrics(m)
		var err error
		if lease, err = acquireLease(context.Background(), w.js, "demo", "test", 10*time.Second, Replication{}, func(string) {}); err != nil {
			t.Fatal(err)
		}
		w.UseLease(lease)
	})
	before := time.Now()
	h.publish(batch, map[string]string{HeaderMode: "append", "Nats-Msg-Id": "lag-1"})
	h.event()
	after := time.Now()
	// The same batch again under another id: its receipt is the payload's, so it is a
	// KeyConflict dead letter, not a commit.
	h.publish(batch, map[string]string{HeaderMode: "append", "Nats-Msg-Id": "lag-2"})
	h.deadLetter("key_conflict")
	var out string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if out = exposition(m); strings.Contains(out, `omnigraph_dead_letters_total{graph="demo",reason="key_conflict"} 1`) {
			break
		}
	}
	if !strings.Contains(out, `omnigraph_commit_lag_seconds_count{graph="demo"} 1`+"\n") {
		t.Fatalf("lag not observed once:\n%s", out)
	}
	sum := regexp.MustCompile(`omnigraph_commit_lag_seconds_sum\{graph="demo"\} (\S+)`).FindStringSubmatch(out)
	last := regexp.MustCompile(`omnigraph_last_commit_timestamp_seconds\{graph="demo"\} (\S+)`).FindStringSubmatch(out)
	if sum == nil || last == nil {
		t.Fatalf("no lag sum or last commit:\n%s", out)
	}
	lag, _ := strconv.ParseFloat(sum[1], 64)
	at, _ := strconv.ParseFloat(last[1], 64)
	if lag <= 0 || lag > after.Sub(before).Seconds() {
		t.Errorf("lag %vs, want within the %v between publish and event", lag, after.Sub(before))
	}
	if at < float64(before.UnixNano())/1e9 || at > float64(after.UnixNano())/1e9 {
		t.Errorf("last commit at %v, want between %v and %v", at, before, after)
	}
	if !strings.Contains(out, fmt.Sprintf(`omnigraph_lease_epoch{graph="demo"} %d`, lease.Epoch())) ||
		!strings.Contains(out, `omnigraph_lease_acquisitions_total{graph="demo"} 1`) {
		t.Errorf("lease epoch %d or acquisition not recorded:\n%s", lease.Epoch(), out)
	}
}

// ExportedFamilies lists what a `worker run` registry serves, vectors that start empty included.
func TestExportedFamilies(t *testing.T) {
	fams, err := ExportedFamilies()
	if err != nil {
		t.Fatal(err)
	}
	for name, typ := range map[string]string{"omnigraph_unindexed_rows": "GAUGE", "omnigraph_commit_lag_seconds": "HISTOGRAM",
		"omnigraph_build_info": "GAUGE", "omnigraph_dead_letters_total": "COUNTER", "go_goroutines": "GAUGE", "process_cpu_seconds_total": "COUNTER"} {
		if fams[name] != typ {
			t.Errorf("%s: %q, want %s", name, fams[name], typ)
		}
	}
}

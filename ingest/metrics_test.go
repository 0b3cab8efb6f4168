package ingest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
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

package ingest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/lance"
)

// startBudget arms failpoint name with action and starts a worker with metrics and a short
// retry budget.
func startBudget(t *testing.T, name, action string, budget time.Duration) (*harness, *Metrics) {
	t.Helper()
	m := NewMetrics()
	h := start(t, func(w *Worker) { w.UseMetrics(m); w.cfg.RetryBudget = budget; w.cfg.RetryMax = 200 * time.Millisecond })
	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable(name, action); err != nil { // after init: it writes too
		t.Fatal(err)
	}
	return h, m
}

// An error not known to be transient (here an injected failure without an errno) is retried in
// place only within the retry budget, then dead-lettered as retry_exhausted with the budget,
// the attempts and the last error; the stream goes on.
func TestUnknownErrorPastBudgetIsDeadLettered(t *testing.T) {
	h, m := startBudget(t, "load.after_prepare", "error", time.Second)
	h.publish(batch, map[string]string{HeaderMode: "append"})
	dl := h.deadLetter(errs.KindRetryExhausted)
	failpoint.Reset()
	var d map[string]any
	if err := json.Unmarshal([]byte(dl.Header.Get(HeaderErrorDetail)), &d); err != nil || d["retry_budget"] != "1s" ||
		d["attempts"].(float64) < 2 || !strings.Contains(d["last_error"].(string), "injected failure") {
		t.Fatalf("detail %s (%v)", dl.Header.Get(HeaderErrorDetail), err)
	}
	h.publish(`{"type":"Person","data":{"handle":"bob","name":"Bob","active":true}}`, nil)
	if ev := h.event(); ev.SourceSequence != 2 {
		t.Fatalf("event %+v", ev)
	}
	waitMetrics(t, m, `omnigraph_retry_budget_exhausted_total{action="dead_lettered"} 1`, `omnigraph_dead_letters_total{reason="retry_exhausted"} 1`,
		"omnigraph_stalled 0")
}

// A storage error that refuses the key for good (here a permission error on the data file a
// load writes) is not retried: it is dead-lettered at once as storage_refused.
func TestRefusedStorageKeyIsDeadLetteredAtOnce(t *testing.T) {
	h, m := startBudget(t, "storage.put", "1*error(EACCES)", time.Hour)
	h.publish(batch, map[string]string{HeaderMode: "append"})
	dl := h.deadLetter(errs.KindStorageRefused)
	if !strings.Contains(dl.Header.Get(HeaderError), "permission denied") || !strings.Contains(dl.Header.Get(HeaderErrorDetail), `"op":"put"`) {
		t.Fatalf("dead letter %v", dl.Header)
	}
	h.publish(batch, map[string]string{HeaderMode: "append"})
	if ev := h.event(); ev.SourceSequence != 2 {
		t.Fatalf("event %+v", ev)
	}
	waitMetrics(t, m, `omnigraph_dead_letters_total{reason="storage_refused"} 1`)
}

// A known-transient error (here a full disk) past the budget is not dead-lettered: the message
// is held and retried, and the stall is visible (error log, /readyz 503 with the reason,
// omnigraph_stalled 1). Once the disk has room the message commits and the stall clears.
func TestTransientErrorPastBudgetStallsVisibly(t *testing.T) {
	h, m := startBudget(t, "storage.put", "error(ENOSPC)", 500*time.Millisecond)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	h.publish(batch, map[string]string{HeaderMode: "append"})
	waitMetrics(t, m, "omnigraph_stalled 1", `omnigraph_retry_budget_exhausted_total{action="stalled"} 1`)
	r, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "stalled") || !strings.Contains(string(body), "no space left on device") ||
		!strings.Contains(string(body), "seq 1") {
		t.Fatalf("readyz while stalled: %d %s", r.StatusCode, body)
	}
	failpoint.Reset() // the disk has room again
	if ev := h.event(); ev.SourceSequence != 1 {
		t.Fatalf("event %+v", ev)
	}
	waitMetrics(t, m, "omnigraph_stalled 0", `omnigraph_messages_total{outcome="committed"} 1`)
	if r, err := http.Get(srv.URL + "/readyz"); err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("readyz after the stall: %v %v", r, err)
	}
	h.checkNoRedelivery()
	if dls, _ := DeadLetters(t.Context(), h.js, h.w.cfg, ""); len(dls) != 0 {
		t.Fatalf("dead letters %+v", dls)
	}
}

// A table at a Lance file version this build cannot read or write is the graph's problem, not
// the batch's: it needs an operator, so the worker holds the message and stops consuming
// (TestOperatorRequiredStopsConsumptionVisibly shows the hold), never dead-letters it.
func TestDataVersionErrorNeedsAnOperator(t *testing.T) {
	err := fmt.Errorf("load: %w", &lance.DataVersionError{Dataset: "nodes/x", Op: "write", Declared: "2.3", Files: "2.0, 2.1, 2.2"})
	if errs.Kind(err) != errs.KindDataVersion || !errs.NeedsOperator(err) || errs.Permanent(err) {
		t.Fatalf("kind %q operator %v permanent %v", errs.Kind(err), errs.NeedsOperator(err), errs.Permanent(err))
	}
	if k, _ := errs.Lookup(errs.KindDataVersion); k.DeadLetter != "" {
		t.Fatalf("data_version is dead-lettered as %q", k.DeadLetter)
	}
}

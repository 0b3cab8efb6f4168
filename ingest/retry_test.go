package ingest

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/recovery"
)

// waitMetrics polls m until it shows every line of want.
func waitMetrics(t *testing.T, m *Metrics, want ...string) {
	t.Helper()
	var out string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var buf bytes.Buffer
		_, _ = m.WriteTo(&buf)
		out = buf.String()
		missing := false
		for _, w := range want {
			missing = missing || !strings.Contains(out, w+"\n")
		}
		if !missing {
			return
		}
	}
	t.Fatalf("metrics lack some of %q:\n%s", want, out)
}

// checkNoRedelivery requires that every message was delivered once: retries happened in
// place, not through the server.
func (h *harness) checkNoRedelivery() {
	h.t.Helper()
	info, err := h.w.cons.Info(context.Background())
	if err != nil || info.NumRedelivered != 0 || info.NumAckPending != 0 {
		h.t.Fatalf("consumer %+v %v", info, err)
	}
}

// A transient failure (here the load failing before it arms anything) is retried in place
// with backoff: the message is not redelivered, and the one behind it waits its turn.
func TestTransientFailureRetriesInPlace(t *testing.T) {
	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable("load.after_prepare", "2*error"); err != nil {
		t.Fatal(err)
	}
	m := NewMetrics()
	h := start(t, func(w *Worker) { w.UseMetrics(m) })
	h.publish(batch, map[string]string{HeaderMode: "append"})
	h.publish(`{"type":"Person","data":{"handle":"bob","name":"Bob","active":true}}`, map[string]string{HeaderMode: "append"})
	for want := uint64(1); want <= 2; want++ {
		if ev := h.event(); ev.SourceSequence != want {
			t.Fatalf("event for message %d, want %d: a retry let a later message overtake", ev.SourceSequence, want)
		}
	}
	waitMetrics(t, m, `omnigraph_messages_total{outcome="committed"} 2`, "omnigraph_recoveries_total 0")
	h.checkNoRedelivery()
	if out := h.export(); strings.Count(out, `"handle":"alice"`) != 1 || strings.Count(out, `"handle":"bob"`) != 1 {
		t.Fatalf("export:\n%s", out)
	}
}

// RecoveryRequired (here a load failing after its first table committed) makes the worker
// resolve the intent and retry the same delivery: one commit, no sidecar left, no redelivery.
func TestRecoveryRequiredRecoversThenRetries(t *testing.T) {
	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable("load.after_table_commit", "1*error"); err != nil {
		t.Fatal(err)
	}
	m := NewMetrics()
	h := start(t, func(w *Worker) { w.UseMetrics(m) })
	h.publish(batch, map[string]string{HeaderMode: "append", HeaderMsgID: "once"})
	if ev := h.event(); ev.SourceSequence != 1 || ev.AlreadyApplied {
		t.Fatalf("event %+v", ev)
	}
	waitMetrics(t, m, `omnigraph_messages_total{outcome="committed"} 1`, "omnigraph_recoveries_total 1")
	h.checkNoRedelivery()
	if pending, err := recovery.List(context.Background(), h.g.Root()); err != nil || len(pending) != 0 {
		t.Fatalf("sidecars left: %v %v", pending, err)
	}
	if out := h.export(); strings.Count(out, `"handle":"alice"`) != 1 || strings.Count(out, `"id":"w1"`) != 1 {
		t.Fatalf("export:\n%s", out)
	}
}

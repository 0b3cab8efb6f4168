package ingest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/engine/rows"
	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/lance"
)

// driftTable commits a row to the graph's key table behind the engine's back, as a writer
// outside a graph commit would: the table's Lance HEAD moves ahead of its published version.
func driftTable(t *testing.T, g *engine.Graph, key, line string) {
	t.Helper()
	ctx := context.Background()
	st, err := g.Snapshot(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	e, ok := st.Table(key)
	if !ok {
		t.Fatalf("no table %s", key)
	}
	ds, err := lance.Open(ctx, g.Root().Sub(e.Path))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := framing.ParseBytes([]byte(line), framing.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	b, err := rows.Build(g.Catalog(), recs, engine.ModeAppend, rows.Options{})
	if err != nil {
		t.Fatal(err)
	}
	staged, err := ds.StageAppend(ctx, []arrow.Record{b[key].Record}, lance.StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ds.Commit(ctx, staged); err != nil {
		t.Fatal(err)
	}
}

func readyz(t *testing.T, url string) (int, string) {
	t.Helper()
	r, err := http.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	body, _ := io.ReadAll(r.Body)
	return r.StatusCode, string(body)
}

// A batch that meets a drifted table (an error that needs an operator) stops consumption at
// once and visibly: an error log naming the kind, /readyz 503 "operator required:
// table_drift: …", omnigraph_operator_required{kind="table_drift"} 1. The message is held
// in place well past the retry budget and two ack waits under max_deliver 2: never
// dead-lettered, never redelivered, and the batch behind it waits. Once an operator restores
// the table (from another process, as `worker recover --restore-drift` does) the hold ends,
// the held batch commits, the one behind it follows, and the state clears.
func TestOperatorRequiredStopsConsumptionVisibly(t *testing.T) {
	m := NewMetrics()
	core, logs := observer.New(zap.InfoLevel)
	h := start(t, func(w *Worker) {
		w.UseMetrics(m)
		w.log = zap.New(core)
		w.cfg.RetryMax, w.cfg.RetryBudget, w.cfg.MaxDeliver = 200*time.Millisecond, 300*time.Millisecond, 2
		if err := w.Setup(context.Background()); err != nil { // the consumer now gives up after two deliveries
			t.Fatal(err)
		}
	})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	h.publish(batch, map[string]string{HeaderMode: "append"})
	if ev := h.event(); ev.SourceSequence != 1 {
		t.Fatalf("event %+v", ev)
	}
	driftTable(t, h.g, "node:Person", `{"type":"Person","data":{"handle":"intruder","name":"I","active":true}}`)
	h.publish(`{"type":"Person","data":{"handle":"bob","name":"Bob","active":true}}`, map[string]string{HeaderMode: "append"})
	h.publish(`{"type":"Company","data":{"domain":"b.io","name":"B","size":"smb"}}`, map[string]string{HeaderMode: "append"})

	waitMetrics(t, m, `omnigraph_operator_required{kind="table_drift"} 1`, `omnigraph_operator_required{kind="corrupt"} 0`, "omnigraph_stalled 1")
	if code, body := readyz(t, srv.URL); code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "operator required: table_drift: ") ||
		!strings.Contains(body, "node:Person") || !strings.Contains(body, "--restore-drift") || !strings.Contains(body, "stream seq 2 held") {
		t.Fatalf("readyz while held: %d %s", code, body)
	}
	// Held past the retry budget and past max_deliver × ack_wait (2 × 2 s).
	time.Sleep(5 * time.Second)
	info, err := h.w.cons.Info(context.Background())
	if err != nil || info.NumRedelivered != 0 || info.NumAckPending != 1 || info.Delivered.Stream != 2 {
		t.Fatalf("consumer while held: %+v %v", info, err)
	}
	if dls, _ := DeadLetters(t.Context(), h.js, h.w.cfg, ""); len(dls) != 0 {
		t.Fatalf("dead letters %+v", dls)
	}
	held := logs.FilterMessageSnippet("operator required").All()
	if len(held) < 2 || held[0].Level != zap.ErrorLevel || held[0].ContextMap()["kind"] != errs.KindTableDrift ||
		!strings.Contains(fmt.Sprint(held[0].ContextMap()["error"]), "ahead of published dataset version") {
		t.Fatalf("held logs %+v", held)
	}

	// The operator's fix, from a process of its own. The first attempt after it fails
	// otherwise (an injected unknown error), which ends the hold; the next one commits.
	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable("load.after_prepare", "1*error"); err != nil {
		t.Fatal(err)
	}
	op, err := engine.Open(context.Background(), h.g.Root())
	if err != nil {
		t.Fatal(err)
	}
	if out, err := op.RestoreDrift(context.Background()); err != nil || len(out) != 1 {
		t.Fatalf("restore: %+v %v", out, err)
	}
	for want := uint64(2); want <= 3; want++ {
		if ev := h.event(); ev.SourceSequence != want {
			t.Fatalf("event for %d, want %d", ev.SourceSequence, want)
		}
	}
	waitMetrics(t, m, `omnigraph_operator_required{kind="table_drift"} 0`, "omnigraph_stalled 0", `omnigraph_messages_total{outcome="committed"} 3`)
	if code, body := readyz(t, srv.URL); code != http.StatusOK {
		t.Fatalf("readyz after the fix: %d %s", code, body)
	}
	h.checkNoRedelivery()
	if out := exposition(m); regexp.MustCompile(`(?m)^(omnigraph_retry_budget_exhausted_total|omnigraph_dead_letters_total)\{.*\} [^0]`).MatchString(out) {
		t.Fatalf("an operator hold is neither a stall past the budget nor a dead letter:\n%s", out)
	}
	if out := h.export(); strings.Contains(out, "intruder") || !strings.Contains(out, `"handle":"bob"`) {
		t.Fatalf("export:\n%s", out)
	}
	if over := logs.FilterMessageSnippet("operator hold over").All(); len(over) != 1 || !strings.Contains(over[0].Message, "is gone") {
		t.Fatalf("hold ends %+v", over)
	}
}

package ingest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
)

func (h *harness) publishSchema(src string, allowDataLoss bool, msgID string) {
	h.t.Helper()
	body, _ := json.Marshal(SchemaRequestBody{Schema: src, AllowDataLoss: allowDataLoss})
	m := nats.NewMsg(h.w.cfg.SchemaSubject())
	m.Data = body
	if msgID != "" {
		m.Header.Set(HeaderMsgID, msgID)
	}
	if _, err := h.js.PublishMsg(context.Background(), m); err != nil {
		h.t.Fatal(err)
	}
}

// A schema change over the queue, in stream order with the batches: a batch of a type the
// schema does not have yet is dead-lettered as invalid naming it; the apply request commits
// with a schema event; a batch published right after it is validated against the new schema;
// the dead letter replays cleanly; the same schema again is no commit; an unsupported one is
// dead-lettered as schema_unsupported with nothing written.
func TestSchemaRequestsOverTheQueue(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	h.publish(batch, map[string]string{HeaderMode: "append", HeaderMsgID: "base"})
	h.event()

	h.publish(`{"type":"Tag","data":{"label":"early"}}`, map[string]string{HeaderMsgID: "early-tag"})
	dl := h.deadLetter(errs.KindInvalid)
	if !strings.Contains(dl.Header.Get(HeaderError), "Tag") {
		t.Fatalf("the dead letter does not name the unknown type: %v", dl.Header)
	}

	evolved := graphtest.EvolvedExample(t)
	h.publishSchema(evolved, false, "schema-1")
	h.publish(`{"type":"Tag","data":{"label":"late"}}`, map[string]string{HeaderMsgID: "late-tag"})
	ev := h.event()
	if ev.Kind != RequestSchema || ev.Schema == nil || !ev.Schema.Applied || ev.Schema.StepCount != 6 || ev.GraphCommitID == "" ||
		ev.Schema.SchemaIRHash != h.g.Contract().State.IRHash || ev.SourceMsgID != "schema-1" {
		t.Fatalf("schema event %+v", ev)
	}
	if ev := h.event(); ev.Kind != "load" || ev.SourceMsgID != "late-tag" {
		t.Fatalf("the batch after the request: %+v", ev)
	}
	res, err := Replay(ctx, h.js, h.w.cfg, ReplayOptions{Reason: errs.KindInvalid}, func(string) {})
	if err != nil || res.Replayed != 1 {
		t.Fatalf("replay: %+v %v", res, err)
	}
	if ev := h.event(); ev.Kind != "load" {
		t.Fatalf("the replayed batch: %+v", ev)
	}
	if out := h.export(); !strings.Contains(out, `"label":"early"`) || !strings.Contains(out, `"label":"late"`) {
		t.Fatalf("export:\n%s", out)
	}

	h.publishSchema(evolved, false, "schema-2")
	if ev := h.event(); ev.Kind != RequestSchema || ev.Schema.Applied || ev.GraphCommitID != "" || ev.Schema.StepCount != 0 {
		t.Fatalf("the same schema again: %+v", ev)
	}
	// A required property with the value every stored row gets.
	body, _ := json.Marshal(SchemaRequestBody{Schema: strings.Replace(evolved, "    label: String @key\n", "    label: String @key\n    weight: I32\n", 1),
		Defaults: map[string]json.RawMessage{"Tag.weight": json.RawMessage("5")}})
	m := nats.NewMsg(h.w.cfg.SchemaSubject())
	m.Data = body
	if _, err := h.js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	if ev := h.event(); ev.Kind != RequestSchema || !ev.Schema.Applied || !strings.Contains(h.export(), `"weight":5`) {
		t.Fatalf("a backfilled required property: %+v", ev)
	}
	evolved = strings.Replace(evolved, "    label: String @key\n", "    label: String @key\n    weight: I32\n", 1)
	st, _ := h.g.Snapshot(ctx, "")
	version := st.ManifestVersion
	h.publishSchema(strings.Replace(evolved, "    stars: I32?\n", "    stars: I64?\n", 1), false, "schema-3")
	dl = h.deadLetter(errs.KindSchemaUnsupported)
	if !strings.Contains(dl.Header.Get(HeaderError), "OG-MF-106") || dl.Header.Get(HeaderOrigSubject) != h.w.cfg.SchemaSubject() {
		t.Fatalf("unsupported dead letter %v", dl.Header)
	}
	if st, _ := h.g.Snapshot(ctx, ""); st.ManifestVersion != version {
		t.Fatal("an unsupported schema wrote")
	}
	// The early batch's dead letter is still the last invalid one until this one lands.
	h.publishSchema("node {", false, "")
	for deadline := time.Now().Add(outcomeWait); ; time.Sleep(20 * time.Millisecond) {
		dl = h.deadLetter(errs.KindInvalid)
		if dl.Header.Get(HeaderOrigSubject) == h.w.cfg.SchemaSubject() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no invalid dead letter of the schema that does not compile: %v", dl.Header)
		}
	}
	if !strings.Contains(dl.Header.Get(HeaderError), "schema") {
		t.Fatalf("a schema that does not compile: %v", dl.Header)
	}
}

// A schema applied by another process behind the serving worker: its next batch is validated
// against it. A contract this worker cannot load holds the batch (kind schema, /readyz 503)
// instead of writing it against the schema it had; put right, the batch commits.
func TestWorkerFollowsSchemaAppliedBehindIt(t *testing.T) {
	m := NewMetrics()
	h := start(t, func(w *Worker) {
		w.UseMetrics(m)
		w.cfg.RetryMax, w.cfg.RetryBudget = 200*time.Millisecond, 300*time.Millisecond
	})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	ctx := context.Background()
	h.publish(batch, map[string]string{HeaderMode: "append"})
	h.event()
	other, err := engine.Open(ctx, h.g.Root())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.ApplySchema(ctx, graphtest.EvolvedExample(t), engine.SchemaApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	h.publish(`{"type":"Tag","data":{"label":"behind"}}`, nil)
	if ev := h.event(); ev.Kind != "load" || ev.SourceSequence != 2 {
		t.Fatalf("the batch of the schema applied behind the worker: %+v", ev)
	}

	state, err := h.g.Root().Get(ctx, "__schema_state.json")
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(state), `"schema_ir_hash": "sha256:`, `"schema_ir_hash": "sha256:0`, 1)
	if err := h.g.Root().Put(ctx, "__schema_state.json", []byte(broken)); err != nil {
		t.Fatal(err)
	}
	h.publish(`{"type":"Tag","data":{"label":"held"}}`, nil)
	waitMetrics(t, m, `omnigraph_operator_required{kind="schema"} 1`)
	if code, body := readyz(t, srv.URL); code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "operator required: schema: ") {
		t.Fatalf("readyz while held: %d %s", code, body)
	}
	if err := h.g.Root().Put(ctx, "__schema_state.json", state); err != nil {
		t.Fatal(err)
	}
	if ev := h.event(); ev.SourceSequence != 3 {
		t.Fatalf("the held batch: %+v", ev)
	}
	waitMetrics(t, m, `omnigraph_operator_required{kind="schema"} 0`)
}

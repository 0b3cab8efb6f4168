package ingest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
)

func (h *harness) publishMaintenance(body string) {
	h.t.Helper()
	m := nats.NewMsg(h.w.cfg.MaintenanceSubject())
	m.Data = []byte(body)
	if _, err := h.js.PublishMsg(context.Background(), m); err != nil {
		h.t.Fatal(err)
	}
}

// An operator compacts and cleans up a served graph through its worker: the requests are
// applied in stream order under the worker's lease and reported by events; the graph reads
// the same; a malformed request is dead-lettered.
func TestMaintenanceRequests(t *testing.T) {
	h := start(t, func(w *Worker) { w.cfg.CompactionFanout = 0 })
	for i := 0; i < 5; i++ {
		h.publish(fmt.Sprintf(`{"type":"Person","data":{"handle":"p%d","name":"P","active":true}}`, i), map[string]string{HeaderMode: "append"})
		h.event()
	}
	before := h.export()
	h.publishMaintenance(`{"op":"optimize","all":true}`)
	ev := h.event()
	if ev.Kind != "optimize" || ev.Optimize == nil || len(ev.Optimize.Tables) != 1 || ev.Optimize.Tables[0].FragmentsRemoved != 5 || ev.GraphCommitID == "" {
		t.Fatalf("optimize event %+v", ev)
	}
	h.publishMaintenance(`{"op":"cleanup","keep":1}`)
	ev = h.event()
	if ev.Kind != "cleanup" || ev.Cleanup == nil || len(ev.Cleanup.Datasets) == 0 || ev.Cleanup.DryRun {
		t.Fatalf("cleanup event %+v", ev)
	}
	if after := h.export(); after != before {
		t.Fatalf("maintenance changed the graph:\n%s\n---\n%s", before, after)
	}
	h.publishMaintenance(`{"op":"vacuum"}`)
	if dl := h.deadLetter(errs.KindInvalid); !strings.Contains(dl.Header.Get(HeaderError), "vacuum") {
		t.Fatalf("dead letter %v", dl.Header)
	}
	// Loads go on after it.
	h.publish(`{"type":"Person","data":{"handle":"late","name":"L","active":true}}`, map[string]string{HeaderMode: "append"})
	if ev := h.event(); ev.Kind != "load" {
		t.Fatalf("event %+v", ev)
	}
}

func TestParseMaintenanceRequest(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"op":"optimize"}`, ""},
		{`{"op":"optimize","all":true,"fanout":8}`, ""},
		{`{"op":"cleanup","keep":10,"older_than":"7d","dry_run":true}`, ""},
		{`{"op":"vacuum"}`, "unknown maintenance op"},
		{`{"op":"cleanup"}`, "keep of at least 1"},
		{`{"op":"cleanup","keep":3,"older_than":"7 days"}`, "followed by s, m, h, d or w"},
		{`{"op":"optimize","keep":3}`, "belong to cleanup"},
		{`{"op":"cleanup","keep":3,"all":true}`, "belong to optimize"},
		{`{"op":"optimize","fanout":1}`, "at least 2"},
		{`{"op":"optimize","extra":1}`, "unknown field"},
		{`{"op":"optimize"} {}`, "trailing data"},
	} {
		_, err := ParseMaintenanceRequest([]byte(c.body))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.body, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || errs.Kind(err) != errs.KindInvalid):
			t.Errorf("%s: got %v, want %q", c.body, err, c.want)
		}
	}
}

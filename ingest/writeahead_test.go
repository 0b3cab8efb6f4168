package ingest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
)

// tableDataFiles lists the data files of every node and edge table of h's graph.
func (h *harness) tableDataFiles() []string {
	h.t.Helper()
	objs, err := h.g.Root().List(context.Background(), "")
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		if (strings.HasPrefix(o.Key, "nodes/") || strings.HasPrefix(o.Key, "edges/")) && strings.Contains(o.Key, "/data/") {
			out = append(out, o.Key)
		}
	}
	slices.Sort(out)
	return out
}

// A batch the stager built and wrote ahead and the writer then refused (dead-lettered, its
// tables already staged) leaves none of its data files in storage: an append of keys the
// graph holds, and a merge whose edge names a node that does not exist.
func TestDeadLetteredBatchLeavesNoDataFileWrittenAhead(t *testing.T) {
	for _, c := range []struct {
		mode, body, reason string
	}{
		{"append", batch, errs.KindKeyConflict},
		{"merge", `{"type":"Person","data":{"handle":"bob","name":"Bob","active":true}}
{"edge":"WorksAt","from":"bob","to":"nowhere.io","data":{"id":"w2"}}`, errs.KindInvalid},
	} {
		t.Run(c.mode, func(t *testing.T) {
			h := start(t, depth(4)) // as `worker run` stages: ahead of the commit loop
			h.publish(batch, map[string]string{HeaderMode: "append", HeaderMsgID: "b-1"})
			h.event()
			want := h.tableDataFiles()
			h.publish(c.body, map[string]string{HeaderMode: c.mode, HeaderMsgID: "b-2"})
			if ev := h.other(); ev.Outcome != OutcomeDeadLettered || ev.Reason != c.reason {
				t.Fatalf("event %+v, want a dead letter for %s", ev, c.reason)
			}
			// The batch's files go once the commit loop is done with it, just after its event.
			deadline := time.Now().Add(5 * time.Second)
			for got := h.tableDataFiles(); !slices.Equal(got, want); got = h.tableDataFiles() {
				if time.Now().After(deadline) {
					t.Fatalf("data files after the dead letter:\n%v\nwant those of the first batch:\n%v", got, want)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

package ingest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
)

func (h *harness) publishMerge(body, msgID string) {
	h.t.Helper()
	m := nats.NewMsg(h.w.cfg.MergeSubject())
	m.Data = []byte(body)
	if msgID != "" {
		m.Header.Set(HeaderMsgID, msgID)
	}
	if _, err := h.js.PublishMsg(context.Background(), m); err != nil {
		h.t.Fatal(err)
	}
}

// The README pipeline over the queue: load into stage-1 from main, merge it into main with
// delete, chained on the events; a redelivered merge request is a no-op; a conflicting merge
// is dead-lettered with its conflict list.
func TestMergeRequestsOverTheQueue(t *testing.T) {
	h := start(t)
	h.publish(batch, map[string]string{HeaderMode: "append", HeaderMsgID: "base"})
	h.event()
	h.publish(`{"type":"Person","data":{"handle":"carol","name":"Carol","active":true}}`,
		map[string]string{HeaderMode: "append", HeaderBranch: "stage-1", HeaderFrom: "main", HeaderMsgID: "s1-load"})
	if ev := h.event(); ev.Kind != "load" || ev.Branch != "stage-1" {
		t.Fatalf("load event %+v", ev)
	}
	h.publishMerge(`{"source":"stage-1","target":"main","delete_source":true}`, "s1-merge")
	ev := h.event()
	if ev.Kind != "merge" || ev.Merge == nil || ev.Merge.Outcome != "fast_forward" || ev.GraphCommitID == "" ||
		ev.Merge.BranchDeleted == nil || !*ev.Merge.BranchDeleted || ev.Branch != "main" {
		t.Fatalf("merge event %+v", ev)
	}
	if out := h.export(); !strings.Contains(out, "carol") {
		t.Fatalf("main after merge:\n%s", out)
	}
	// A new request for the deleted branch (another message id, so not a redelivery) is
	// dead-lettered as branch_missing. (A redelivery of the same message finds its receipt:
	// engine TestMergeReceipt.)
	h.publishMerge(`{"source":"stage-1","target":"main","delete_source":true}`, "s1-merge-again")
	dl := h.deadLetter("branch_missing")
	if !strings.Contains(dl.Header.Get(HeaderError), "stage-1") {
		t.Fatalf("dead letter %v", dl.Header)
	}

	// Divergent changes on both sides: merge_conflict dead letter with the list.
	h.publish(`{"type":"Person","data":{"handle":"alice","name":"Alice S","active":true}}`,
		map[string]string{HeaderMode: "merge", HeaderBranch: "stage-2", HeaderFrom: "main"})
	h.event()
	h.publish(`{"type":"Person","data":{"handle":"alice","name":"Alice M","active":true}}`, map[string]string{HeaderMode: "merge"})
	h.event()
	h.publishMerge(`{"source":"stage-2"}`, "")
	dl = h.deadLetter(errs.KindMergeConflict)
	var detail struct {
		Conflicts []errs.MergeConflict `json:"merge_conflicts"`
	}
	if err := json.Unmarshal([]byte(dl.Header.Get(HeaderErrorDetail)), &detail); err != nil || len(detail.Conflicts) != 1 ||
		detail.Conflicts[0].Kind != "divergent_update" || *detail.Conflicts[0].EntityID != "alice" {
		t.Fatalf("conflict detail %q (%v)", dl.Header.Get(HeaderErrorDetail), err)
	}
	// A malformed request is invalid input.
	h.publishMerge(`{"source":"x","into":"main"}`, "")
	h.deadLetter(errs.KindInvalid)
}

func TestParseMergeRequest(t *testing.T) {
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{`{"source":"a"}`, true},
		{`{"source":"a","target":"b","delete_source":true}`, true},
		{`{"target":"b"}`, false},
		{`{"source":"a","extra":1}`, false},
		{`{"source":"a"} {}`, false},
		{`[]`, false},
		{``, false},
	} {
		b, err := ParseMergeRequest([]byte(c.body))
		if (err == nil) != c.ok {
			t.Errorf("%s: %v", c.body, err)
		}
		if err == nil && b.Target == "" {
			t.Errorf("%s: no default target", c.body)
		}
		if err != nil && errs.Kind(err) != errs.KindInvalid {
			t.Errorf("%s: kind %s", c.body, errs.Kind(err))
		}
	}
}

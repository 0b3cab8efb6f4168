package ingest

import (
	"context"
	"encoding/json"
	"fmt"
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

	// The operator resolves the conflict on the stage and replays the merge request: it goes
	// back to the merge subject (not the ingest subject, where it would be a malformed batch)
	// and merges. Batch options are refused for it before anything is replayed.
	ctx := context.Background()
	if _, err := Replay(ctx, h.js, h.w.cfg, ReplayOptions{Reason: errs.KindMergeConflict, Branch: "quarantine"}, func(string) {}); err == nil ||
		!strings.Contains(err.Error(), "is a request from omnigraph.demo.merge") {
		t.Fatalf("replaying a merge request with --branch: %v", err)
	}
	h.publish(`{"type":"Person","data":{"handle":"alice","name":"Alice M","active":true}}`,
		map[string]string{HeaderMode: "merge", HeaderBranch: "stage-2"})
	h.event()
	res, err := Replay(ctx, h.js, h.w.cfg, ReplayOptions{Reason: errs.KindMergeConflict}, func(string) {})
	if err != nil || res.Replayed != 1 {
		t.Fatalf("replay: %+v %v", res, err)
	}
	if ev := h.event(); ev.Kind != "merge" || ev.Merge == nil || ev.Merge.Source != "stage-2" || ev.Merge.Outcome != "merged" {
		t.Fatalf("replayed merge event %+v", ev)
	}
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

// A merge with thousands of conflicts still dead-letters: the header carrying the error's
// fields stays within NATS's 64 KiB header block, keeping the first conflicts and the count,
// and the stream goes on.
func TestManyMergeConflictsDeadLetterWithinHeaderLimits(t *testing.T) {
	h := start(t)
	const n = 2000
	people := func(name string) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, `{"type":"Person","data":{"handle":"p%04d","name":"%s","active":true}}`+"\n", i, name)
		}
		return b.String()
	}
	h.publish(people("base"), map[string]string{HeaderMode: "merge"})
	h.event()
	h.publish(people("on the branch"), map[string]string{HeaderMode: "merge", HeaderBranch: "stage", HeaderFrom: "main"})
	h.event()
	h.publish(people("on main"), map[string]string{HeaderMode: "merge"})
	h.event()
	h.publishMerge(`{"source":"stage"}`, "")
	dl := h.deadLetter(errs.KindMergeConflict)
	raw := dl.Header.Get(HeaderErrorDetail)
	var detail struct {
		Conflicts []errs.MergeConflict `json:"merge_conflicts"`
		Total     int                  `json:"merge_conflicts_total"`
		Truncated bool                 `json:"truncated"`
	}
	if err := json.Unmarshal([]byte(raw), &detail); err != nil || detail.Total != n || !detail.Truncated ||
		len(detail.Conflicts) == 0 || len(detail.Conflicts) >= n || len(raw) > maxHeaderValueBytes {
		t.Fatalf("detail of %d bytes: %d conflicts kept, total %d, truncated %v (%v)", len(raw), len(detail.Conflicts), detail.Total, detail.Truncated, err)
	}
	if text := dl.Header.Get(HeaderError); !strings.Contains(text, fmt.Sprintf("has %d conflict(s)", n)) || len(text) > maxHeaderValueBytes {
		t.Fatalf("error header of %d bytes: %.200s", len(text), text)
	}
	h.publish(`{"type":"Person","data":{"handle":"after","name":"A","active":true}}`, nil)
	if ev := h.event(); ev.SourceSequence != 5 {
		t.Fatalf("event %+v: the stream did not go on", ev)
	}
}

// Every merge with delete_source says in its event what happened to the source: deleted, or
// kept with the reason (main is never deleted; a branch others were created from is kept).
func TestMergeEventSaysWhatHappenedToTheSource(t *testing.T) {
	h := start(t)
	h.publish(batch, map[string]string{HeaderMode: "append"})
	h.event()
	h.publish(`{"type":"Person","data":{"handle":"carol","name":"Carol","active":true}}`,
		map[string]string{HeaderMode: "append", HeaderBranch: "stage", HeaderFrom: "main"})
	h.event()
	h.publish(`{"type":"Person","data":{"handle":"dave","name":"Dave","active":true}}`, map[string]string{HeaderMode: "append"})
	h.event()
	// main into stage with delete_source: main stays, and the event says so.
	h.publishMerge(`{"source":"main","target":"stage","delete_source":true}`, "")
	ev := h.event()
	if ev.Merge == nil || ev.Merge.BranchKept == nil || !*ev.Merge.BranchKept || ev.Merge.BranchKeptReason != "main is never deleted" ||
		ev.Merge.BranchDeleted == nil || *ev.Merge.BranchDeleted {
		t.Fatalf("merge event %+v %+v", ev, ev.Merge)
	}
	// stage has a child branch: kept, with the reason.
	h.publish(`{"type":"Person","data":{"handle":"erin","name":"Erin","active":true}}`,
		map[string]string{HeaderMode: "append", HeaderBranch: "stage-child", HeaderFrom: "stage"})
	h.event()
	h.publishMerge(`{"source":"stage","delete_source":true}`, "")
	ev = h.event()
	if ev.Merge == nil || ev.Merge.BranchKept == nil || !*ev.Merge.BranchKept || ev.Merge.BranchKeptReason == "" ||
		ev.Merge.BranchDeleted == nil || *ev.Merge.BranchDeleted || ev.Merge.BranchDeleteError == "" {
		t.Fatalf("merge event %+v %+v", ev, ev.Merge)
	}
	// Deleted: branch_deleted, no branch_kept.
	h.publishMerge(`{"source":"stage-child","delete_source":true}`, "")
	ev = h.event()
	if ev.Merge == nil || ev.Merge.BranchDeleted == nil || !*ev.Merge.BranchDeleted || ev.Merge.BranchKept != nil {
		t.Fatalf("merge event %+v %+v", ev, ev.Merge)
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/ingest"
)

// A wait ends with the catalogue's exit code of its outcome: 0 for a commit, an already
// applied or an empty batch, the dead letter's kind, the operators' code for a hold, and
// wait_timeout's own code when nothing came.
func TestOutcomeExitCodes(t *testing.T) {
	for _, c := range []struct {
		ev   ingest.Event
		want int
	}{
		{ingest.Event{Kind: "load", Outcome: ingest.OutcomeCommitted}, 0},
		{ingest.Event{Kind: "load", Outcome: ingest.OutcomeAlreadyApplied, AlreadyApplied: true}, 0},
		{ingest.Event{Kind: ingest.OutcomeEmpty, Outcome: ingest.OutcomeEmpty}, 0},
		{ingest.Event{Outcome: ingest.OutcomeDeadLettered, Reason: errs.KindKeyConflict, ErrorKind: errs.KindKeyConflict}, 4},
		{ingest.Event{Outcome: ingest.OutcomeDeadLettered, Reason: errs.KindInvalid, ErrorKind: errs.KindInvalid}, 3},
		{ingest.Event{Outcome: ingest.OutcomeDeadLettered, Reason: errs.KindResourceLimit, ErrorKind: errs.KindResourceLimit}, 5},
		{ingest.Event{Outcome: ingest.OutcomeDeadLettered, Reason: errs.KindBranchMissing, ErrorKind: errs.KindBranchMissing}, 8},
		{ingest.Event{Outcome: ingest.OutcomeDeadLettered, Reason: errs.ReasonMaxDeliver, ErrorKind: errs.ReasonMaxDeliver}, errs.ExitInternal},
		{ingest.Event{Outcome: ingest.OutcomeHeld, ErrorKind: errs.KindCorrupt}, errs.ExitOperator},
		{ingest.Event{Outcome: ingest.OutcomeHeld, ErrorKind: errs.KindTableDrift}, errs.ExitOperator},
	} {
		if got := exitCode(outcomeError(c.ev)); got != c.want {
			t.Errorf("%s %s: exit %d, want %d", c.ev.Outcome, c.ev.ErrorKind, got, c.want)
		}
	}
	timeout := &waitTimeoutError{Stream: "OMNIGRAPH_DEMO", Seq: 8, Timeout: time.Second}
	if got, want := exitCode(fmt.Errorf("publish: %w", timeout)), 13; got != want || !strings.Contains(timeout.Error(), "(--wait-timeout)") {
		t.Errorf("timeout: exit %d, want %d (%v)", got, want, timeout)
	}
	if k, _ := errs.Lookup(errs.KindWaitTimeout); k.ExitCode != 13 {
		t.Errorf("the catalogue's wait_timeout: %+v", k)
	}
}

// describeEvent is one line a person reads: where the message came from and how it ended.
func TestDescribeEvent(t *testing.T) {
	actor := "p"
	for _, c := range []struct {
		ev   ingest.Event
		want string
	}{
		{ingest.Event{Kind: "load", Outcome: ingest.OutcomeCommitted, Branch: "main", Mode: engine.ModeAppend, SourceStream: "S", SourceSequence: 3, SourceMsgID: "b-1",
			Nodes: []engine.TypeCount{{Name: "Person", EntitiesLoaded: 2}}, Edges: []engine.TypeCount{{Name: "WorksAt", EntitiesLoaded: 1}}, GraphCommitID: "C", ManifestVersion: 7, ActorID: &actor},
			"stream S sequence 3 (msg id b-1): committed: load on main (append), 3 entities (Person 2, WorksAt 1), commit C at manifest version 7"},
		{ingest.Event{Kind: "load", AlreadyApplied: true, Branch: "main", SourceStream: "S", SourceSequence: 4, GraphCommitID: "C", ManifestVersion: 7},
			"stream S sequence 4: already_applied: load on main, commit C at manifest version 7"},
		{ingest.Event{Kind: "merge", Outcome: ingest.OutcomeCommitted, Branch: "main", SourceStream: "S", SourceSequence: 5, Merge: &ingest.MergeEvent{Source: "s", Target: "main", Outcome: "already_up_to_date"}},
			"stream S sequence 5: committed: merge on main, merge s into main: already_up_to_date, no commit"},
		{ingest.Event{Kind: ingest.OutcomeEmpty, Outcome: ingest.OutcomeEmpty, SourceStream: "S", SourceSequence: 6},
			"stream S sequence 6: empty: no records, acknowledged without a commit"},
		{ingest.Event{Kind: ingest.OutcomeDeadLettered, Outcome: ingest.OutcomeDeadLettered, SourceStream: "S", SourceSequence: 7, Reason: "key_conflict", ErrorKind: "key_conflict",
			Error: "node type 'Person' already has this id", DLQStream: "S_DLQ", DLQSequence: 2},
			"stream S sequence 7: dead_lettered as key_conflict (key_conflict): node type 'Person' already has this id; dead letter 2 on S_DLQ (worker dlq show 2)"},
		{ingest.Event{Kind: ingest.OutcomeHeld, Outcome: ingest.OutcomeHeld, SourceStream: "S", SourceSequence: 8, ErrorKind: "corrupt", Error: "bad"},
			"stream S sequence 8: held for an operator (corrupt): bad; applied once the graph is mended"},
	} {
		raw, err := json.Marshal(c.ev)
		if err != nil {
			t.Fatal(err)
		}
		if got := describeEvent(raw); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
	if got := describeEvent(json.RawMessage(`not json`)); got != "not json" {
		t.Errorf("an unreadable event: %q", got)
	}
}

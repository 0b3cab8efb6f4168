package worker

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
)

// TestDLQDelete: `worker dlq delete` against a real worker's dead letters, one of them sent by
// reference (its body too large to go beside the error under this server's max_payload).
// Without --confirm it lists what it would delete as `dlq list` does and deletes nothing; a
// sequence that names no dead letter fails (exit 1) and a backwards range is refused (exit
// 2), both before anything is deleted; with --confirm it deletes the selected dead letters and
// the by-reference body from the ingest stream, and nothing else; the worker goes on.
func TestDLQDelete(t *testing.T) {
	const payload = 1 << 20
	ns := prepareNATSPayload(t, payload)
	ns.start()
	root := initGraph(t)
	w := startWorker(t, root, ns.url, "")
	waitStream(t, ns.url)
	big := strings.Repeat(strings.Repeat("x", 99)+"\n", (payload-300)/100) // no batch: invalid
	publishBody(t, ns.url, big, nil)                                       // ingest 1: by reference
	publishBody(t, ns.url, `{"type":"Nope","data":{}}`, nil)               // ingest 2: invalid
	publishBody(t, ns.url, graphtest.BatchBody(0), map[string]string{"Omnigraph-Mode": "append"})
	publishBody(t, ns.url, graphtest.BatchBody(0), map[string]string{"Omnigraph-Mode": "append"}) // ingest 4: key_conflict
	waitAcked(t, ns.url, 4, w)
	dls := listDeadLetters(t, ns.url)
	if len(dls) != 3 || dls[0].OrigSeq != 1 || first(dls[0].Headers["Omnigraph-Body-Omitted"]) == "" || dls[1].Reason != "invalid" || dls[2].Reason != "key_conflict" {
		t.Fatalf("dead letters %+v", dls)
	}
	del := []string{"dlq", "delete", "--graph", "demo", "--nats-url", ns.url}

	// The dry run: the list, the body, the count; nothing deleted.
	out, errOut, code := runWorker(t, append(del, "--reason", "invalid")...)
	if code != 0 || !strings.Contains(out, "SEQ  REASON") || !strings.Contains(out, "would delete 2 dead letter(s); nothing was deleted (add --confirm") ||
		!strings.Contains(out, "would also delete the") || !strings.Contains(out, "message 1 of stream OMNIGRAPH_DEMO") {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errOut)
	}
	// Refused before anything is deleted.
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"1,99", "--confirm"}, 1, "no dead letter at sequence 99: nothing was deleted"},
		{[]string{"3", "--reason", "invalid", "--confirm"}, 1, "no dead letter of reason invalid at sequence 3"},
		{[]string{"9-3", "--confirm"}, 2, `"9-3": goes backwards`},
		{[]string{"x", "--confirm"}, 2, "is not a sequence"},
		{[]string{"--confirm"}, 2, "dlq delete needs the dead letters to delete"},
		{[]string{"--reason", "bogus", "--confirm"}, 2, "is not a dead-letter reason"},
	} {
		_, errOut, code := runWorker(t, append(del, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.says) {
			t.Errorf("dlq delete %v: exit %d, want %d saying %q\n%s", c.args, code, c.code, c.says, errOut)
		}
	}
	if got := listDeadLetters(t, ns.url); len(got) != 3 || streamMsgs(t, ns.url, "OMNIGRAPH_DEMO") != 4 {
		t.Fatalf("a dry run or a refusal deleted something: %+v", got)
	}

	// Deleted: the two invalid dead letters, and the first one's body from the ingest stream.
	out, errOut, code = runWorker(t, append(del, "1-2", "--confirm", "--json")...)
	var res struct {
		DryRun      bool         `json:"dry_run"`
		Deleted     int          `json:"deleted"`
		DeadLetters []deadLetter `json:"dead_letters"`
		Bodies      []struct {
			DeadLetter uint64 `json:"dead_letter_seq"`
			Stream     string `json:"stream"`
			Seq        uint64 `json:"sequence"`
			Deleted    bool   `json:"deleted"`
		} `json:"bodies_by_reference"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.DryRun || res.Deleted != 2 || len(res.DeadLetters) != 2 ||
		len(res.Bodies) != 1 || !res.Bodies[0].Deleted || res.Bodies[0].Stream != "OMNIGRAPH_DEMO" || res.Bodies[0].Seq != 1 {
		t.Fatalf("dlq delete 1-2 --confirm --json: exit %d\n%s%s", code, out, errOut)
	}
	if got := listDeadLetters(t, ns.url); len(got) != 1 || got[0].Reason != "key_conflict" {
		t.Fatalf("dead letters left: %+v", got)
	}
	s, err := connectJS(t, ns.url).Stream(context.Background(), "OMNIGRAPH_DEMO")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetMsg(context.Background(), 1); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("the by-reference body is still in the ingest stream: %v", err)
	}
	for seq := uint64(2); seq <= 4; seq++ {
		if _, err := s.GetMsg(context.Background(), seq); err != nil {
			t.Fatalf("ingest message %d, no dead letter's body, was deleted: %v", seq, err)
		}
	}
	// The text form, by reason; then the worker goes on as before.
	out, errOut, code = runWorker(t, append(del, "--reason", "key_conflict", "--confirm")...)
	if code != 0 || !strings.Contains(out, "key_conflict") || !strings.Contains(out, "deleted 1 dead letter(s)") {
		t.Fatalf("dlq delete --reason key_conflict --confirm: exit %d\n%s%s", code, out, errOut)
	}
	if got := listDeadLetters(t, ns.url); len(got) != 0 {
		t.Fatalf("dead letters left: %+v", got)
	}
	publishBody(t, ns.url, graphtest.BatchBody(1), map[string]string{"Omnigraph-Mode": "append"})
	waitAcked(t, ns.url, 5, w)
	w.terminate(t)
	checkBatches(t, root, []int{0, 1})
}

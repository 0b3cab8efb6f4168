package worker

import (
	"os/exec"
	"strings"
	"testing"
)

// TestReplayKeepsMsgIDDryRunAndLoopGuard: a dead letter keeps the producer's Nats-Msg-Id as
// Omnigraph-Original-Msg-Id, through replays that fail again; a dry run says what it would
// do and changes nothing; once a batch was replayed three times the loop guard leaves it in
// place and the command fails saying so.
func TestReplayKeepsMsgIDDryRunAndLoopGuard(t *testing.T) {
	ns := startNATS(t)
	root := initGraph(t)
	w := startWorker(t, root, ns.url, "")
	publishBody(t, ns.url, `{"type":"Nope","data":{}}`, map[string]string{"Nats-Msg-Id": "producer-1"})
	waitAcked(t, ns.url, 1, w)
	checkLetter := func(when string) {
		t.Helper()
		dls := listDeadLetters(t, ns.url)
		if len(dls) != 1 || first(dls[0].Headers["Omnigraph-Original-Msg-Id"]) != "producer-1" {
			t.Fatalf("%s: want one dead letter naming producer-1, got %+v", when, dls)
		}
	}
	checkLetter("dead-lettered")
	replay := []string{"dlq", "replay", "--graph", "demo", "--nats-url", ns.url}
	out := workerCmd(t, append(replay, "--dry-run")...)
	if !strings.Contains(out, "would replay 1 dead letter(s) as 1 message(s)") {
		t.Fatalf("dry run said:\n%s", out)
	}
	checkLetter("after the dry run")
	for i := uint64(1); i <= 3; i++ {
		if out := workerCmd(t, replay...); !strings.Contains(out, "replayed 1 dead letter(s) as 1 message(s)") {
			t.Fatalf("replay %d said:\n%s", i, out)
		}
		waitAcked(t, ns.url, 1+i, w)
		checkLetter("dead-lettered again")
	}
	cmd := exec.Command(bin.worker, replay...)
	got, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(got), "left in place by the loop guard") {
		t.Fatalf("a fourth replay: want a failure naming the loop guard, got %v\n%s", err, got)
	}
	checkLetter("after the loop guard")
	w.terminate(t)
}

package worker

import (
	"errors"
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

// TestReplayValidatesAndKeepsTheFirstError: dlq replay refuses, before it publishes anything, a
// mode or branch the worker would dead-letter for its headers alone, --from without --branch,
// and a --seq range that is backwards; a range that holds no dead letter fails saying so. A
// replay that fails again keeps the first error as Omnigraph-Original-Error beside its own.
func TestReplayValidatesAndKeepsTheFirstError(t *testing.T) {
	ns := startNATS(t)
	root := initGraph(t)
	w := startWorker(t, root, ns.url, "")
	publishBody(t, ns.url, `{"type":"Nope","data":{}}`, nil)
	waitAcked(t, ns.url, 1, w)
	dls := listDeadLetters(t, ns.url)
	if len(dls) != 1 {
		t.Fatalf("dead letters %+v", dls)
	}
	firstError, firstKind := dls[0].Error, dls[0].Kind
	replay := []string{"dlq", "replay", "--graph", "demo", "--nats-url", ns.url}
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--mode", "apend"}, 3, `unknown load mode "apend"`},
		{[]string{"--mode", "apend", "--dry-run"}, 3, `unknown load mode "apend"`},
		{[]string{"--branch", "bad..name"}, 3, "--branch"},
		{[]string{"--from", "main"}, 2, "--from forks the branch --branch names"},
		{[]string{"--seq", "9-3"}, 2, "the first sequence is after the last"},
		{[]string{"--seq", "999"}, 1, "no dead letter with a sequence in 999-999"},
	} {
		out, err := exec.Command(bin.worker, append(replay, c.args...)...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != c.code || !strings.Contains(string(out), c.says) {
			t.Errorf("dlq replay %v: %v (want exit %d saying %q)\n%s", c.args, err, c.code, c.says, out)
		}
	}
	if dls := listDeadLetters(t, ns.url); len(dls) != 1 || dls[0].Seq != 1 {
		t.Fatalf("a refused replay changed the dead letters: %+v", dls)
	}
	// A valid replay of a batch that fails again: the new dead letter keeps the first error.
	workerCmd(t, append(replay, "--mode", "append")...)
	waitAcked(t, ns.url, 2, w)
	dls = listDeadLetters(t, ns.url)
	if len(dls) != 1 || first(dls[0].Headers["Omnigraph-Original-Error"]) != firstError ||
		first(dls[0].Headers["Omnigraph-Original-Error-Kind"]) != firstKind || dls[0].Error == "" {
		t.Fatalf("the replay dead-lettered again: %+v (first error %q)", dls, firstError)
	}
	w.terminate(t)
}

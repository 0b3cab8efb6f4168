package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/omnigraph/omnigraph-worker/ingest"
	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
)

// publishBody publishes one message to the demo graph's ingest subject.
func publishBody(t *testing.T, url, body string, hdr map[string]string) {
	t.Helper()
	publishOn(t, url, "omnigraph.demo.ingest", body, hdr)
}

// publishOn publishes one message to subject and waits for JetStream to accept it. A worker
// just started makes its streams as it starts, so a message published before then finds no
// stream (no responders): it is sent again every 50 ms until one takes it, for up to 30 s, as
// a producer would (nats.go's default gives up after two attempts 250 ms apart, which a slow
// start on a loaded machine outlasts).
func publishOn(t *testing.T, url, subject, body string, hdr map[string]string) {
	t.Helper()
	if err := publishWith(connectJS(t, url), subject, body, hdr); err != nil {
		t.Fatalf("publish to %s: %v", subject, err)
	}
}

// publishWith is publishOn's publish on js, for a goroutine of a test (which must not call
// t.Fatal).
func publishWith(js jetstream.JetStream, subject, body string, hdr map[string]string) error {
	m := nats.NewMsg(subject)
	m.Data = []byte(body)
	for k, v := range hdr {
		m.Header.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := js.PublishMsg(ctx, m, jetstream.WithRetryWait(50*time.Millisecond), jetstream.WithRetryAttempts(600))
	return err
}

// workerCmd runs a one-shot worker subcommand (dlq list, dlq replay, …) and returns its stdout.
func workerCmd(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin.worker, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("worker %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// deadLetter is what `worker dlq list --json` prints of one dead letter.
type deadLetter struct {
	Seq     uint64              `json:"seq"`
	Reason  string              `json:"reason"`
	Kind    string              `json:"error_kind"`
	Error   string              `json:"error"`
	Detail  string              `json:"error_detail"`
	OrigSeq uint64              `json:"original_sequence"`
	Headers map[string][]string `json:"headers"`
}

func listDeadLetters(t *testing.T, url string, args ...string) []deadLetter {
	t.Helper()
	out := workerCmd(t, append([]string{"dlq", "list", "--graph", "demo", "--nats-url", url, "--json"}, args...)...)
	var dls []deadLetter
	if err := json.Unmarshal([]byte(out), &dls); err != nil {
		t.Fatalf("dlq list --json: %v\n%s", err, out)
	}
	return dls
}

// TestHappyPathEvents: batches published by a producer are committed in stream order, each
// announced by one commit event naming its message, and exported exactly once.
func TestHappyPathEvents(t *testing.T) {
	ns := startNATS(t)
	root := initGraph(t)
	nc, err := nats.Connect(ns.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	events, err := nc.SubscribeSync("omnigraph.demo.events")
	if err != nil {
		t.Fatal(err)
	}
	w := startWorker(t, root, ns.url, "", "--gc-percent", "250", "--memory-limit", "805306368", "--compaction-fanout", "2")
	const n = 5
	publish(t, ns.url, n)
	var last uint64
	for i := 0; i < n; i++ {
		m, err := events.NextMsg(30 * time.Second)
		if err != nil {
			t.Fatalf("event %d: %v\n%s", i, err, w.out)
		}
		var ev struct {
			Kind           string `json:"kind"`
			GraphCommitID  string `json:"graph_commit_id"`
			Version        uint64 `json:"graph_manifest_version"`
			SourceSequence uint64 `json:"source_sequence"`
			SourceMsgID    string `json:"source_msg_id"`
		}
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Kind != "load" || ev.GraphCommitID == "" || ev.SourceSequence != uint64(i+1) || ev.SourceMsgID != fmt.Sprintf("batch-%d", i) || ev.Version <= last {
			t.Fatalf("event %d: %s", i, m.Data)
		}
		last = ev.Version
	}
	waitAcked(t, ns.url, n, w)
	// The worker compacted beside the messages (fanout 2: every second one-row fragment).
	if commits := workerCmd(t, "commits", "--root", root); !strings.Contains(commits, "omnigraph-worker:compaction") {
		t.Fatalf("no compaction commit:\n%s\n%s", commits, w.out)
	}
	// An operator cleans the served graph through its worker: a maintenance request, applied
	// in stream order under the lease and reported by an event.
	workerCmd(t, "cleanup", "--graph", "demo", "--nats-url", ns.url, "--keep", "1", "--confirm")
	m, err := events.NextMsg(30 * time.Second)
	if err != nil {
		t.Fatalf("no cleanup event: %v\n%s", err, w.out)
	}
	if !strings.Contains(string(m.Data), `"kind":"cleanup"`) || !strings.Contains(string(m.Data), `"old_versions_removed"`) {
		t.Fatalf("cleanup event %s", m.Data)
	}
	// Tools that write the root directly refuse while the worker serves it.
	batch := filepath.Join(t.TempDir(), "b.ndjson")
	if err := os.WriteFile(batch, []byte(`{"type":"Person","data":{"handle":"x","name":"X","active":true}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"load", "--root", root, batch}, {"optimize", "--root", root}, {"recover", "--root", root}} {
		out, err := exec.Command(bin.worker, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "served by a running `worker run`") {
			t.Fatalf("worker %s beside a live worker: %v\n%s", args[0], err, out)
		}
	}
	w.terminate(t)
	checkExactlyOnce(t, root, n)
	if !strings.Contains(w.out.String(), `"gc_percent":250`) || !strings.Contains(w.out.String(), `"soft_limit_bytes":805306368`) {
		t.Fatalf("--gc-percent or --memory-limit not applied:\n%s", w.out)
	}
}

// TestEveryDeadLetterReasonThenReplay: one stream carries good batches and one message for
// every reason a batch can never succeed, malformed bodies among them. Each bad one lands on
// omnigraph.demo.dlq.<reason> with its error, the good ones commit around them, and the graph
// holds exactly the good ones. The operators' tool then lists them and replays three of them
// the ways the README describes: as merge, split under the limits, and into a branch forked
// from main.
func TestEveryDeadLetterReasonThenReplay(t *testing.T) {
	ns := startNATS(t)
	root := initGraph(t)
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	w := startWorker(t, root, ns.url, "", "--http", httpAddr)
	publish(t, ns.url, 1) // seq 1: batch 0
	companies := make([]string, 8193)
	for i := range companies {
		companies[i] = fmt.Sprintf(`{"type":"Company","data":{"domain":"bulk%d.io","name":"B","size":"smb"}}`, i)
	}
	bad := []struct {
		body   string
		hdr    map[string]string
		reason string
		detail string // in Omnigraph-Error-Detail
	}{
		{`{"type":"Person","data":{"handle":"p0","name":"Again","active":true}}`, map[string]string{"Omnigraph-Mode": "append"}, "key_conflict", `"entity_id":"p0"`},
		{`{"type":"Person","data":{`, nil, "invalid", `"line":1`},
		{"\x00\xff\xfe not json at all", nil, "invalid", `"line":1`},
		{`{"type":"Nope","data":{}}`, nil, "invalid", `"line":1`},
		{strings.Join(companies, "\n"), nil, "resource_limit", `"limit":8192`},
		{graphtest.BatchBody(7), map[string]string{"Omnigraph-Branch": "quarantine"}, "branch_missing", `"branch":"quarantine"`},
	}
	for _, b := range bad { // seqs 2..7
		publishBody(t, ns.url, b.body, b.hdr)
	}
	publishBody(t, ns.url, graphtest.BatchBody(1), nil) // seq 8: batch 1, after every bad one
	waitAcked(t, ns.url, 8, w)

	dls := listDeadLetters(t, ns.url)
	if len(dls) != len(bad) {
		t.Fatalf("%d dead letters, want %d: %+v", len(dls), len(bad), dls)
	}
	for i, b := range bad {
		d := dls[i]
		seq := uint64(i + 2)
		if d.OrigSeq != seq || d.Reason != b.reason || d.Kind == "" || d.Error == "" || !strings.Contains(d.Detail, b.detail) ||
			first(d.Headers["Omnigraph-Original-Subject"]) != "omnigraph.demo.ingest" || !strings.HasPrefix(first(d.Headers["Nats-Msg-Id"]), "dlq:OMNIGRAPH_DEMO@") || !strings.HasSuffix(first(d.Headers["Nats-Msg-Id"]), fmt.Sprintf(":%d", seq)) {
			t.Fatalf("dead letter %d: %+v, want reason %s with %s", i, d, b.reason, b.detail)
		}
	}
	checkBatches(t, root, []int{0, 1})
	// The operators' view of the same: outcomes, reasons, the lease, readiness.
	metrics := httpGet(t, "http://"+httpAddr+"/metrics", 200)
	// Every series carries the graph, as in a fleet; the reasons no batch met are there at 0.
	for _, want := range []string{`omnigraph_messages_total{graph="demo",outcome="committed"} 2`, `omnigraph_messages_total{graph="demo",outcome="dead_lettered"} 6`,
		`omnigraph_dead_letters_total{graph="demo",reason="invalid"} 3`, `omnigraph_dead_letters_total{graph="demo",reason="key_conflict"} 1`,
		`omnigraph_dead_letters_total{graph="demo",reason="resource_limit"} 1`, `omnigraph_dead_letters_total{graph="demo",reason="branch_missing"} 1`,
		`omnigraph_dead_letters_total{graph="demo",reason="max_deliver"} 0`, `omnigraph_rows_total{graph="demo"} 6`,
		`omnigraph_lease_held{graph="demo"} 1`, `omnigraph_lease_acquisitions_total{graph="demo"} 1`, `omnigraph_commit_seconds_count{graph="demo"} 2`,
		`omnigraph_commit_lag_seconds_count{graph="demo"} 2`} {
		if !strings.Contains(metrics, want+"\n") {
			t.Fatalf("/metrics lacks %q:\n%s", want, metrics)
		}
	}
	httpGet(t, "http://"+httpAddr+"/healthz", 200)
	httpGet(t, "http://"+httpAddr+"/readyz", 200)

	// Replay: the conflicting person as a merge (an upsert), the oversized batch split into
	// batches under the limit, and the batch for a missing branch into that branch forked
	// from main. The malformed ones stay where they are.
	dlq := []string{"dlq", "replay", "--graph", "demo", "--nats-url", ns.url}
	workerCmd(t, append(dlq, "--reason", "key_conflict", "--mode", "merge")...)
	workerCmd(t, append(dlq, "--reason", "resource_limit", "--split")...)
	workerCmd(t, append(dlq, "--reason", "branch_missing", "--branch", "quarantine", "--from", "main")...)
	waitAcked(t, ns.url, 8+1+2+1, w)
	left := listDeadLetters(t, ns.url)
	if len(left) != 3 {
		t.Fatalf("after replay %d dead letters left, want the 3 invalid ones: %+v", len(left), left)
	}
	for _, d := range left {
		if d.Reason != "invalid" {
			t.Fatalf("left %+v", d)
		}
	}
	w.terminate(t)
	lines := exportLines(t, root)
	bulk, again := 0, 0
	for _, l := range lines {
		if strings.Contains(l, `"domain":"bulk`) {
			bulk++
		}
		if strings.Contains(l, `"handle":"p0"`) && strings.Contains(l, `"name":"Again"`) {
			again++
		}
	}
	if len(lines) != 6+8193 || bulk != 8193 || again != 1 {
		t.Fatalf("main holds %d rows (%d bulk, p0 renamed %d times), want 6 + 8193, 8193, 1", len(lines), bulk, again)
	}
	q := exportLines(t, root, "--branch", "quarantine")
	if len(q) != len(lines)+3 || !strings.Contains(strings.Join(q, "\n"), `"handle":"p7"`) {
		t.Fatalf("quarantine holds %d rows, want main's %d and batch 7's 3", len(q), len(lines))
	}
}

// TestPoisonMessageIsDeadLetteredAfterMaxDeliver: a batch that kills the worker every time it
// is applied is not retried forever: its last delivery goes to the max_deliver dead letters,
// and the batches behind it commit.
func TestPoisonMessageIsDeadLetteredAfterMaxDeliver(t *testing.T) {
	ns := startNATS(t)
	root := initGraph(t)
	publish(t, ns.url, 1)
	for i := 0; i < 2; i++ { // deliveries 1 and 2 die in the middle of the commit
		startWorker(t, root, ns.url, "load.after_sidecar=kill", "--max-deliver", "3", "--ack-wait", "1s").waitDeath(t)
	}
	w := startWorker(t, root, ns.url, "", "--max-deliver", "3", "--ack-wait", "1s")
	publishBody(t, ns.url, graphtest.BatchBody(1), nil)
	waitAcked(t, ns.url, 2, w)
	dls := listDeadLetters(t, ns.url, "--reason", "max_deliver")
	if len(dls) != 1 || dls[0].OrigSeq != 1 || !strings.Contains(dls[0].Error, "delivered 3 times") {
		t.Fatalf("max_deliver dead letters: %+v", dls)
	}
	w.terminate(t)
	checkBatches(t, root, []int{1})
}

// TestDrainFinishesTheCommitInFlight: SIGTERM arrives while a commit is in the middle of its
// protocol. The worker finishes it, acknowledges it, takes nothing more from the stream and
// exits 0; a new worker takes the rest, and every batch is in the graph once.
func TestDrainFinishesTheCommitInFlight(t *testing.T) {
	ns := startNATS(t)
	root := initGraph(t)
	w := startWorker(t, root, ns.url, "load.after_table_commit=1*sleep(3000)")
	publish(t, ns.url, 3)
	// The commit is in flight while its recovery sidecar exists.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m, _ := filepath.Glob(filepath.Join(root, "__recovery", "*.json")); len(m) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no commit in flight:\n%s", w.out)
		}
		time.Sleep(10 * time.Millisecond)
	}
	w.terminate(t)
	if m, _ := filepath.Glob(filepath.Join(root, "__recovery", "*.json")); len(m) != 0 {
		t.Fatalf("drained with a sidecar left: %v\n%s", m, w.out)
	}
	checkBatches(t, root, []int{0})
	if out := w.out.String(); !strings.Contains(out, `"outcome":"committed"`) || strings.Count(out, `"outcome":`) != 1 {
		t.Fatalf("the drained worker should have committed exactly the batch in flight:\n%s", out)
	}
	w2 := startWorker(t, root, ns.url, "")
	waitAcked(t, ns.url, 3, w2)
	w2.terminate(t)
	checkExactlyOnce(t, root, 3)
}

// httpGet fetches url and requires the status code.
func httpGet(t *testing.T, url string, code int) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != code {
		t.Fatalf("GET %s: %d %v, want %d\n%s", url, resp.StatusCode, err, code, body)
	}
	return string(body)
}

func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// TestPipelineMergeSurvivesKills: a pipeline loads batches into a staging branch forked from
// main and asks for a merge on omnigraph.demo.merge. The worker dies at each step of the merge
// protocol, and between the merge's commit and its ack; a restarted worker finishes the stream, and main holds every batch exactly once
// (the merge is neither lost nor applied twice, whatever recovery had to do).
func TestPipelineMergeSurvivesKills(t *testing.T) {
	// (merge.after_fork is not on this path: main's tables need no fork to take a merge.)
	for _, fp := range []string{"merge.after_arm=kill", "merge.after_chain_commit=kill", "merge.after_confirm=kill",
		"merge.before_publish=kill", "merge.after_publish=kill", "ingest.before_ack=3+1*kill"} {
		t.Run(fp, func(t *testing.T) {
			ns := startNATS(t)
			root := initGraph(t)
			publish(t, ns.url, 1) // batch 0 on main
			for i := 1; i <= 2; i++ {
				publishBody(t, ns.url, graphtest.BatchBody(i), map[string]string{"Omnigraph-Branch": "staging", "Omnigraph-From": "main",
					"Nats-Msg-Id": fmt.Sprintf("staging-%d", i), "Omnigraph-Mode": "append"})
			}
			publishMerge(t, ns.url, `{"source":"staging","target":"main","delete_source":true}`, "merge-staging")
			startWorker(t, root, ns.url, fp, "--ack-wait", "1s").waitDeath(t)
			w := startWorker(t, root, ns.url, "", "--ack-wait", "1s")
			waitAcked(t, ns.url, 4, w)
			w.terminate(t)
			checkBatches(t, root, []int{0, 1, 2})
			if out, err := exec.Command(bin.worker, "export", "--root", root, "--branch", "staging").CombinedOutput(); err == nil {
				t.Fatalf("the merged staging branch was not deleted:\n%s", out)
			}
		})
	}
}

// publishMerge publishes a merge request to the demo graph's merge subject.
func publishMerge(t *testing.T, url, body, msgID string) {
	t.Helper()
	publishOn(t, url, "omnigraph.demo.merge", body, map[string]string{"Nats-Msg-Id": msgID})
}

// TestFullSizeBatch: a batch as large as JetStream can queue (32 MiB counting the subject and
// headers: ingest.MaxBodyBytes) goes through `worker publish` and a nats-server configured as
// the README says, and commits whole; `worker publish` refuses one byte more with a clear
// message instead of the server's "message too large".
func TestFullSizeBatch(t *testing.T) {
	ns := startNATS(t)
	root := initGraph(t)
	w := startWorker(t, root, ns.url, "")
	hdr := nats.Header{}
	hdr.Set("Omnigraph-Mode", "append")
	limit := ingest.MaxBodyBytes("omnigraph.demo.ingest", hdr)
	// 8,192 people (the keyed-row ceiling), each line padded with insignificant whitespace, so
	// the batch is full-size on the queue and small in Arrow.
	const lines = 8192
	var b strings.Builder
	for i := range lines {
		l := fmt.Sprintf(`{"type":"Person","data":{"handle":"big-%05d","name":"P","active":true}`, i)
		size := limit / lines
		if i == lines-1 {
			size = limit - b.Len()
		}
		b.WriteString(l + strings.Repeat(" ", size-len(l)-2) + "}\n")
	}
	body := b.String()
	if len(body) != limit {
		t.Fatalf("body %d bytes, limit %d", len(body), limit)
	}
	dir := t.TempDir()
	full, over := filepath.Join(dir, "full.ndjson"), filepath.Join(dir, "over.ndjson")
	if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(over, []byte(body+" "), 0o644); err != nil {
		t.Fatal(err)
	}
	publishArgs := []string{"publish", "--graph", "demo", "--nats-url", ns.url, "--mode", "append"}
	workerCmd(t, append(publishArgs, full)...)
	out, err := exec.Command(bin.worker, append(publishArgs, over)...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), fmt.Sprintf("the batch is %d bytes", limit+1)) || !strings.Contains(string(out), "split it") {
		t.Fatalf("publishing one byte over the limit: %v\n%s", err, out)
	}
	// A publish JetStream does not confirm in time says so, and how to retry safely.
	out, err = exec.Command(bin.worker, append(publishArgs, "--timeout", "1ns", full)...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "within 1ns (--timeout)") || !strings.Contains(string(out), "same --msg-id") {
		t.Fatalf("publishing with a 1ns timeout: %v\n%s", err, out)
	}
	waitAcked(t, ns.url, 1, w)
	w.terminate(t)
	if got := exportLines(t, root); len(got) != lines {
		t.Fatalf("graph holds %d rows, want %d", len(got), lines)
	}
}

// TestWorkerWaitsForNATS: a worker started before its NATS server (as docker-compose may
// start them) waits for it instead of exiting, then consumes as usual; one stopped while it
// waits exits 0.
func TestWorkerWaitsForNATS(t *testing.T) {
	ns := prepareNATS(t)
	root := initGraph(t)
	w := startWorker(t, root, ns.url, "")
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(w.out.String(), "NATS not reachable; retrying") {
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not wait for NATS:\n%s", w.out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case err := <-w.done:
		t.Fatalf("the worker exited without NATS: %v\n%s", err, w.out)
	case <-time.After(300 * time.Millisecond):
	}
	ns.start()
	publish(t, ns.url, 2)
	waitAcked(t, ns.url, 2, w)
	w.terminate(t)
	checkExactlyOnce(t, root, 2)

	idle := prepareNATS(t) // never started
	w2 := startWorker(t, root, idle.url, "")
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(w2.out.String(), "NATS not reachable; retrying"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the second worker did not wait for NATS:\n%s", w2.out)
		}
	}
	w2.terminate(t) // exit 0 while waiting
}

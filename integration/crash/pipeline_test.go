package crash

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/ingest"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/internal/proctest"
	"github.com/omnigraph/omnigraph-worker/lance"
)

var pipelineSummary string

// pipelineBatch is stream message i: a person, a company and the edge between them (three
// tables), keyed by i at a fixed width so that the keys only grow (the indices' folds append).
// In merge mode it also renames the person of message i-1 (Q<i>): the row of an earlier
// message replaced, beside new ones.
func pipelineBatch(i int, mode engine.Mode) string {
	b := fmt.Sprintf(`{"type":"Person","data":{"handle":"p%03d","name":"P","active":true}}
{"type":"Company","data":{"domain":"c%03d.io","name":"C","size":"smb"}}
{"edge":"WorksAt","from":"p%03d","to":"c%03d.io","data":{"id":"w%03d"}}`, i, i, i, i, i)
	if mode == engine.ModeMerge && i > 0 {
		b += fmt.Sprintf("\n"+`{"type":"Person","data":{"handle":"p%03d","name":"Q%03d","active":true}}`, i-1, i)
	}
	return b
}

// TestPipelineCrashMatrix kills `worker run` (pipeline depth 4) while it applies the third of
// eight queued messages, with the ones behind it prefetched, framed and built: at each step of
// the load and ack protocol (the ack itself in the acker, beside the next message's commit;
// the stager's write of a batch's data files ahead of its load, lance.write_ahead), for
// appends and, at the steps that stage files written ahead, for merges replacing rows of
// earlier messages; and at each step of an automatic compaction running beside them (an
// index fold that appends among them). A worker started again finishes the stream. Every
// message must be in the graph exactly once and whole, every table at its pin, nothing
// dead-lettered, and the commit events in stream order.
func TestPipelineCrashMatrix(t *testing.T) {
	var tl tally
	disordered := 0
	for _, step := range []string{lance.FailpointWriteAhead, "load.after_prepare", "load.after_sidecar", "load.after_table_commit", "load.after_confirm",
		"publisher.before_commit", "load.after_publish", "load.fold", "ingest.before_ack", ingest.FailpointAckQueued} {
		t.Run(step, func(t *testing.T) {
			lost, doubled, half, inOrder := runPipelineCase(t, step+"=2+1*kill", "16", true, engine.ModeAppend)
			tl.add(lost, doubled, half)
			if !inOrder {
				disordered++
			}
		})
	}
	// Merges that replace rows of earlier messages, their data files written ahead as an
	// append's are: killed at the write ahead and at each step of the load that stages them
	// beside the deletion files masking the rows they replace.
	for _, step := range []string{lance.FailpointWriteAhead, "load.after_sidecar", "load.after_table_commit", "load.after_confirm"} {
		t.Run("merge/"+step, func(t *testing.T) {
			lost, doubled, half, inOrder := runPipelineCase(t, step+"=2+1*kill", "16", true, engine.ModeMerge)
			tl.add(lost, doubled, half)
			if !inOrder {
				disordered++
			}
		})
	}
	// The automatic compaction runs beside the messages (compaction_fanout 2: one is due after
	// the second commit): killed once its rewrite is staged, and at each step of its publish.
	// lance.append_index_file: the write of a BTREE folded by appending (the batches' keys only
	// grow), which this worker can do only for an index it built or folded itself.
	for _, fp := range []string{"compaction.after_stage=kill", "optimize.after_sidecar=kill", "optimize.after_table_commit=1+1*kill",
		"optimize.before_publish=kill", "optimize.after_publish=kill", "lance.append_index_file=kill"} {
		t.Run("compaction/"+fp, func(t *testing.T) {
			// The fold that appends comes once the index has lagged a doubling: by then the
			// stream may be all applied, and the kill leaves nothing in flight.
			lost, doubled, half, inOrder := runPipelineCase(t, fp, "2", !strings.HasPrefix(fp, "lance.append_index_file"), engine.ModeAppend)
			tl.add(lost, doubled, half)
			if !inOrder {
				disordered++
			}
		})
	}
	pipelineSummary = fmt.Sprintf("crash-matrix-pipeline: %d cases, %d lost, %d doubled, %d half-visible, %d out of stream order", tl.cases, tl.lost, tl.doubled, tl.half, disordered)
	if tl.lost+tl.doubled+tl.half+disordered != 0 {
		t.Errorf("%s", pipelineSummary)
	}
}

// runPipelineCase runs the stream of loads in mode through a worker killed at fp, with
// compaction_fanout fanout; inFlight requires messages unacknowledged at the kill.
func runPipelineCase(t *testing.T, fp, fanout string, inFlight bool, mode engine.Mode) (lost, doubled, half, inOrder bool) {
	ctx := context.Background()
	ns, err := ingest.StartEmbedded(t.TempDir(), -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "OMNIGRAPH_DEMO", Subjects: []string{"omnigraph.demo.ingest"}, MaxMsgSize: ingest.MaxMessageBytes}); err != nil {
		t.Fatal(err)
	}
	// Enough messages that a compaction due after the second commit, which waits behind the
	// tables' first index builds (each new index directory made durable before its files),
	// still finds some in flight when it is killed: with 8, a slow host had acknowledged 7.
	n := 16
	if !inFlight {
		n = 48 // the index lags a doubling several times: a fold appends however the folds fall
	}
	for i := range n {
		m := nats.NewMsg("omnigraph.demo.ingest")
		m.Data = []byte(pipelineBatch(i, mode))
		m.Header.Set(ingest.HeaderMode, string(mode))
		m.Header.Set(ingest.HeaderMsgID, fmt.Sprintf("batch-%d", i))
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	dir, root, _ := newGraph(t)
	w, killedOut := startRun(t, dir, ns.ClientURL(), fp, fanout)
	exited := make(chan error, 1)
	go func() { exited <- w.Wait() }()
	select {
	case err := <-exited:
		if err == nil || w.ProcessState.ExitCode() != -1 {
			t.Fatalf("the worker was not killed at %s: %v", fp, err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the worker did not reach %s in 60 s:\n%s", fp, killedOut.String())
	}
	cons, err := js.Consumer(ctx, "OMNIGRAPH_DEMO", ingest.DefaultConsumer)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := cons.Info(ctx); err != nil || inFlight && info.NumAckPending < 2 {
		t.Fatalf("at the kill %+v %v: want several messages in flight", info, err)
	}
	w, output := startRun(t, dir, ns.ClientURL(), "", fanout)
	deadline := time.Now().Add(60 * time.Second)
	for {
		// The killed worker may have acknowledged the whole stream already (a kill in a fold
		// after the last message): the new one is told to stop once it consumes, not before
		// it has its signal handler.
		if info, err := cons.Info(ctx); err == nil && info.AckFloor.Stream >= uint64(n) && strings.Contains(output.String(), `"msg":"consuming"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the restarted worker did not acknowledge every message")
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = w.Process.Signal(syscall.SIGTERM)
	if err := w.Wait(); err != nil {
		t.Fatalf("worker did not exit cleanly: %v", err)
	}
	g, err := engine.Open(ctx, root) // full recovery, then the checks
	if err != nil {
		t.Fatal(err)
	}
	assertAligned(t, g)
	out := strings.Join(exportLines(t, root), "\n")
	for i := range n {
		seen := map[int]bool{}
		keys := []string{`"handle":"p%03d"`, `"domain":"c%03d.io"`, `"id":"w%03d"`}
		if mode == engine.ModeMerge && i > 0 {
			keys = append(keys, `"name":"Q%03d"`) // its rename of the person before
		}
		for _, k := range keys {
			seen[strings.Count(out, fmt.Sprintf(k, i)+",")+strings.Count(out, fmt.Sprintf(k, i)+"}")] = true
		}
		switch {
		case len(seen) > 1 && seen[0]:
			half = true
			t.Errorf("batch %d half-visible", i)
		case seen[0]:
			lost = true
			t.Errorf("batch %d lost", i)
		case len(seen) > 1 || !seen[1]:
			doubled = true
			t.Errorf("batch %d doubled", i)
		}
	}
	if s, err := js.Stream(ctx, "OMNIGRAPH_DEMO_DLQ"); err == nil {
		if info, err := s.Info(ctx); err == nil && info.State.Msgs != 0 {
			t.Errorf("%d dead letters", info.State.Msgs)
		}
	}
	return lost, doubled, half, checkEventOrder(t, js)
}

// startRun starts `worker run` on dir against url, failpoints fp armed, at compaction_fanout
// fanout.
func startRun(t *testing.T, dir, url, fp, fanout string) (*exec.Cmd, *proctest.Output) {
	cmd := exec.Command(workerBin, "run", "--root", dir, "--graph", "demo", "--nats-url", url, "--http", "", "--lease-ttl", "1s",
		"--ack-wait", "2s", "--pipeline-depth", "4", "--compaction-fanout", fanout)
	cmd.Env = os.Environ()
	if fp != "" {
		cmd.Env = append(cmd.Env, failpoint.EnvVar+"="+fp)
	}
	out := &proctest.Output{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, out
}

// checkEventOrder requires the stored commit events in increasing source sequence (an event
// lost with a killed worker leaves a gap, never an inversion).
func checkEventOrder(t *testing.T, js jetstream.JetStream) bool {
	ctx := context.Background()
	s, err := js.Stream(ctx, "OMNIGRAPH_DEMO_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	ok := true
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		var ev ingest.Event
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.SourceSequence <= last {
			t.Errorf("event of message %d after the event of %d", ev.SourceSequence, last)
			ok = false
		}
		last = ev.SourceSequence
	}
	return ok
}

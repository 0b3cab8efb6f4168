package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
)

// The adversarial suite: hostile bodies and headers, a batch at the limit under both
// max_payload settings, a message id reused after the duplicate window, the broker killed,
// a full disk and a read-only root. Each case is checked the same way: every published message
// is committed exactly once (one commit event, its rows once in `worker export`) or in a
// dead-letter subject (`worker dlq list`), never both and never neither, and a good batch
// published after the hostile ones commits.

// ledger collects the worker's commit events (outcome committed or already_applied) and empty
// events (a batch of no records, acknowledged without a commit) by source sequence.
type ledger struct {
	sub       *nats.Subscription
	committed map[uint64]int
	empty     map[uint64]int
}

// watchEvents subscribes to the demo graph's events; call it before anything is published.
func watchEvents(t *testing.T, url string) *ledger {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	sub, err := nc.SubscribeSync("omnigraph.demo.events")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &ledger{sub: sub, committed: map[uint64]int{}, empty: map[uint64]int{}}
}

// account requires each stream sequence 1..n to be committed once, dead-lettered once or
// acknowledged once as empty, and returns the dead letters.
func account(t *testing.T, url string, l *ledger, n uint64) []deadLetter {
	t.Helper()
	dls := listDeadLetters(t, url)
	dead := map[uint64]int{}
	for _, d := range dls {
		dead[d.OrigSeq]++
	}
	for seen := 0; seen < int(n)-len(dls); {
		m, err := l.sub.NextMsg(10 * time.Second)
		if err != nil {
			break // counted below
		}
		var ev struct {
			Seq     uint64 `json:"source_sequence"`
			Outcome string `json:"outcome"`
		}
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
		switch ev.Outcome {
		case "committed", "already_applied":
			l.committed[ev.Seq]++
		case "empty":
			l.empty[ev.Seq]++
		default:
			continue // a dead letter's event: the dead letters are counted from their stream
		}
		seen++
	}
	for seq := uint64(1); seq <= n; seq++ {
		if c, d, e := l.committed[seq], dead[seq], l.empty[seq]; c+d+e != 1 {
			t.Errorf("stream seq %d: %d commit events, %d dead letters and %d empty events, want exactly one of them", seq, c, d, e)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return dls
}

// waitStream waits for the worker to create the ingest stream.
func waitStream(t *testing.T, url string) {
	t.Helper()
	js := connectJS(t, url)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if s, err := js.Stream(context.Background(), "OMNIGRAPH_DEMO"); err == nil && len(s.CachedInfo().Config.Subjects) == 4 { // ingest, merge, maintenance, schema
			return
		}
	}
	t.Fatal("the worker did not create its stream")
}

func TestAdversarialHostileBodies(t *testing.T) {
	ns := startNATS(t)
	root := initGraph(t)
	l := watchEvents(t, ns.url)
	w := startWorker(t, root, ns.url, "")
	waitStream(t, ns.url)
	many := make([]string, 8193)
	for i := range many {
		many[i] = fmt.Sprintf(`{"type":"Company","data":{"domain":"m%d.io","name":"M","size":"smb"}}`, i)
	}
	ingest, merge, maint := "omnigraph.demo.ingest", "omnigraph.demo.merge", "omnigraph.demo.maintenance"
	hostile := []struct{ subject, body string }{
		{ingest, `{"type":"Person","data":{`},
		{ingest, "\x00\xff\xfe\x01 binary"},
		{ingest, "{\"type\":\"Person\",\"data\":{\"handle\":\"\xff\xfe\",\"name\":\"x\",\"active\":true}}"},
		{ingest, `[]`},
		{ingest, `null`},
		{ingest, `{"type":"Person","type":"Company","data":{}}`},
		{ingest, `{"type":"Person","data":{"handle":"n","name":"x","active":1e999}}`},
		{ingest, `{"type":"Person","data":{"handle":"d","name":"x","active":true,"x":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}}`},
		{ingest, `{"type":"Person","data":{"handle":"t","name":"x","active":"yes"}}`},
		{ingest, `{"type":"__proto__","data":{}}`},
		{ingest, `{"edge":"WorksAt","from":"nobody","to":"nowhere","data":{"id":"orphan"}}`},
		{ingest, strings.Join(many, "\n")},
		{ingest, strings.Repeat(" \n\t\r\n", 1000)},
		{ingest, ""},
		{merge, ""},
		{merge, `{"source":"nosuch"}`},
		{merge, `{"source":"main","target":"main"}`},
		{merge, `{"source":"x","delete_source":"yes"}`},
		{maint, `{"op":"explode"}`},
		{maint, `not json`},
	}
	publishBody(t, ns.url, graphtest.BatchBody(0), map[string]string{"Omnigraph-Mode": "append"})
	for _, h := range hostile {
		publishOn(t, ns.url, h.subject, h.body, nil)
	}
	publishBody(t, ns.url, graphtest.BatchBody(1), map[string]string{"Omnigraph-Mode": "append"})
	n := uint64(len(hostile) + 2)
	waitAcked(t, ns.url, n, w)
	dls := account(t, ns.url, l, n)
	if l.committed[1] != 1 || l.committed[n] != 1 {
		t.Fatalf("the good batches did not commit: %v", l.committed)
	}
	if l.empty[14] != 1 || l.empty[15] != 1 {
		t.Fatalf("the blank and the empty body were not acknowledged as empty: %v", l.empty)
	}
	t.Logf("%d hostile bodies: %d dead-lettered, %d empty, %d committed without rows", len(hostile), len(dls), len(l.empty), len(hostile)-len(dls)-len(l.empty))
	w.terminate(t)
	checkBatches(t, root, []int{0, 1})
}

func TestAdversarialHostileHeaders(t *testing.T) {
	ns := startNATS(t)
	root := initGraph(t)
	l := watchEvents(t, ns.url)
	w := startWorker(t, root, ns.url, "")
	waitStream(t, ns.url)
	long := func(n int) string { return strings.Repeat("b", n) }
	loads := []struct {
		hdr   map[string]string
		field string
	}{
		{map[string]string{"Omnigraph-Branch": "."}, "Omnigraph-Branch"},
		{map[string]string{"Omnigraph-Branch": "x/."}, "Omnigraph-Branch"},
		{map[string]string{"Omnigraph-Branch": "./x"}, "Omnigraph-Branch"},
		{map[string]string{"Omnigraph-Branch": "../x"}, "Omnigraph-Branch"},
		{map[string]string{"Omnigraph-Branch": long(300), "Omnigraph-From": "main"}, "Omnigraph-Branch"},
		{map[string]string{"Omnigraph-Branch": long(5000), "Omnigraph-From": "main"}, "Omnigraph-Branch"},
		{map[string]string{"Omnigraph-Branch": "a__0xb", "Omnigraph-From": "main"}, "Omnigraph-Branch"},
		{map[string]string{"Omnigraph-Branch": "sp ace", "Omnigraph-From": "main"}, "Omnigraph-Branch"},
		{map[string]string{"Omnigraph-Branch": "stage", "Omnigraph-From": "../x"}, "Omnigraph-From"},
		{map[string]string{"Omnigraph-Branch": "stage", "Omnigraph-From": "x/."}, "Omnigraph-From"},
		{map[string]string{"Omnigraph-Mode": "bogus"}, "mode"},
	}
	merges := []struct{ body, field string }{
		{`{"source":"../x"}`, "source"},
		{`{"source":"stage","target":"x/."}`, "target"},
		{`{"source":"` + long(300) + `"}`, "source"},
	}
	for i, c := range loads {
		publishBody(t, ns.url, graphtest.BatchBody(10+i), c.hdr)
	}
	for _, c := range merges {
		publishOn(t, ns.url, "omnigraph.demo.merge", c.body, nil)
	}
	publishBody(t, ns.url, graphtest.BatchBody(0), nil)
	n := uint64(len(loads) + len(merges) + 1)
	waitAcked(t, ns.url, n, w)
	dls := account(t, ns.url, l, n)
	if len(dls) != len(loads)+len(merges) {
		t.Fatalf("%d dead letters, want %d", len(dls), len(loads)+len(merges))
	}
	fields := []string{}
	for _, c := range loads {
		fields = append(fields, c.field)
	}
	for _, c := range merges {
		fields = append(fields, c.field)
	}
	for i, d := range dls {
		if d.Reason != "invalid" || !strings.Contains(d.Detail, fmt.Sprintf(`"field":%q`, fields[i])) || len(d.Error) > 400 {
			t.Fatalf("dead letter %d: %+v, want invalid naming %s", i, d, fields[i])
		}
	}
	// The producer's and operator's tools refuse the same names before anything is queued
	// or written.
	for _, args := range [][]string{
		{"publish", "--graph", "demo", "--nats-url", ns.url, "--branch", "x/.", "-"},
		{"publish", "--graph", "demo", "--nats-url", ns.url, "--branch", "stage", "--from", "../x", "-"},
		{"dlq", "replay", "--graph", "demo", "--nats-url", ns.url, "--branch", long(300)},
	} {
		cmd := exec.Command(bin.worker, args...)
		cmd.Stdin = strings.NewReader(graphtest.BatchBody(99))
		if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "segment") && !strings.Contains(string(out), "longer than") {
			t.Fatalf("worker %s: %v\n%s", strings.Join(args[:2], " "), err, out)
		}
	}
	if dls := listDeadLetters(t, ns.url); len(dls) != len(loads)+len(merges) {
		t.Fatalf("a refused replay changed the dead letters: %d", len(dls))
	}
	w.terminate(t)
	checkBatches(t, root, []int{0})
	if out, err := exec.Command(bin.worker, "branch", "list", "--root", root).CombinedOutput(); err != nil || strings.Contains(string(out), "stage") {
		t.Fatalf("branch list: %v\n%s", err, out)
	}
	for _, name := range []string{"x/.", long(300)} {
		out, err := exec.Command(bin.worker, "branch", "create", "--root", root, name).CombinedOutput()
		var ee *exec.ExitError // exit 3: invalid input
		if !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(string(out), "segment") && !strings.Contains(string(out), "longer than") {
			t.Fatalf("branch create %.20q: %v\n%s", name, err, out)
		}
	}
}

// The 33,554,200-byte batch of the issue: JetStream takes it under a max_payload of exactly
// 32 MiB and under the README's 32 MiB + 64 KiB, but its dead letter does not fit whole
// beside the error headers under either; it goes by reference and the stream goes on.
func TestAdversarialNearLimitBody(t *testing.T) {
	for _, payload := range []int{32 << 20, 33619968} {
		t.Run(fmt.Sprint(payload), func(t *testing.T) {
			ns := prepareNATSPayload(t, payload)
			ns.start()
			root := initGraph(t)
			l := watchEvents(t, ns.url)
			w := startWorker(t, root, ns.url, "")
			waitStream(t, ns.url)
			const size = 33_554_200
			body := strings.Repeat(strings.Repeat("x", 99)+"\n", size/100) + strings.Repeat("y", size%100)
			publishBody(t, ns.url, body, nil)
			publishBody(t, ns.url, graphtest.BatchBody(0), nil)
			waitAcked(t, ns.url, 2, w)
			dls := account(t, ns.url, l, 2)
			if len(dls) != 1 || dls[0].OrigSeq != 1 || dls[0].Reason != "invalid" || first(dls[0].Headers["Omnigraph-Body-Omitted"]) != fmt.Sprint(size) {
				t.Fatalf("dead letters %+v", dls)
			}
			if strings.Contains(w.out.String(), "redeliver") {
				t.Fatalf("worker output:\n%s", w.out)
			}
			w.terminate(t)
			checkBatches(t, root, []int{0})
		})
	}
}

// A producer reuses a message id for another body after JetStream's duplicate window (here
// shortened to a second): the second body is dead-lettered as msg_id_reused, naming both
// hashes and the commit of the first; it is not acknowledged as already applied.
func TestAdversarialMsgIDReuse(t *testing.T) {
	ns := startNATS(t)
	root := initGraph(t)
	l := watchEvents(t, ns.url)
	w := startWorker(t, root, ns.url, "")
	waitStream(t, ns.url)
	js := connectJS(t, ns.url)
	ctx := context.Background()
	s, err := js.Stream(ctx, "OMNIGRAPH_DEMO")
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.Duplicates = time.Second
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	publishBody(t, ns.url, graphtest.BatchBody(0), map[string]string{"Nats-Msg-Id": "reused"})
	waitAcked(t, ns.url, 1, w)
	time.Sleep(1500 * time.Millisecond)
	publishBody(t, ns.url, graphtest.BatchBody(1), map[string]string{"Nats-Msg-Id": "reused"})
	publishBody(t, ns.url, graphtest.BatchBody(2), map[string]string{"Nats-Msg-Id": "fresh"})
	waitAcked(t, ns.url, 3, w)
	dls := account(t, ns.url, l, 3)
	if len(dls) != 1 || dls[0].Reason != "msg_id_reused" || dls[0].OrigSeq != 2 || !strings.Contains(dls[0].Detail, `"applied_payload_sha256"`) ||
		!strings.Contains(dls[0].Detail, `"graph_commit_id"`) {
		t.Fatalf("dead letters %+v", dls)
	}
	w.terminate(t)
	checkBatches(t, root, []int{0, 2})
}

// The broker is SIGKILLed while batches flow (a hostile one among them) and comes back; the
// producer re-publishes everything with the same ids. Each batch lands exactly once and the
// hostile one is dead-lettered once.
func TestAdversarialBrokerKill(t *testing.T) {
	ns := startNATS(t)
	root := initGraph(t)
	publish(t, ns.url, 10)
	publishBody(t, ns.url, `{"type":"Nope","data":{}}`, map[string]string{"Nats-Msg-Id": "hostile"})
	w := startWorker(t, root, ns.url, "", "--ack-wait", "2s")
	waitAcked(t, ns.url, 2, w)
	_ = ns.cmd.Process.Signal(syscall.SIGKILL)
	_ = ns.cmd.Wait()
	ns.cmd = nil
	time.Sleep(500 * time.Millisecond)
	ns.start()
	publish(t, ns.url, 15) // 0..9 again (duplicates by id) and 10..14
	publishBody(t, ns.url, `{"type":"Nope","data":{}}`, map[string]string{"Nats-Msg-Id": "hostile"})
	waitIdle(t, ns.url, w)
	w.terminate(t)
	checkExactlyOnce(t, root, 15)
	dls := listDeadLetters(t, ns.url)
	if len(dls) != 1 || dls[0].Reason != "invalid" {
		t.Fatalf("dead letters %+v", dls)
	}
}

// waitIdle waits until the worker's consumer has nothing pending or unacknowledged.
func waitIdle(t *testing.T, url string, w *workerProc) {
	t.Helper()
	js := connectJS(t, url)
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if c, err := js.Consumer(context.Background(), "OMNIGRAPH_DEMO", "omnigraph-worker"); err == nil {
			if info, err := c.Info(context.Background()); err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.Delivered.Stream > 0 {
				return
			}
		}
	}
	t.Fatalf("the worker did not finish the stream:\n%s", w.out)
}

// smallDisk mounts a tmpfs of size on a fresh directory, or reports that this machine refuses
// it (then the caller injects the same errno with a failpoint).
func smallDisk(t *testing.T, size string) (string, bool) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Logf("mount -t tmpfs refused here (%v: %s): the failure is injected with a failpoint instead", err, strings.TrimSpace(string(out)))
		return dir, false
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir, true
}

// initGraphAt initialises the example graph at root with the worker binary.
func initGraphAt(t *testing.T, root string) {
	out, err := exec.Command(bin.worker, "init", "--root", root, "--schema", graphtest.SchemaPath(graphtest.Example)).CombinedOutput()
	if err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
}

// waitReady polls /readyz until it answers code with a body containing every want.
func waitReady(t *testing.T, addr string, code int, want ...string) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		ok := resp.StatusCode == code
		for _, w := range want {
			ok = ok && strings.Contains(string(body), w)
		}
		if ok {
			return
		}
	}
	t.Fatalf("/readyz never answered %d with %q; last: %s", code, want, last)
}

// fill writes to dir until the file system is full.
func fill(t *testing.T, dir string) string {
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, chunk := range []int{1 << 20, 4096, 1} {
		buf := make([]byte, chunk)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatal(err)
				}
				break
			}
		}
	}
	return f.Name()
}

// stallThenRecover runs a worker whose root fails every write with errno (breakRoot) while a
// batch is applied, then mends it: the batch is not dead-lettered, the stall shows on /readyz
// and the metrics past the retry budget, and once mended every batch commits exactly once.
// With early, the root is broken before the worker starts (a root mounted read-only: a
// mount with files open for writing cannot be made read-only); otherwise after a first
// batch committed.
func stallThenRecover(t *testing.T, root string, real, early bool, errno, text string, breakRoot, mendRoot func()) {
	ns := startNATS(t)
	l := watchEvents(t, ns.url)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	fp, stalledSeq := "", "stream seq 2"
	if early {
		stalledSeq = "stream seq 1"
	}
	switch {
	case !real && early:
		fp = "storage.put=8*error(" + errno + ")"
	case !real:
		fp = "storage.put=1+8*error(" + errno + ")" // batch 0's first put passes; then 8 refusals
	case early:
		breakRoot()
	}
	w := startWorker(t, root, ns.url, fp, "--http", addr, "--retry-budget", "1s")
	waitStream(t, ns.url)
	publishBody(t, ns.url, graphtest.BatchBody(0), nil)
	if !early {
		waitAcked(t, ns.url, 1, w)
		if real {
			breakRoot()
		}
	}
	publishBody(t, ns.url, graphtest.BatchBody(1), nil)
	waitReady(t, addr, http.StatusServiceUnavailable, "stalled", stalledSeq, text)
	metrics := httpGet(t, "http://"+addr+"/metrics", 200)
	if !strings.Contains(metrics, "omnigraph_stalled{graph=\"demo\"} 1\n") || !strings.Contains(metrics, `omnigraph_retry_budget_exhausted_total{action="stalled",graph="demo"} 1`) {
		t.Fatalf("metrics while stalled:\n%s", metrics)
	}
	if real {
		mendRoot()
	}
	waitAcked(t, ns.url, 2, w)
	waitReady(t, addr, http.StatusOK)
	account(t, ns.url, l, 2)
	if !strings.Contains(w.out.String(), "stalled: retry budget spent on a transient error") {
		t.Fatalf("no stall in the log:\n%s", w.out)
	}
	w.terminate(t)
	checkExactlyOnce(t, root, 2)
	if dls := listDeadLetters(t, ns.url); len(dls) != 0 {
		t.Fatalf("dead letters %+v", dls)
	}
}

// A full disk (an 8 MiB tmpfs filled up) while a batch is applied.
func TestAdversarialDiskFull(t *testing.T) {
	dir, real := smallDisk(t, "8m")
	root := filepath.Join(dir, "graph")
	initGraphAt(t, root)
	var filler string
	stallThenRecover(t, root, real, false, "ENOSPC", "no space left on device",
		func() { filler = fill(t, dir) },
		func() {
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
		})
}

// A root mounted read-only: the worker starts on it and stalls on its first batch until the
// root is writable again.
func TestAdversarialReadOnlyRoot(t *testing.T) {
	dir, real := smallDisk(t, "64m")
	root := filepath.Join(dir, "graph")
	initGraphAt(t, root)
	remount := func(mode string) {
		if out, err := exec.Command("mount", "-o", "remount,"+mode, dir).CombinedOutput(); err != nil {
			t.Fatalf("remount %s: %v %s", mode, err, out)
		}
	}
	stallThenRecover(t, root, real, true, "EROFS", "read-only file system", func() { remount("ro") }, func() { remount("rw") })
}

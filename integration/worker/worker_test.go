// Package worker tests the worker binary end to end against a real nats-server process (built
// from the module) : real child processes are killed at every step of the message protocol and
// restarted, and the graph must hold every acknowledged batch exactly once.
package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
	"github.com/omnigraph/omnigraph-worker/internal/proctest"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
)

var bin struct{ worker, nats, s3 string }

func TestMain(m *testing.M) {
	proctest.Main(m, map[*string]string{&bin.worker: proctest.Worker, &bin.nats: proctest.NATSServer, &bin.s3: proctest.GoFakeS3})
}

func freePort(t *testing.T) int { return proctest.FreePort(t) }

// natsServer runs a real nats-server process with JetStream and a max_payload for 32 MiB batches.
type natsServer struct {
	t          *testing.T
	cmd        *exec.Cmd
	conf       string
	url        string
	port       int
	maxPayload int
	store      string // JetStream's store_dir
}

func startNATS(t *testing.T) *natsServer {
	s := prepareNATS(t)
	s.start()
	return s
}

// prepareNATS configures a nats-server on a free port without starting it.
func prepareNATS(t *testing.T) *natsServer { return prepareNATSPayload(t, 33619968) }

// prepareNATSPayload is prepareNATS with the server's max_payload set to maxPayload.
func prepareNATSPayload(t *testing.T, maxPayload int) *natsServer {
	dir := t.TempDir()
	port := freePort(t)
	s := &natsServer{t: t, conf: filepath.Join(dir, "nats.conf"), url: fmt.Sprintf("nats://127.0.0.1:%d", port), port: port,
		maxPayload: maxPayload, store: filepath.Join(dir, "js")}
	s.configure("")
	t.Cleanup(s.stop)
	return s
}

// configure writes the server's configuration, with jetstream lines (e.g. "max_file_store:
// 64MB") added to its jetstream block; it takes effect at the next start.
func (s *natsServer) configure(jetstream string) {
	body := fmt.Sprintf("listen: 127.0.0.1:%d\nmax_payload: %d\njetstream {\n  store_dir: %q\n  %s\n}\n", s.port, s.maxPayload, s.store, jetstream)
	if err := os.WriteFile(s.conf, []byte(body), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// kill SIGKILLs the server: nothing is flushed, as in a crash.
func (s *natsServer) kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

func (s *natsServer) start() {
	s.cmd = exec.Command(bin.nats, "-c", s.conf)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if nc, err := nats.Connect(s.url); err == nil {
			nc.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatal("nats-server did not start")
}

func (s *natsServer) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

type workerProc struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error
}

// syncBuffer collects a child's output while the test reads it.
type syncBuffer = proctest.Output

// startWorker runs `worker run` on root against url, with failpoints fp armed and extra flags.
func startWorker(t *testing.T, root, url, fp string, extra ...string) *workerProc {
	args := append([]string{"run", "--root", root, "--graph", "demo", "--nats-url", url, "--http", "", "--lease-ttl", "1s", "--ack-wait", "5s"}, extra...)
	cmd := exec.Command(bin.worker, args...)
	cmd.Env = os.Environ()
	if fp != "" {
		cmd.Env = append(cmd.Env, failpoint.EnvVar+"="+fp)
	}
	w := &workerProc{cmd: cmd, out: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = w.out, w.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-w.done
		w.done <- nil
	})
	return w
}

// waitConsuming waits until the worker has made its streams and consumes: a CLI request that
// waits for its outcome needs the events stream to be there.
func (w *workerProc) waitConsuming(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if strings.Contains(w.out.String(), `"msg":"consuming"`) {
			return
		}
	}
	t.Fatalf("the worker did not start consuming:\n%s", w.out)
}

func (w *workerProc) waitDeath(t *testing.T) {
	select {
	case <-w.done:
		w.done <- nil
	case <-time.After(30 * time.Second):
		t.Fatalf("worker was not killed by its failpoint:\n%s", w.out)
	}
}

func (w *workerProc) terminate(t *testing.T) {
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-w.done:
		w.done <- nil
		if err != nil {
			t.Fatalf("worker did not exit cleanly on SIGTERM: %v\n%s", err, w.out)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("worker did not drain within 20s:\n%s", w.out)
	}
}

func initGraph(t *testing.T) string {
	root := filepath.Join(t.TempDir(), "graph")
	initGraphAt(t, root)
	return root
}

// connectJS connects to the server at url for the rest of the test.
func connectJS(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func publish(t *testing.T, url string, n int) {
	js := connectJS(t, url)
	ctx := context.Background()
	// The worker may create the stream between this lookup and this create: then the second
	// create-or-update finds it.
	cfg := jetstream.StreamConfig{Name: "OMNIGRAPH_DEMO", Subjects: []string{"omnigraph.demo.ingest", "omnigraph.demo.merge"}, MaxMsgSize: 33619968}
	_, err := js.CreateOrUpdateStream(ctx, cfg)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		_, err = js.CreateOrUpdateStream(ctx, cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		m := nats.NewMsg("omnigraph.demo.ingest")
		m.Data = []byte(graphtest.BatchBody(i))
		m.Header.Set("Omnigraph-Mode", "append")
		m.Header.Set("Nats-Msg-Id", fmt.Sprintf("batch-%d", i))
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
}

// waitAcked waits until the worker's durable consumer acknowledged n messages.
func waitAcked(t *testing.T, url string, n uint64, ws ...*workerProc) {
	js := connectJS(t, url)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := js.Consumer(context.Background(), "OMNIGRAPH_DEMO", "omnigraph-worker"); err == nil {
			if info, err := c.Info(context.Background()); err == nil && info.AckFloor.Stream >= n {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i, w := range ws {
		t.Logf("worker %d output:\n%s", i, w.out)
	}
	t.Fatalf("the worker did not acknowledge %d messages", n)
}

// exportLines is `worker export --root root [args]`, sorted.
func exportLines(t *testing.T, root string, args ...string) []string {
	out, err := exec.Command(bin.worker, append([]string{"export", "--root", root}, args...)...).Output()
	if err != nil {
		t.Fatalf("export: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	sort.Strings(lines)
	return lines
}

// checkExactlyOnce requires every batch's three rows exactly once and nothing else.
func checkExactlyOnce(t *testing.T, root string, n int) {
	batches := make([]int, n)
	for i := range batches {
		batches[i] = i
	}
	checkBatches(t, root, batches)
}

// checkBatches requires the three rows of each of batches (as publish numbers them) exactly
// once and nothing else on main.
func checkBatches(t *testing.T, root string, batches []int) {
	lines := exportLines(t, root)
	if len(batches) == 0 && len(lines) == 1 && lines[0] == "" {
		return
	}
	if len(lines) != 3*len(batches) {
		t.Fatalf("graph holds %d rows, want %d (3 per batch, each once):\n%s", len(lines), 3*len(batches), strings.Join(lines, "\n"))
	}
	for _, i := range batches {
		for _, want := range []string{fmt.Sprintf(`"handle":"p%d"`, i), fmt.Sprintf(`"domain":"c%d.io"`, i), fmt.Sprintf(`"id":"w%d"`, i)} {
			c := 0
			for _, l := range lines {
				if strings.Contains(l, want+",") || strings.Contains(l, want+"}") {
					c++
				}
			}
			if c != 1 {
				t.Fatalf("%s appears %d times", want, c)
			}
		}
	}
}

// TestKillAtEveryStepThenRestart: the worker dies (SIGKILL) at each protocol step while
// applying the first of several batches; a restarted worker finishes the stream and the graph
// holds every batch exactly once.
func TestKillAtEveryStepThenRestart(t *testing.T) {
	steps := []string{"load.after_sidecar=kill", "load.after_table_commit=kill", "load.after_confirm=kill",
		"load.before_publish=kill", "load.after_publish=kill", "ingest.before_ack=kill", "ingest.ack_queued=kill", "load.after_publish=1+1*kill"}
	for _, fp := range steps {
		t.Run(fp, func(t *testing.T) {
			ns := startNATS(t)
			root := initGraph(t)
			const n = 4
			publish(t, ns.url, n)
			startWorker(t, root, ns.url, fp, "--ack-wait", "1s").waitDeath(t)
			w := startWorker(t, root, ns.url, "", "--ack-wait", "1s")
			waitAcked(t, ns.url, n)
			w.terminate(t)
			checkExactlyOnce(t, root, n)
		})
	}
}

// TestServerRestartMidStream: the NATS server goes away while batches flow and comes back;
// the worker reconnects and every batch lands exactly once.
func TestServerRestartMidStream(t *testing.T) {
	ns := startNATS(t)
	root := initGraph(t)
	publish(t, ns.url, 3)
	w := startWorker(t, root, ns.url, "")
	waitAcked(t, ns.url, 3)
	ns.stop()
	time.Sleep(500 * time.Millisecond)
	ns.start()
	publish(t, ns.url, 6) // re-publishes 0..2 too: JetStream dedupes them by Nats-Msg-Id
	waitAcked(t, ns.url, 6)
	w.terminate(t)
	checkExactlyOnce(t, root, 6)
}

// TestStandbyTakesOverFromKilledLeader: two worker processes on one graph; the one holding the
// lease is SIGKILLed mid-stream; the standby takes over and nothing is lost or doubled.
func TestStandbyTakesOverFromKilledLeader(t *testing.T) {
	ns := startNATS(t)
	root := initGraph(t)
	a := startWorker(t, root, ns.url, "")
	time.Sleep(300 * time.Millisecond)
	b := startWorker(t, root, ns.url, "")
	publish(t, ns.url, 3)
	waitAcked(t, ns.url, 3, a, b)
	leader, standby := a, b
	if !strings.Contains(a.out.String(), `"msg":"ready"`) {
		leader, standby = b, a
	}
	if strings.Contains(standby.out.String(), `"msg":"ready"`) {
		t.Fatal("both workers claim the lease")
	}
	_ = leader.cmd.Process.Kill()
	leader.waitDeath(t)
	publish(t, ns.url, 8)
	waitAcked(t, ns.url, 8)
	if !strings.Contains(standby.out.String(), `"msg":"ready"`) {
		t.Fatalf("the standby never took over:\n%s", standby.out)
	}
	standby.terminate(t)
	checkExactlyOnce(t, root, 8)
}

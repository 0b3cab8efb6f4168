// Package fleet tests `worker run --graphs` as a fleet: three worker processes over six graphs
// against a real nats-server process, batches published to every graph throughout; one worker
// is SIGKILLed and its graphs move to the two others, it starts again and the graphs are
// spread back, and every acknowledged batch is in its graph exactly once.
package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/omnigraph/omnigraph-worker/fleet"
	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
	"github.com/omnigraph/omnigraph-worker/internal/proctest"
)

var bin struct{ worker, nats string }

func TestMain(m *testing.M) {
	proctest.Main(m, map[*string]string{&bin.worker: proctest.Worker, &bin.nats: proctest.NATSServer})
}

const (
	leaseTTL = 2 * time.Second
	// moveBound is how long a killed worker's graphs may take to be served again: its
	// heartbeat and its leases expire leaseTTL after their last renewal, the others read the
	// members a quarter TTL later and poll the leases as often; the rest is room for each
	// graph's recovery and stream set-up on a loaded machine.
	moveBound = 5 * leaseTTL
	// settle bounds the waits for what has no protocol deadline: the first spread, a
	// rebalance, the last batches applied.
	settle = 60 * time.Second
)

var graphs = []string{"g1", "g2", "g3", "g4", "g5", "g6"}

// startNATS runs one nats-server with JetStream and a max_payload for full batches.
func startNATS(t *testing.T) string {
	dir := t.TempDir()
	port := proctest.FreePort(t)
	conf := filepath.Join(dir, "nats.conf")
	body := fmt.Sprintf("listen: 127.0.0.1:%d\nmax_payload: 33619968\njetstream { store_dir: %q }\n", port, filepath.Join(dir, "js"))
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin.nats, "-c", conf)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if nc, err := nats.Connect(url, nats.NoReconnect()); err == nil {
			nc.Close()
			return url
		}
	}
	t.Fatal("nats-server did not start")
	return ""
}

// workerProc is one `worker run --graphs` process.
type workerProc struct {
	name string
	http string
	cmd  *exec.Cmd
	out  *proctest.Output
	done chan error
}

func startWorker(t *testing.T, name, root, url string) *workerProc {
	w := &workerProc{name: name, http: fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t)), out: &proctest.Output{}, done: make(chan error, 1)}
	w.cmd = exec.Command(bin.worker, "run", "--root", root, "--graphs", strings.Join(graphs, ","), "--fleet", "test",
		"--schema", graphtest.SchemaPath(graphtest.Example), "--nats-url", url, "--http", w.http,
		"--lease-ttl", leaseTTL.String(), "--ack-wait", "5s")
	w.cmd.Stdout, w.cmd.Stderr = w.out, w.out
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.done <- w.cmd.Wait() }()
	t.Cleanup(func() {
		_ = w.cmd.Process.Kill()
		err := <-w.done
		w.done <- err
	})
	return w
}

func (w *workerProc) exited() bool {
	select {
	case err := <-w.done:
		w.done <- err
		return true
	default:
		return false
	}
}

func (w *workerProc) kill() {
	_ = w.cmd.Process.Signal(syscall.SIGKILL)
	err := <-w.done
	w.done <- err
}

func (w *workerProc) terminate(t *testing.T) {
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-w.done:
		w.done <- err
		if err != nil {
			t.Fatalf("%s did not exit cleanly on SIGTERM: %v\n%s", w.name, err, w.out)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not drain within 30s:\n%s", w.name, w.out)
	}
}

// describe is what a failed wait reports of a worker: every field of its status, since a
// graph that is assigned but not served is explained by the others (standby for a lease,
// failed and waiting to be tried again, held for an operator, a member missing from this
// one's view).
func describe(s *fleet.Status) string {
	return fmt.Sprintf("serves %v (members %v, assigned %v, standby %v, failed %v, held %v)",
		s.Serving, s.Members, s.Assigned, s.Standby, s.Failed, s.Held)
}

// status is the worker's /readyz (nil when it does not answer).
func (w *workerProc) status() *fleet.Status {
	c := http.Client{Timeout: time.Second}
	r, err := c.Get("http://" + w.http + "/readyz")
	if err != nil {
		return nil
	}
	defer r.Body.Close()
	var s fleet.Status
	if json.NewDecoder(r.Body).Decode(&s) != nil {
		return nil
	}
	return &s
}

// waitSpread waits until the workers serve every graph once between them, each as many as
// want says, and returns who serves what.
func waitSpread(t *testing.T, ws []*workerProc, want []int, within time.Duration, all []*workerProc) map[string]*workerProc {
	t.Helper()
	var last []string
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		owner := map[string]*workerProc{}
		ok := true
		last = last[:0]
		for i, w := range ws {
			s := w.status()
			if s == nil {
				ok = false
				last = append(last, w.name+": no answer")
				continue
			}
			last = append(last, w.name+" "+describe(s))
			ok = ok && len(s.Serving) == want[i]
			for _, g := range s.Serving {
				ok = ok && owner[g] == nil
				owner[g] = w
			}
		}
		if ok && len(owner) == len(graphs) {
			return owner
		}
	}
	dump(t, all)
	t.Fatalf("graphs not spread %v within %v: %s", want, within, strings.Join(last, "; "))
	return nil
}

// dump logs each worker's warnings and errors, then its whole output: a failure's log is
// often cut short, and the lines that explain it are rarely the first.
func dump(t *testing.T, ws []*workerProc) {
	for _, w := range ws {
		var notable []string
		for _, l := range strings.Split(w.out.String(), "\n") {
			if strings.Contains(l, `"level":"warn"`) || strings.Contains(l, `"level":"error"`) {
				notable = append(notable, l)
			}
		}
		t.Logf("%s warnings and errors (%d):\n%s", w.name, len(notable), strings.Join(notable, "\n"))
	}
	for _, w := range ws {
		t.Logf("%s output:\n%s", w.name, w.out)
	}
}

// publisher publishes batch 0, 1, 2, ... to the graphs in turn (batch i to graphs[i%6]),
// each retried with its Nats-Msg-Id until JetStream acknowledges it.
type publisher struct {
	mu    sync.Mutex
	acked map[string][]int
	err   error
	quit  chan struct{}
	done  chan struct{}
}

func startPublisher(t *testing.T, js jetstream.JetStream) *publisher {
	p := &publisher{acked: map[string][]int{}, quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for i := 0; ; i++ {
			select {
			case <-p.quit:
				return
			case <-time.After(40 * time.Millisecond):
			}
			g := graphs[i%len(graphs)]
			if err := graphtest.PublishAcked(js, g, i, 30*time.Second); err != nil {
				p.mu.Lock()
				p.err = err
				p.mu.Unlock()
				return
			}
			p.mu.Lock()
			p.acked[g] = append(p.acked[g], i)
			p.mu.Unlock()
		}
	}()
	t.Cleanup(p.halt)
	return p
}

func (p *publisher) halt() {
	select {
	case <-p.quit:
	default:
		close(p.quit)
	}
	<-p.done
}

// counts is how many batches of each graph JetStream acknowledged.
func (p *publisher) counts(t *testing.T) map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		t.Fatal(p.err)
	}
	out := map[string]int{}
	for g, b := range p.acked {
		out[g] = len(b)
	}
	return out
}

// applied is the stream sequence up to which each graph's consumer acknowledged: the
// graph's batches applied (its k-th batch is sequence k).
func applied(js jetstream.JetStream) map[string]uint64 {
	out := map[string]uint64{}
	for _, g := range graphs {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if cons, err := js.Consumer(ctx, "OMNIGRAPH_"+strings.ToUpper(g), "omnigraph-worker"); err == nil {
			if info, err := cons.Info(ctx); err == nil {
				out[g] = info.AckFloor.Stream
			}
		}
		cancel()
	}
	return out
}

// progress waits until every graph has k more batches acknowledged by JetStream and applied
// than now.
func progress(t *testing.T, p *publisher, js jetstream.JetStream, k int, when string, ws []*workerProc) {
	t.Helper()
	now := p.counts(t)
	var got map[string]uint64
	for deadline := time.Now().Add(settle); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		got = applied(js)
		ok := true
		for _, g := range graphs {
			ok = ok && got[g] >= uint64(now[g]+k)
		}
		if ok {
			return
		}
	}
	dump(t, ws)
	t.Fatalf("%s: not %d more batches applied to every graph within %v: from %v to %v", when, k, settle, now, got)
}

// checkExactlyOnce requires the three rows of each of the batches exactly once in the graph
// at root, and nothing else.
func checkExactlyOnce(t *testing.T, root string, batches []int) {
	out, err := exec.Command(bin.worker, "export", "--root", root).CombinedOutput()
	if err != nil {
		t.Fatalf("export %s: %v\n%s", root, err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	sort.Strings(lines)
	if len(lines) != 3*len(batches) {
		t.Fatalf("%s holds %d rows, want %d (3 per batch, each once)", root, len(lines), 3*len(batches))
	}
	count := map[string]int{}
	for _, l := range lines {
		for _, key := range []string{`"handle":"`, `"domain":"`, `"id":"w`} {
			if i := strings.Index(l, key); i >= 0 {
				v := l[i+len(key):]
				count[key+v[:strings.IndexByte(v, '"')]]++
			}
		}
	}
	for _, i := range batches {
		for _, want := range []string{fmt.Sprintf(`"handle":"p%d`, i), fmt.Sprintf(`"domain":"c%d.io`, i), fmt.Sprintf(`"id":"w%d`, i)} {
			if count[want] != 1 {
				t.Fatalf("%s: %s appears %d times", root, want, count[want])
			}
		}
	}
}

// TestFleetKillAndRejoin: three workers, six graphs, batches flowing to all. Each worker
// serves two; batches flow to every graph (five more applied to each between the steps); one is SIGKILLed and its two graphs are served by the others within moveBound,
// three each; it starts again and each serves two again; every acknowledged batch is in its
// graph's export exactly once, which two workers writing one graph at once could break.
func TestFleetKillAndRejoin(t *testing.T) {
	began := time.Now()
	url := startNATS(t)
	root := t.TempDir()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ws := []*workerProc{startWorker(t, "w1", root, url), startWorker(t, "w2", root, url), startWorker(t, "w3", root, url)}
	all := append([]*workerProc{}, ws...)
	before := waitSpread(t, ws, []int{2, 2, 2}, settle, all)
	t.Logf("spread %v after the start", time.Since(began).Round(time.Millisecond))

	p := startPublisher(t, js)
	progress(t, p, js, 5, "before the kill", all)

	victim := ws[2]
	var moved []string
	for g, w := range before {
		if w == victim {
			moved = append(moved, g)
		}
	}
	slices.Sort(moved)
	killed := time.Now()
	victim.kill()
	after := waitSpread(t, ws[:2], []int{3, 3}, settle, all)
	took := time.Since(killed)
	t.Logf("%s SIGKILLed: its graphs %v served by %s and %s after %v (lease TTL %v)", victim.name, moved,
		after[moved[0]].name, after[moved[1]].name, took.Round(time.Millisecond), leaseTTL)
	if took > moveBound {
		dump(t, all)
		t.Fatalf("the killed worker's graphs took %v to move, over %v", took, moveBound)
	}
	progress(t, p, js, 5, "after the kill", all)

	ws[2] = startWorker(t, "w3-again", root, url)
	all = append(all, ws[2])
	rejoined := time.Now()
	again := waitSpread(t, ws, []int{2, 2, 2}, settle, all)
	t.Logf("%s started again: spread back to two each after %v", ws[2].name, time.Since(rejoined).Round(time.Millisecond))
	for g, w := range before {
		if w != victim && again[g] != w {
			t.Logf("%s moved from %s to %s", g, w.name, again[g].name)
		}
	}
	progress(t, p, js, 5, "after the rejoin", all)

	p.halt()
	want := p.counts(t)
	for deadline := time.Now().Add(settle); ; time.Sleep(100 * time.Millisecond) {
		got, ok := applied(js), true
		for _, g := range graphs {
			ok = ok && got[g] >= uint64(want[g])
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			dump(t, all)
			t.Fatalf("not every batch applied within %v: %v of %v", settle, got, want)
		}
	}
	for _, w := range ws {
		if w.exited() {
			dump(t, all)
			t.Fatalf("%s exited during the run", w.name)
		}
		w.terminate(t)
	}
	total := 0
	for _, g := range graphs {
		checkExactlyOnce(t, filepath.Join(root, g), p.acked[g])
		total += len(p.acked[g])
	}
	for _, w := range all {
		out := w.out.String()
		t.Logf("%s: %d lines logged at warn, %d at error", w.name, strings.Count(out, `"level":"warn"`), strings.Count(out, `"level":"error"`))
	}
	t.Logf("%d batches over %d graphs, each once; %v in all", total, len(graphs), time.Since(began).Round(time.Millisecond))
}

package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
)

const (
	consumerName = "omnigraph-worker"
	// perKill is how many batches must be published and applied while a killed server is
	// down: with R1 streams the stream or the lease bucket on that server is gone until it
	// returns, and none would be.
	perKill = 5
	// outage bounds each wait while a server is down.
	outage = 30 * time.Second
	// maxBacklog is how many batches the publisher lets JetStream hold that the worker has
	// not applied. Unpaced, it publishes one every 30 ms, faster than a worker on a loaded
	// machine applies them (about 4 a second on 2 cores at load 16, against 20 published), and
	// each wait would then be for the worker to drain a backlog grown since the start, not for
	// it to go on applying while a server is down.
	maxBacklog = 20
)

var streams = []string{"OMNIGRAPH_DEMO", "OMNIGRAPH_DEMO_DLQ", "OMNIGRAPH_DEMO_EVENTS", "KV_omnigraph_leases"}

// TestFailoverWithThreeReplicas: two workers (one writer, one standby) on a three-server
// cluster with stream_replicas 3, batches published throughout. The ingest stream's leader,
// then the server the writer is connected to, then the lease bucket's leader are SIGKILLed;
// while each is down batches go on being published and applied, then it restarts and catches
// up. At the end every acknowledged batch is in the graph exactly once, which two workers
// sharing the graph could only break by writing at the same time.
func TestFailoverWithThreeReplicas(t *testing.T) {
	began := time.Now()
	c := startCluster(t)
	root := filepath.Join(t.TempDir(), "graph")
	run(t, "init", "--root", root, "--schema", graphtest.SchemaPath(graphtest.Example))
	flags := []string{"--stream-replicas", "3", "--lease-ttl", "2s"}
	a := startWorker(t, root, c.urls, flags...)
	workers := []*workerProc{a}
	waitLog(t, a, `"msg":"ready"`)
	workers = append(workers, startWorker(t, root, c.urls, flags...))
	for _, name := range streams {
		var r int
		c.eventually(t, 10*time.Second, "stream "+name, func(ctx context.Context) error {
			s, err := c.js.Stream(ctx, name)
			if err == nil {
				r = s.CachedInfo().Config.Replicas
			}
			return err
		})
		if r != 3 {
			t.Fatalf("%s has %d replicas, want 3", name, r)
		}
	}
	c.current(t, streams, consumerName)

	p := startPublisher(t, c)
	p.progress(t, c, perKill, "before any kill", workers)
	phases := []struct {
		what   string
		victim func() string
	}{
		{"ingest stream leader", func() string { return c.leader(t, "OMNIGRAPH_DEMO") }},
		{"writer's server", func() string { return writer(t, c, workers).server() }},
		{"lease bucket leader", func() string { return c.leader(t, "KV_omnigraph_leases") }},
	}
	for _, ph := range phases {
		name := ph.victim()
		victim := c.node(name)
		if victim == nil {
			t.Fatalf("%s: no server %q", ph.what, name)
		}
		killed := time.Now()
		victim.kill()
		took := p.progress(t, c, perKill, ph.what+" "+name+" killed", workers)
		t.Logf("%s %s SIGKILLed: %d more batches published and applied in %v while it was down", ph.what, name, perKill, took.Round(time.Millisecond))
		victim.start()
		c.current(t, streams, consumerName)
		t.Logf("%s restarted and caught up %v after the kill", name, time.Since(killed).Round(time.Millisecond))
	}
	n := p.stop(t)
	waitAcked(t, c, n, workers)
	for i, w := range workers {
		if w.exited() {
			t.Fatalf("worker %d exited during the run:\n%s", i, w.out)
		}
		w.terminate(t)
	}
	checkExactlyOnce(t, root, n)
	epochs := 0
	for _, w := range workers {
		epochs += strings.Count(w.out.String(), `"msg":"ready"`)
	}
	t.Logf("%d batches, each once; %d writer epochs; %v in all", n, epochs, time.Since(began).Round(time.Millisecond))
}

// waitLog waits until w's output holds want.
func waitLog(t *testing.T, w *workerProc, want string) {
	t.Helper()
	waitLogWithin(t, w, want, 30*time.Second)
}

// waitLogWithin is waitLog waiting up to within.
func waitLogWithin(t *testing.T, w *workerProc, want string, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if strings.Contains(w.out.String(), want) {
			return
		}
	}
	t.Fatalf("the worker never logged %s:\n%s", want, w.out)
}

// writer is the worker holding the graph's lease (its value is the holder, <host>:<pid>).
func writer(t *testing.T, c *cluster, workers []*workerProc) *workerProc {
	var found *workerProc
	c.eventually(t, outage, "the lease holder", func(ctx context.Context) error {
		kv, err := c.js.KeyValue(ctx, "omnigraph_leases")
		if err != nil {
			return err
		}
		e, err := kv.Get(ctx, "demo")
		if err != nil {
			return err
		}
		for _, w := range workers {
			if strings.HasSuffix(string(e.Value()), ":"+strconv.Itoa(w.cmd.Process.Pid)) && w.server() != "" {
				found = w
				return nil
			}
		}
		return fmt.Errorf("holder %q is none of the workers", e.Value())
	})
	return found
}

// publisher publishes batch 0, 1, 2, ... one after another, each retried (same Nats-Msg-Id,
// so a retry of a stored batch is a duplicate) until JetStream acknowledges it.
// It waits while maxBacklog published batches are not applied: a worker that stops applying
// stops it too, and the wait for progress fails.
type publisher struct {
	mu      sync.Mutex
	acked   int    // batches 0..acked-1 are acknowledged
	applied uint64 // the highest ack floor seen
	err     error
	quit    chan struct{}
	done    chan struct{}
}

func startPublisher(t *testing.T, c *cluster) *publisher {
	nc, err := nats.Connect(c.urls, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	p := &publisher{quit: make(chan struct{}), done: make(chan struct{})}
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for {
			select {
			case <-p.quit:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if f := ackFloor(c); f > 0 { // 0: the cluster did not answer
				p.mu.Lock()
				p.applied = max(p.applied, f)
				p.mu.Unlock()
			}
		}
	}()
	go func() {
		defer close(p.done)
		defer func() { <-polled }()
		defer nc.Close()
		for i := 0; ; i++ {
			select {
			case <-p.quit:
				return
			case <-time.After(30 * time.Millisecond):
			}
			for p.backlog(i) >= maxBacklog {
				select {
				case <-p.quit:
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
			if err := graphtest.PublishAcked(js, "demo", i, 2*outage); err != nil {
				p.mu.Lock()
				p.err = err
				p.mu.Unlock()
				return
			}
			p.mu.Lock()
			p.acked = i + 1
			p.mu.Unlock()
		}
	}()
	t.Cleanup(func() { p.halt() })
	return p
}

// backlog is how many batches before batch i are not known to be applied.
func (p *publisher) backlog(i int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return i - int(p.applied)
}

func (p *publisher) state() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acked, p.err
}

func (p *publisher) halt() {
	select {
	case <-p.quit:
	default:
		close(p.quit)
	}
	<-p.done
}

// stop ends the publishing after the batch under way and returns how many were acknowledged.
func (p *publisher) stop(t *testing.T) int {
	p.halt()
	n, err := p.state()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// progress waits until k more batches than now are acknowledged by JetStream and applied and
// acknowledged by the worker, and says how long that took.
func (p *publisher) progress(t *testing.T, c *cluster, k int, when string, workers []*workerProc) time.Duration {
	t.Helper()
	start := time.Now()
	now, _ := p.state()
	want := now + k
	for time.Since(start) < outage {
		n, err := p.state()
		if err != nil {
			dump(t, workers)
			t.Fatalf("%s: %v", when, err)
		}
		if n >= want && ackFloor(c) >= uint64(want) {
			return time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
	n, _ := p.state()
	diag(t, c, workers)
	dump(t, workers)
	t.Fatalf("%s: no progress: %d batches acknowledged by JetStream, %d applied, want %d within %v", when, n, ackFloor(c), want, outage)
	return 0
}

// ackFloor is the stream sequence up to which the worker's consumer acknowledged (0 while
// the cluster does not answer): batch i is sequence i+1.
func ackFloor(c *cluster) uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cons, err := c.js.Consumer(ctx, "OMNIGRAPH_DEMO", consumerName)
	if err != nil {
		return 0
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return 0
	}
	return info.AckFloor.Stream
}

func waitAcked(t *testing.T, c *cluster, n int, workers []*workerProc) {
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if ackFloor(c) >= uint64(n) {
			return
		}
	}
	dump(t, workers)
	t.Fatalf("the workers did not apply %d batches", n)
}

func dump(t *testing.T, workers []*workerProc) {
	for i, w := range workers {
		t.Logf("worker %d output:\n%s", i, w.out)
	}
}

// checkExactlyOnce requires the three rows of each of batches 0..n-1 exactly once on main,
// and nothing else: a batch half-visible, lost or applied twice fails it.
func checkExactlyOnce(t *testing.T, root string, n int) {
	lines := strings.Split(strings.TrimSpace(run(t, "export", "--root", root)), "\n")
	sort.Strings(lines)
	if len(lines) != 3*n {
		t.Fatalf("graph holds %d rows, want %d (3 per batch, each once)", len(lines), 3*n)
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
	for i := range n {
		for _, want := range []string{fmt.Sprintf(`"handle":"p%d`, i), fmt.Sprintf(`"domain":"c%d.io`, i), fmt.Sprintf(`"id":"w%d`, i)} {
			if count[want] != 1 {
				t.Fatalf("%s appears %d times", want, count[want])
			}
		}
	}
}

// diag logs, when a wait for progress failed, what JetStream holds (each stream's state and
// replicas, the consumer's, the lease) and makes each worker print its goroutines (SIGQUIT:
// the Go runtime dumps them to the output the test keeps, and the process ends).
func diag(t *testing.T, c *cluster, workers []*workerProc) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, name := range streams {
		s, err := c.js.Stream(ctx, name)
		if err != nil {
			t.Logf("stream %s: %v", name, err)
			continue
		}
		info, err := s.Info(ctx)
		if err != nil || info.Cluster == nil {
			t.Logf("stream %s info: %v", name, err)
			continue
		}
		t.Logf("stream %s: %+v; leader %s", name, info.State, info.Cluster.Leader)
		for _, r := range info.Cluster.Replicas {
			t.Logf("  replica %+v", *r)
		}
	}
	if cons, err := c.js.Consumer(ctx, "OMNIGRAPH_DEMO", consumerName); err != nil {
		t.Logf("consumer: %v", err)
	} else if ci := cons.CachedInfo(); ci.Cluster != nil {
		t.Logf("consumer: delivered %+v, ack floor %+v, pending %d, ack pending %d, waiting pulls %d, redelivered %d; leader %s",
			ci.Delivered, ci.AckFloor, ci.NumPending, ci.NumAckPending, ci.NumWaiting, ci.NumRedelivered, ci.Cluster.Leader)
		for _, r := range ci.Cluster.Replicas {
			t.Logf("  replica %+v", *r)
		}
	}
	if kv, err := c.js.KeyValue(ctx, "omnigraph_leases"); err != nil {
		t.Logf("lease bucket: %v", err)
	} else if e, err := kv.Get(ctx, "demo"); err != nil {
		t.Logf("lease: %v", err)
	} else {
		t.Logf("lease: %s at revision %d since %v", e.Value(), e.Revision(), e.Created())
	}
	for _, w := range workers {
		_ = w.cmd.Process.Signal(syscall.SIGQUIT)
	}
	time.Sleep(2 * time.Second)
}

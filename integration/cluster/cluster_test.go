// Package cluster tests the worker binary against a three-server NATS cluster (real
// nats-server processes built from the module, routed on loopback, JetStream on each) with
// stream_replicas 3: batches keep flowing while the ingest stream's leader, the server the
// writer is connected to, and the lease bucket's leader are each SIGKILLed, and every
// acknowledged batch is in the graph exactly once; and a worker started while one server is
// down, or two (no quorum), waits for the cluster rather than exit.
package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/omnigraph/omnigraph-worker/internal/proctest"
)

var bin struct{ worker, nats string }

func TestMain(m *testing.M) {
	proctest.Main(m, map[*string]string{&bin.worker: proctest.Worker, &bin.nats: proctest.NATSServer})
}

func freePort(t *testing.T) int { return proctest.FreePort(t) }

// node is one nats-server process of the cluster.
type node struct {
	t          *testing.T
	name, conf string
	url        string
	cmd        *exec.Cmd
	done       chan struct{}
}

func (n *node) start() {
	n.cmd = exec.Command(bin.nats, "-c", n.conf)
	if err := n.cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	n.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(n.cmd, n.done)
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if nc, err := nats.Connect(n.url, nats.NoReconnect()); err == nil {
			nc.Close()
			return
		}
	}
	n.t.Fatalf("nats-server %s did not start", n.name)
}

// kill SIGKILLs the server: no flush, no goodbye to its peers.
func (n *node) kill() {
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.done
	n.cmd = nil
}

func (n *node) stop() {
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(10 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.done
	}
	n.cmd = nil
}

// cluster is three routed servers with JetStream, each max_payload large enough for a full batch.
type cluster struct {
	nodes []*node
	urls  string // every client URL, comma-separated, as nats_url takes them
	js    jetstream.JetStream
}

func startCluster(t *testing.T) *cluster {
	dir := t.TempDir()
	const size = 3
	client, routes := make([]int, size), make([]string, size)
	for i := range size {
		client[i] = freePort(t)
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", freePort(t))
	}
	c := &cluster{}
	var urls []string
	for i := range size {
		n := &node{t: t, name: fmt.Sprintf("n%d", i+1), url: fmt.Sprintf("nats://127.0.0.1:%d", client[i])}
		n.conf = filepath.Join(dir, n.name+".conf")
		body := fmt.Sprintf(`server_name: %s
listen: 127.0.0.1:%d
max_payload: 33619968
jetstream { store_dir: %q }
cluster {
  name: omnigraph
  listen: %s
  routes: [%s]
}
`, n.name, client[i], filepath.Join(dir, n.name), strings.TrimPrefix(routes[i], "nats-route://"), strings.Join(routes, ", "))
		if err := os.WriteFile(n.conf, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, n)
		urls = append(urls, n.url)
		t.Cleanup(n.stop)
	}
	c.urls = strings.Join(urls, ",")
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(n.start)
	}
	wg.Wait()
	nc, err := nats.Connect(c.urls, nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if c.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	// JetStream answers once the servers have elected a meta leader.
	c.eventually(t, 30*time.Second, "JetStream meta leader", func(ctx context.Context) error {
		_, err := c.js.AccountInfo(ctx)
		return err
	})
	return c
}

func (c *cluster) node(name string) *node {
	for _, n := range c.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

// eventually retries f, each try bounded to 2 s, until it succeeds or within runs out.
func (c *cluster) eventually(t *testing.T, within time.Duration, what string, f func(ctx context.Context) error) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = f(ctx)
		cancel()
		if err == nil {
			return
		}
	}
	t.Fatalf("%s: not within %v: %v", what, within, err)
}

// leader is the server leading stream's Raft group.
func (c *cluster) leader(t *testing.T, stream string) string {
	var name string
	c.eventually(t, 30*time.Second, "leader of "+stream, func(ctx context.Context) error {
		s, err := c.js.Stream(ctx, stream)
		if err != nil {
			return err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return err
		}
		if info.Cluster == nil || info.Cluster.Leader == "" {
			return fmt.Errorf("no leader")
		}
		name = info.Cluster.Leader
		return nil
	})
	return name
}

// current waits until every replica of every stream and of the consumer is online and caught
// up: only then may another server die without the groups losing their quorum.
func (c *cluster) current(t *testing.T, streams []string, consumer string) {
	check := func(what string, ci *jetstream.ClusterInfo, replicas int) error {
		if ci == nil || ci.Leader == "" {
			return fmt.Errorf("%s: no leader", what)
		}
		if len(ci.Replicas) != replicas-1 {
			return fmt.Errorf("%s: %d followers", what, len(ci.Replicas))
		}
		for _, p := range ci.Replicas {
			if !p.Current || p.Offline {
				return fmt.Errorf("%s: replica %s not current", what, p.Name)
			}
		}
		return nil
	}
	c.eventually(t, 60*time.Second, "every replica current", func(ctx context.Context) error {
		for i, name := range streams {
			s, err := c.js.Stream(ctx, name)
			if err != nil {
				return err
			}
			info, err := s.Info(ctx)
			if err != nil {
				return err
			}
			if err := check(name, info.Cluster, info.Config.Replicas); err != nil {
				return err
			}
			if i == 0 {
				cons, err := s.Consumer(ctx, consumer)
				if err != nil {
					return err
				}
				ci, err := cons.Info(ctx)
				if err != nil {
					return err
				}
				if err := check("consumer "+consumer, ci.Cluster, info.Config.Replicas); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// workerProc is a `worker run` child process.
type workerProc struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error
}

// syncBuffer collects a child's output while the test reads it.
type syncBuffer = proctest.Output

func startWorker(t *testing.T, root, urls string, extra ...string) *workerProc {
	args := append([]string{"run", "--root", root, "--graph", "demo", "--nats-url", urls, "--http", "", "--ack-wait", "5s"}, extra...)
	cmd := exec.Command(bin.worker, args...)
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

// exited reports whether the worker process has ended.
func (w *workerProc) exited() bool {
	select {
	case err := <-w.done:
		w.done <- err
		return true
	default:
		return false
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

// server is the name of the server the worker's connection is on, from its last
// "NATS connected" or "NATS reconnected" log line.
func (w *workerProc) server() string {
	out := w.out.String()
	i := max(strings.LastIndex(out, `"msg":"NATS connected"`), strings.LastIndex(out, `"msg":"NATS reconnected"`))
	if i < 0 {
		return ""
	}
	line := out[i:]
	if j := strings.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	const key = `"server":"`
	k := strings.Index(line, key)
	if k < 0 {
		return ""
	}
	line = line[k+len(key):]
	return line[:strings.IndexByte(line, '"')]
}

// run is the worker binary's output for args, failing the test unless it exits 0.
func run(t *testing.T, args ...string) string {
	out, err := exec.Command(bin.worker, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("worker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

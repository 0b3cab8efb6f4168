package cluster

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
)

// TestWorkerStartsBeforeTheClusterHasQuorum: a worker started while two of the three
// servers are down (no meta leader: JetStream cannot make its streams) does not exit. It
// says that JetStream is unavailable and tries again; once the two servers are back it makes
// its R3 streams, takes the lease, is ready, and applies what is published, each batch once.
func TestWorkerStartsBeforeTheClusterHasQuorum(t *testing.T) {
	c := startCluster(t)
	root := filepath.Join(t.TempDir(), "graph")
	run(t, "init", "--root", root, "--schema", graphtest.SchemaPath(graphtest.Example))
	down := []*node{c.nodes[1], c.nodes[2]}
	for _, n := range down {
		n.kill()
	}
	w := startWorker(t, root, c.urls, "--stream-replicas", "3", "--lease-ttl", "2s")
	workers := []*workerProc{w}
	waitLog(t, w, "JetStream unavailable for the streams' setup; trying again")
	if w.exited() {
		t.Fatalf("the worker exited while the cluster had no quorum:\n%s", w.out)
	}
	if strings.Contains(w.out.String(), `"msg":"ready"`) {
		t.Fatalf("ready without a quorum:\n%s", w.out)
	}
	var wg sync.WaitGroup
	for _, n := range down {
		wg.Go(n.start)
	}
	wg.Wait()
	waitLogWithin(t, w, `"msg":"ready"`, 90*time.Second)
	const n = 3
	publishApplied(t, c, n, workers)
	if w.exited() {
		t.Fatalf("the worker exited:\n%s", w.out)
	}
	w.terminate(t)
	checkExactlyOnce(t, root, n)
}

// TestWorkerStartsWithOneServerDown: a worker (re)started while one of the three servers is
// down. JetStream still places the R3 streams (the dead server is one of their peers), but
// making them can outlast a request's timeout while their groups elect leaders without it; the
// worker tries again instead of exiting, becomes ready, and applies what is published, each
// batch once, and once the server is back every replica catches up.
func TestWorkerStartsWithOneServerDown(t *testing.T) {
	c := startCluster(t)
	root := filepath.Join(t.TempDir(), "graph")
	run(t, "init", "--root", root, "--schema", graphtest.SchemaPath(graphtest.Example))
	down := c.nodes[2]
	down.kill()
	w := startWorker(t, root, c.urls, "--stream-replicas", "3", "--lease-ttl", "2s")
	workers := []*workerProc{w}
	waitLogWithin(t, w, `"msg":"ready"`, 90*time.Second)
	const n = 3
	publishApplied(t, c, n, workers)
	down.start()
	c.current(t, streams, consumerName)
	if w.exited() {
		t.Fatalf("the worker exited:\n%s", w.out)
	}
	w.terminate(t)
	checkExactlyOnce(t, root, n)
}

// publishApplied publishes batches 0..n-1, each until JetStream acknowledges it, and waits
// until the workers applied them all.
func publishApplied(t *testing.T, c *cluster, n int, workers []*workerProc) {
	t.Helper()
	for i := range n {
		if err := graphtest.PublishAcked(c.js, "demo", i, outage); err != nil {
			t.Fatal(err)
		}
	}
	waitAcked(t, c, n, workers)
}

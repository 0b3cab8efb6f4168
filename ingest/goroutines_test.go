package ingest

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// ownGoroutines are the stacks of running goroutines with a frame of this module, other than
// the test's own and the test runner's.
func ownGoroutines() []string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "omnigraph/omnigraph-worker/") && !strings.Contains(g, "testing.tRunner") {
			out = append(out, g)
		}
	}
	return out
}

// Goroutines end on shutdown: once Run has returned and the lease is released, nothing the
// worker started is left running: not the per-message heartbeat, the consumer's stopper, the
// max-deliver advisory watcher, the pending-count poller, the compaction or the lease renewer,
// nor the pipeline's fetcher, stager and heartbeat (stopped with messages held).
func TestRunLeavesNoGoroutines(t *testing.T) {
	for _, d := range []int{1, 4} {
		t.Run(fmt.Sprintf("depth%d", d), func(t *testing.T) { runLeavesNoGoroutines(t, d) })
	}
}

func runLeavesNoGoroutines(t *testing.T, n int) {
	ctx := context.Background()
	var lease *Lease
	h := start(t, func(w *Worker) {
		var err error
		if lease, err = AcquireLease(ctx, w.js, "demo", "goroutines", 3*time.Second, Replication{}); err != nil {
			t.Fatal(err)
		}
		w.UseLease(lease)
		w.UseMetrics(NewMetrics())
		w.cfg.CompactionFanout = 2
	}, depth(n))
	for i := 0; i < 3; i++ {
		h.publish(batch, nil)
		h.event()
	}
	h.publish(`{"type":"Nope","data":{}}`, nil)
	h.deadLetter("invalid")
	h.publishMaintenance(`{"op":"optimize","all":true}`)
	h.event()
	for i := range 6 { // some are still held when the stop comes
		h.publish(person(i), nil)
	}
	if len(ownGoroutines()) == 0 {
		t.Fatal("no goroutine of the worker seen while it runs: the check below would prove nothing")
	}
	h.stop()
	err := <-h.done
	h.done <- err // for the harness's own cleanup
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := ownGoroutines()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines still running after shutdown:\n\n%s", len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A Run that ends because the lease was lost (its context still alive, the service about to
// stand by and perhaps run again) leaves nothing of it running either: the pending-count
// poller, the advisory watcher and the pipeline end with Run, not with the service's context.
func TestLostLeaseRunLeavesNoGoroutines(t *testing.T) {
	for _, d := range []int{1, 4} {
		t.Run(fmt.Sprintf("depth%d", d), func(t *testing.T) { lostLeaseRunLeavesNoGoroutines(t, d) })
	}
}

func lostLeaseRunLeavesNoGoroutines(t *testing.T, n int) {
	ctx := context.Background()
	var lease *Lease
	h := start(t, func(w *Worker) {
		var err error
		if lease, err = AcquireLease(ctx, w.js, "demo", "goroutines", 3*time.Second, Replication{}); err != nil {
			t.Fatal(err)
		}
		w.UseLease(lease)
		w.UseMetrics(NewMetrics())
	}, depth(n))
	h.publish(batch, nil)
	h.event()
	for i := range 6 {
		h.publish(person(i), nil)
	}
	lease.markLost()
	err := <-h.done
	h.done <- err
	if err != ErrLeaseLost {
		t.Fatalf("run: %v, want ErrLeaseLost", err)
	}
	_ = lease.Release(ctx)
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := ownGoroutines()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines still running after Run returned ErrLeaseLost:\n\n%s", len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

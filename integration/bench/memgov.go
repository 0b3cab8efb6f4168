package main

import (
	"context"
	"math"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/omnigraph/omnigraph-worker/internal/memlimit"
)

// The bench's workers run under the soft memory limit `worker run` gives itself when none is
// configured (memlimit.Governor, its default policy), one governor for the process as for a
// fleet's graphs, while any bench worker runs. Without it the collector lets the heap grow to
// gc_percent (400) over the live data, and the bench measured a worker `worker run` never is:
// on the test VM, where a page touched for the first time costs about 11 µs, the indexed
// engine benchmark took 105,000 minor faults and 465 MiB resident without a limit, 60,000 and
// 244 MiB under 200 MiB. A GOMEMLIMIT in the environment wins, as it does for `worker run`.
var benchGovernor struct {
	mu      sync.Mutex
	workers int
	bound   atomic.Int64 // the sum of the running workers' pipeline_bytes
	stop    func()
}

// governMemory counts a bench worker whose pipeline may hold bound bytes until the returned
// release, starting the governor with the first one and ending it, the limit lifted, after
// the last. The workers' in-flight counts are not wired (ingest.New has no footprint): the
// governor's state then includes them, and its least over the window leaves them out.
func governMemory(bound int64) (release func()) {
	benchGovernor.mu.Lock()
	defer benchGovernor.mu.Unlock()
	benchGovernor.bound.Add(bound)
	benchGovernor.workers++
	if benchGovernor.workers == 1 && os.Getenv("GOMEMLIMIT") == "" {
		ctx, cancel := context.WithCancel(context.Background())
		g := &memlimit.Governor{
			Policy:      memlimit.Policy{Headroom: memlimit.DefaultHeadroom, Floor: memlimit.DefaultFloor},
			Period:      memlimit.DefaultPeriod,
			StateWindow: memlimit.DefaultStateWindow,
			Counts:      func() (int64, int64) { return 0, benchGovernor.bound.Load() },
			Changed:     func(limit, state, inFlight, bound int64) {},
		}
		var wg sync.WaitGroup
		wg.Go(func() { g.Run(ctx) })
		benchGovernor.stop = func() {
			cancel()
			wg.Wait()
			debug.SetMemoryLimit(math.MaxInt64)
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			benchGovernor.mu.Lock()
			defer benchGovernor.mu.Unlock()
			benchGovernor.bound.Add(-bound)
			if benchGovernor.workers--; benchGovernor.workers == 0 && benchGovernor.stop != nil {
				benchGovernor.stop()
				benchGovernor.stop = nil
			}
		})
	}
}

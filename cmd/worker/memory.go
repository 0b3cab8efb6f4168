package main

import (
	"context"
	"runtime/debug"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/ingest"
	"github.com/omnigraph/omnigraph-worker/internal/memlimit"
)

// governorPeriod is how often the default memory limit follows the live heap and the counts.
const governorPeriod = time.Second

// governorWindow is how many of those the state is the least of: a compaction or a merge that
// holds more for under a minute does not raise the limit.
const governorWindow = 60

// limitMemory gives the Go collector its soft memory limit for `worker run`: GOMEMLIMIT or
// memory_limit as given, else the default policy (memlimit.Policy), kept by a governor in step
// with what the pipelines of fp may hold, under nine tenths of the container's memory limit
// when there is one. The returned stop ends the governor and waits for it.
func limitMemory(ctx context.Context, c *config.Config, fp *ingest.Footprint, log *zap.Logger) (stop func()) {
	switch {
	case getenv("GOMEMLIMIT") != "":
		log.Info("memory limit", zap.String("GOMEMLIMIT", getenv("GOMEMLIMIT")))
		return func() {}
	case c.MemoryLimit > 0:
		debug.SetMemoryLimit(int64(c.MemoryLimit))
		log.Info("memory limit", zap.Int("soft_limit_bytes", c.MemoryLimit))
		return func() {}
	}
	p := memlimit.Policy{Headroom: memlimit.DefaultHeadroom, Floor: memlimit.DefaultFloor}
	if hard, ok := memlimit.FromCgroup("/sys/fs/cgroup"); ok {
		p.Ceiling = memlimit.Soft(hard)
		log.Info("container memory limit", zap.Int64("cgroup_bytes", hard), zap.Int64("soft_limit_ceiling_bytes", p.Ceiling))
	}
	g := &memlimit.Governor{Policy: p, Period: governorPeriod, StateWindow: governorWindow,
		Counts: func() (int64, int64) { return fp.InFlight(), fp.Bound() },
		Changed: func(limit, state, inFlight, bound int64) {
			log.Info("memory limit", zap.Int64("soft_limit_bytes", limit), zap.Int64("state_bytes", state),
				zap.Int64("pipeline_bytes_in_flight", inFlight), zap.Int64("pipeline_bytes_bound", bound), zap.Int64("headroom_bytes", p.Headroom))
		}}
	gctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { g.Run(gctx) })
	return func() { cancel(); wg.Wait() }
}

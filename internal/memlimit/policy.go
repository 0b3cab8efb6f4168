package memlimit

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Policy is `worker run`'s default soft memory limit when none is given: room for what the
// graphs' own state keeps live (id indexes, key filters, caches: the live heap beside what
// the pipelines count in flight), for their pipelines' bound (what they may count in flight)
// and a fixed headroom (the runtime, the garbage between two collections, what the counts
// miss). So the collector runs as the heap nears what the bound allows, instead of letting
// it grow to gc_percent over the live heap.
type Policy struct {
	Headroom int64 // beside the state and the bound
	Floor    int64 // the limit is never below it
	Ceiling  int64 // nor above it, when positive (the container's soft limit)
}

// DefaultHeadroom is the garbage the collector may leave between two cycles. Under the goal of
// pipeline_bytes + 128 MiB of resident memory, the rest of the 128 MiB is for the graph's state
// and what the limit does not count (the binary's pages, about 50 MiB resident). Measured on
// the pipeline bench: 64 MiB peaked at 283 MiB resident, 40 MiB at 268, in the same time.
const DefaultHeadroom = 48 << 20

// DefaultFloor: below it a worker's runtime, connection buffers and one small commit already
// crowd the heap, and the collector would run without pause.
const DefaultFloor = 128 << 20

// Limit is the soft limit for state bytes of the graphs' own while the pipelines count
// inFlight of their bound. A message past the bound is let in when nothing else is held, so
// what is counted may exceed the bound: the limit then leaves room for what is counted.
func (p Policy) Limit(state, inFlight, bound int64) int64 {
	limit := max(state+max(bound, inFlight)+p.Headroom, p.Floor)
	if p.Ceiling > 0 {
		limit = min(limit, p.Ceiling)
	}
	return limit
}

// Governor keeps the runtime's soft memory limit at Policy's, re-evaluated every Period as
// the live heap and the counts move. The state is the least of the live heap beside what is
// counted in flight over the last StateWindow samples: the live heap is measured at the last
// collection and the count now, and a compaction or a merge holds more for a while; the
// limit must not rise with those, only with what stays (id indexes, key filters, caches).
type Governor struct {
	Policy
	Period      time.Duration
	StateWindow int
	// Counts reads what the pipelines count in flight and the sum of their bounds.
	Counts func() (inFlight, bound int64)
	// Changed is told each limit set that differs from the last one told by a quarter or more
	// (the first too), for the log.
	Changed func(limit, state, inFlight, bound int64)
}

// Run sets the limit until ctx ends, then leaves it where it is (the process is ending).
func (g *Governor) Run(ctx context.Context) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	t := time.NewTicker(g.Period)
	defer t.Stop()
	states := window{size: max(g.StateWindow, 1)}
	var set, told int64
	for {
		metrics.Read(sample)
		inFlight, bound := g.Counts()
		state := states.least(max(int64(sample[0].Value.Uint64())-inFlight, 0))
		want := g.Limit(state, inFlight, bound)
		if moved(set, want, 32) {
			debug.SetMemoryLimit(want)
			set = want
		}
		if moved(told, set, 4) {
			g.Changed(set, state, inFlight, bound)
			told = set
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// window is the last size values pushed.
type window struct {
	size int
	vals []int64
}

// least pushes v and returns the least of the last size values.
func (w *window) least(v int64) int64 {
	w.vals = append(w.vals, v)
	if len(w.vals) > w.size {
		w.vals = w.vals[1:]
	}
	m := v
	for _, x := range w.vals {
		m = min(m, x)
	}
	return m
}

// moved says whether want is new (from is 0) or differs from from by 1/frac of it or more:
// the limit follows the heap without being set again for every small move.
func moved(from, want int64, frac int64) bool {
	d := want - from
	return from == 0 || d >= from/frac || -d >= from/frac
}

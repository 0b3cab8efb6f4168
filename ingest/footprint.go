package ingest

import (
	"errors"
	"sync/atomic"
)

// Footprint adds up, over the graphs one process serves, what their pipelines count in flight
// and the pipeline_bytes bounds of the services that run: what the process's memory limit must
// leave room for beside the graphs' own state (`worker run`'s default limit reads it).
type Footprint struct {
	inFlight, bound atomic.Int64
}

// InFlight is what the pipelines count in flight now: held messages and the ones being
// committed, with what their commits build.
func (f *Footprint) InFlight() int64 { return f.inFlight.Load() }

// Bound is the sum of the pipeline_bytes of the services running now.
func (f *Footprint) Bound() int64 { return f.bound.Load() }

// add is nil-safe: a worker outside `worker run` has no footprint.
func (f *Footprint) add(delta int64) {
	if f != nil {
		f.inFlight.Add(delta)
	}
}

// reserve counts a running service's bound until the returned release.
func (f *Footprint) reserve(bound int64) (release func()) {
	if f == nil {
		return func() {}
	}
	f.bound.Add(bound)
	return func() { f.bound.Add(-bound) }
}

// WithFootprint adds the service's pipeline bound, and what its pipeline counts in flight, to
// f (shared by the services of one process).
func WithFootprint(f *Footprint) ServiceOpt {
	return func(o *serviceOpts) error {
		if f == nil {
			return errors.New("ingest: WithFootprint(nil)")
		}
		o.footprint = f
		return nil
	}
}

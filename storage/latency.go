package storage

import (
	"context"
	"sync"
	"time"
)

// Latency makes a store behave like a distant object store: every request waits Delay before
// it runs, and the requests are counted in sequential round trips, so a test or the bench can
// tell how many of them a piece of work waits for. It is an instrument for tests and the bench
// only: it is reachable from Go code (WithLatency), never from a URI or the worker's
// configuration, so no deployment can switch it on by accident.
//
// RoundTrips is the longest chain of requests each of which started after the one before it
// had ended: with every request costing the same delay, the work took at least that many
// delays, whatever ran beside the chain. Waves is a coarser count: a request that starts while
// no other request is in flight begins a new wave, and requests that overlap share one, so a
// chain of two short requests beside one long one counts once. Both grow only: read them
// before and after the work. Unrelated requests running beside the work (another goroutine's
// reads) lengthen neither count by more than their own chain, but they do merge waves.
type Latency struct {
	delay    time.Duration
	mu       sync.Mutex
	inflight int
	waves    int64
	requests int64
	// depth is the longest chain among the requests that have ended; a request that starts
	// now extends it by one.
	depth int64
	// onStart and onEnd observe the requests (see Observe).
	onStart, onEnd func(Request)
}

// Request is one request as Latency saw it start, and again as it ended (see Latency.Observe).
type Request struct {
	Seq      int64  // its number among the requests, counted from 1: tells its start and end apart from others'
	Wave     int64  // the wave it belongs to, counted from 1
	Depth    int64  // its place in the longest chain of requests before it, counted from 1
	Op       string // the failpoint op name: get, put_if_absent, list_dir, ...
	Location string // the key's or prefix's Location, so a Sub's requests are told apart
}

// NewLatency delays every request of the stores it is given to by d (0: no delay, counting
// only).
func NewLatency(d time.Duration) *Latency { return &Latency{delay: d} }

// WithLatency opens the store behind l: every request of it and of its Subs is delayed and
// counted. Test and bench use only (see Latency).
func WithLatency(l *Latency) Option { return func(o *openOptions) { o.latency = l } }

// Delay is the delay of every request.
func (l *Latency) Delay() time.Duration { return l.delay }

// Waves is how many waves of requests have started so far: the sequential round trips.
func (l *Latency) Waves() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waves
}

// RoundTrips is the length of the longest chain of sequential requests so far (see Latency).
func (l *Latency) RoundTrips() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.depth
}

// Requests is how many requests have started so far.
func (l *Latency) Requests() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.requests
}

// Trace calls fn (nil: nobody) as each request starts, under l's lock: fn must not call l.
func (l *Latency) Trace(fn func(Request)) { l.Observe(fn, nil) }

// Observe calls start as each request starts and end as it ends (either nil: nobody), both
// under l's lock, so one at a time and in the order the requests started and ended; neither
// may call l. The request end is given is the one start was given, Seq telling them apart.
// A caller can so follow chains of its own choosing (one commit's requests, say) that the
// counts over every request would blur.
func (l *Latency) Observe(start, end func(Request)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onStart, l.onEnd = start, end
}

// request waits out the delay of one request (or ctx) and returns the function that ends it.
func (l *Latency) request(ctx context.Context, op, location string) (end func(), err error) {
	l.mu.Lock()
	if l.inflight == 0 {
		l.waves++
	}
	l.inflight++
	l.requests++
	depth := l.depth + 1
	r := Request{Seq: l.requests, Wave: l.waves, Depth: depth, Op: op, Location: location}
	if l.onStart != nil {
		l.onStart(r)
	}
	l.mu.Unlock()
	end = func() {
		l.mu.Lock()
		l.inflight--
		l.depth = max(l.depth, depth)
		if l.onEnd != nil {
			l.onEnd(r)
		}
		l.mu.Unlock()
	}
	if l.delay <= 0 {
		return end, ctx.Err()
	}
	t := time.NewTimer(l.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return end, nil
	case <-ctx.Done():
		return end, ctx.Err()
	}
}

// latencyStore is a Store behind a Latency. The request counts as in flight until the inner
// call returns, so a request that starts meanwhile shares its wave.
type latencyStore struct {
	in Store
	l  *Latency
}

// unwrap is the store a latencyStore delays (st itself otherwise), for the functions that act
// on the local store directly.
func unwrap(st Store) Store {
	if ls, ok := st.(*latencyStore); ok {
		return ls.in
	}
	return st
}

func (s *latencyStore) URI() string                          { return s.in.URI() }
func (s *latencyStore) Location(key string) string           { return s.in.Location(key) }
func (s *latencyStore) KeyOf(location string) (string, bool) { return s.in.KeyOf(location) }
func (s *latencyStore) Sub(prefix string) Store              { return &latencyStore{in: s.in.Sub(prefix), l: s.l} }
func (s *latencyStore) Close() error                         { return s.in.Close() }

func (s *latencyStore) Get(ctx context.Context, key string) ([]byte, error) {
	end, err := s.l.request(ctx, opGet, s.in.Location(key))
	defer end()
	if err != nil {
		return nil, wrap(ctx, opGet, key, err)
	}
	return s.in.Get(ctx, key)
}

func (s *latencyStore) GetIfExists(ctx context.Context, key string) ([]byte, bool, error) {
	end, err := s.l.request(ctx, opGetIfExists, s.in.Location(key))
	defer end()
	if err != nil {
		return nil, false, wrap(ctx, opGetIfExists, key, err)
	}
	return s.in.GetIfExists(ctx, key)
}

func (s *latencyStore) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	end, err := s.l.request(ctx, opGetRange, s.in.Location(key))
	defer end()
	if err != nil {
		return nil, wrap(ctx, opGetRange, key, err)
	}
	return s.in.GetRange(ctx, key, offset, length)
}

func (s *latencyStore) Size(ctx context.Context, key string) (int64, error) {
	end, err := s.l.request(ctx, opSize, s.in.Location(key))
	defer end()
	if err != nil {
		return 0, wrap(ctx, opSize, key, err)
	}
	return s.in.Size(ctx, key)
}

func (s *latencyStore) Exists(ctx context.Context, key string) (bool, error) {
	end, err := s.l.request(ctx, opExists, s.in.Location(key))
	defer end()
	if err != nil {
		return false, wrap(ctx, opExists, key, err)
	}
	return s.in.Exists(ctx, key)
}

func (s *latencyStore) Put(ctx context.Context, key string, data []byte) error {
	end, err := s.l.request(ctx, opPut, s.in.Location(key))
	defer end()
	if err != nil {
		return wrap(ctx, opPut, key, err)
	}
	return s.in.Put(ctx, key, data)
}

func (s *latencyStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	end, err := s.l.request(ctx, opPutIfAbsent, s.in.Location(key))
	defer end()
	if err != nil {
		return wrap(ctx, opPutIfAbsent, key, err)
	}
	return s.in.PutIfAbsent(ctx, key, data)
}

// ReplaceIfUnchanged counts as one request: a conditional PUT on S3 (see replace.go).
func (s *latencyStore) ReplaceIfUnchanged(ctx context.Context, key string, old, data []byte) error {
	end, err := s.l.request(ctx, opReplace, s.in.Location(key))
	defer end()
	if err != nil {
		return wrap(ctx, opReplace, key, err)
	}
	return s.in.ReplaceIfUnchanged(ctx, key, old, data)
}

func (s *latencyStore) List(ctx context.Context, prefix string) ([]Object, error) {
	end, err := s.l.request(ctx, opList, s.in.Location(prefix))
	defer end()
	if err != nil {
		return nil, wrap(ctx, opList, prefix, err)
	}
	return s.in.List(ctx, prefix)
}

func (s *latencyStore) ListDir(ctx context.Context, prefix string) ([]Object, []string, error) {
	end, err := s.l.request(ctx, opListDir, s.in.Location(prefix))
	defer end()
	if err != nil {
		return nil, nil, wrap(ctx, opListDir, prefix, err)
	}
	return s.in.ListDir(ctx, prefix)
}

func (s *latencyStore) Delete(ctx context.Context, key string) error {
	end, err := s.l.request(ctx, opDelete, s.in.Location(key))
	defer end()
	if err != nil {
		return wrap(ctx, opDelete, key, err)
	}
	return s.in.Delete(ctx, key)
}

// DeletePrefix counts as one request, although an object store needs a listing and then a
// wave of deletes: it is cleanup's, not on a commit's path.
func (s *latencyStore) DeletePrefix(ctx context.Context, prefix string) error {
	end, err := s.l.request(ctx, opDeletePrefix, s.in.Location(prefix))
	defer end()
	if err != nil {
		return wrap(ctx, opDeletePrefix, prefix, err)
	}
	return s.in.DeletePrefix(ctx, prefix)
}

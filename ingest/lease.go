package ingest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// LeaseBucket is the JetStream key-value bucket holding one lease per graph.
const LeaseBucket = "omnigraph_leases"

// ErrLeaseLost is returned once this worker no longer holds its graph's lease.
var ErrLeaseLost = errors.New("ingest: the single-writer lease was lost")

// Lease is the single-writer lease of one graph: a key in a JetStream KV bucket whose entries
// expire after TTL unless renewed. Its revisions fence writes: a worker checks, before it arms
// a write and before it publishes, that the key still holds the revision of its own last
// renewal, so a worker that lost the lease (paused, partitioned) cannot commit.
type Lease struct {
	kv     jetstream.KeyValue
	key    string
	holder string
	ttl    time.Duration

	mu    sync.Mutex
	rev   uint64 // revision of our last create or renewal
	epoch uint64 // revision of the create: the writer epoch
	lost  chan struct{}
	once  sync.Once
	kept  chan struct{} // closed when the renewals have ended
}

// AcquireLease waits (as a standby) until it holds graph's lease or ctx ends. Once held, the
// lease is renewed in the background until it is released or a renewal fails, not until ctx
// ends: a worker told to stop still holds its lease while it finishes the commit in flight
// (a lease that lapsed then would fence that commit half-way). Call Release when done. The
// bucket is created or updated with rep's replicas and placement (a *PlacementError when
// JetStream cannot honour them).
func AcquireLease(ctx context.Context, js jetstream.JetStream, graph, holder string, ttl time.Duration, rep Replication) (*Lease, error) {
	return acquireLease(ctx, js, graph, holder, ttl, rep, nil)
}

// acquireLease is AcquireLease calling waiting, once, with the current holder when the lease
// is found held by someone else (so that a standby says so and a leader that gets it at once
// does not).
func acquireLease(ctx context.Context, js jetstream.JetStream, graph, holder string, ttl time.Duration, rep Replication, waiting func(heldBy string)) (*Lease, error) {
	kv, err := rep.Bucket(ctx, js, LeaseBucket, ttl)
	if err != nil {
		return nil, fmt.Errorf("ingest: lease bucket: %w", err)
	}
	l := &Lease{kv: kv, key: graph, holder: holder, ttl: ttl, lost: make(chan struct{}), kept: make(chan struct{})}
	for {
		rev, err := kv.Create(ctx, graph, []byte(holder))
		if err == nil {
			l.rev, l.epoch = rev, rev
			go l.keep()
			return l, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("ingest: acquire lease: %w", err)
		}
		if waiting != nil {
			heldBy := "?"
			if e, gerr := kv.Get(ctx, graph); gerr == nil {
				heldBy = string(e.Value())
			}
			waiting(heldBy)
			waiting = nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(ttl / 4):
		}
	}
}

// Epoch is the writer epoch: the revision at which this lease was created.
func (l *Lease) Epoch() uint64 { return l.epoch }

// Lost is closed when the lease is lost.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

func (l *Lease) markLost() { l.once.Do(func() { close(l.lost) }) }

// keep renews the lease every third of its TTL until it is lost or released. A renewal that
// cannot finish within the TTL could not have kept the lease anyway.
func (l *Lease) keep() {
	defer close(l.kept)
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-l.lost:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.ttl)
		l.mu.Lock()
		rev, err := l.kv.Update(ctx, l.key, []byte(l.holder), l.rev)
		if err == nil {
			l.rev = rev
		}
		l.mu.Unlock()
		cancel()
		if err != nil {
			l.markLost()
			return
		}
	}
}

// Check fences a write: nil only while the key still holds this worker's last renewal.
func (l *Lease) Check(ctx context.Context) error {
	select {
	case <-l.lost:
		return ErrLeaseLost
	default:
	}
	// Under the renewals' lock: a Get answered just before a renewal landed, compared with the
	// revision recorded just after, would take our own renewal for another writer's.
	l.mu.Lock()
	e, err := l.kv.Get(ctx, l.key)
	rev := l.rev
	l.mu.Unlock()
	if err != nil {
		l.markLost()
		return fmt.Errorf("%w: %v", ErrLeaseLost, err)
	}
	if e.Revision() != rev || string(e.Value()) != l.holder {
		l.markLost()
		return ErrLeaseLost
	}
	return nil
}

// Release ends the renewals and gives the lease up so a standby can take over at once.
func (l *Lease) Release(ctx context.Context) error {
	l.markLost()
	<-l.kept
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.kv.Delete(ctx, l.key, jetstream.LastRevision(l.rev))
}

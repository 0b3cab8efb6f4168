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
}

// AcquireLease waits (as a standby) until it holds graph's lease, then keeps renewing it in the
// background until ctx ends, the lease is released, or a renewal fails.
func AcquireLease(ctx context.Context, js jetstream.JetStream, graph, holder string, ttl time.Duration) (*Lease, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: LeaseBucket, TTL: ttl, History: 1})
	if err != nil {
		return nil, fmt.Errorf("ingest: lease bucket: %w", err)
	}
	l := &Lease{kv: kv, key: graph, holder: holder, ttl: ttl, lost: make(chan struct{})}
	for {
		rev, err := kv.Create(ctx, graph, []byte(holder))
		if err == nil {
			l.rev, l.epoch = rev, rev
			go l.keep(ctx)
			return l, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("ingest: acquire lease: %w", err)
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

func (l *Lease) keep(ctx context.Context) {
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.lost:
			return
		case <-t.C:
		}
		l.mu.Lock()
		rev, err := l.kv.Update(ctx, l.key, []byte(l.holder), l.rev)
		if err == nil {
			l.rev = rev
		}
		l.mu.Unlock()
		if err != nil && ctx.Err() == nil {
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
	e, err := l.kv.Get(ctx, l.key)
	if err != nil {
		l.markLost()
		return fmt.Errorf("%w: %v", ErrLeaseLost, err)
	}
	l.mu.Lock()
	rev := l.rev
	l.mu.Unlock()
	if e.Revision() != rev || string(e.Value()) != l.holder {
		l.markLost()
		return ErrLeaseLost
	}
	return nil
}

// Release gives the lease up so a standby can take over at once.
func (l *Lease) Release(ctx context.Context) error {
	l.markLost()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.kv.Delete(ctx, l.key, jetstream.LastRevision(l.rev))
}

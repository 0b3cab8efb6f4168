package ingest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// LeaseBucket is the JetStream key-value bucket holding one lease per graph.
const LeaseBucket = "omnigraph_leases"

// ErrLeaseLost is returned once this worker no longer holds its graph's lease.
var ErrLeaseLost = errors.New("ingest: the single-writer lease was lost")

// Lease is the single-writer lease of one graph: a key in a JetStream KV bucket whose entries
// expire after TTL unless renewed. Its revisions fence writes: a worker checks, before it arms
// a write and before it publishes, that the key still holds the revision of its own last
// renewal, so a worker that lost the lease (paused, partitioned) cannot commit.
//
// Every request to the bucket is bounded by a part of the TTL (attemptTimeout) and tried again
// until the lease would have expired since its last renewal: a request lost with a connection
// that moved to another server, or sent while the bucket's stream elects a leader, is sent
// again instead of holding a renewal or a write for JetStream's default timeout (5 s, longer
// than a short TTL), and nothing waits on the bucket longer than the lease it asks about can
// last. A renewal never waits for a fence check.
type Lease struct {
	kv     jetstream.KeyValue
	key    string
	holder string
	ttl    time.Duration
	log    *zap.Logger

	mu      sync.Mutex
	rev     uint64    // revision of our last create or renewal
	renewed time.Time // when the request that made rev was sent: the lease lasts until renewed+ttl
	epoch   uint64    // revision of the create: the writer epoch
	// renewals counts the renewals begun and renewing says one is under way: a key read
	// meanwhile may hold its revision before the renewal has recorded it.
	renewals uint64
	renewing bool
	lost     chan struct{}
	once     sync.Once
	cause    error         // why the lease was lost, set before lost is closed
	kept     chan struct{} // closed when the renewals have ended
}

// attemptTimeout bounds one request to the lease bucket: a third of the TTL, so that a request
// that got no answer is sent again (on the connection's new server, to the stream's new leader)
// well before the lease runs out.
func attemptTimeout(ttl time.Duration) time.Duration { return ttl / 3 }

// retryPause is the pause between two attempts of a request to the lease bucket.
const retryPause = 50 * time.Millisecond

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
	return acquireLeaseLogged(ctx, js, graph, holder, ttl, rep, waiting, nil)
}

// acquireLeaseLogged is acquireLease whose lease logs to log the renewals it had to try again
// (nil: nothing). Each request is bounded by a part of the TTL, so a standby asks again soon
// after the bucket's leader changed instead of after JetStream's default timeout.
func acquireLeaseLogged(ctx context.Context, js jetstream.JetStream, graph, holder string, ttl time.Duration, rep Replication, waiting func(heldBy string), log *zap.Logger) (*Lease, error) {
	if log == nil {
		log = zap.NewNop()
	}
	bounded := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(ctx, max(2*attemptTimeout(ttl), time.Second))
	}
	bctx, cancel := bounded()
	kv, err := rep.Bucket(bctx, js, LeaseBucket, ttl)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("ingest: lease bucket: %w", err)
	}
	l := &Lease{kv: kv, key: graph, holder: holder, ttl: ttl, log: log, lost: make(chan struct{}), kept: make(chan struct{})}
	for {
		sent := time.Now()
		cctx, cancel := bounded()
		rev, err := kv.Create(cctx, graph, []byte(holder))
		cancel()
		if err == nil {
			l.rev, l.epoch, l.renewed = rev, rev, sent
			go l.keep()
			return l, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("ingest: acquire lease: %w", err)
		}
		if waiting != nil {
			heldBy := "?"
			gctx, cancel := bounded()
			if e, gerr := kv.Get(gctx, graph); gerr == nil {
				heldBy = string(e.Value())
			}
			cancel()
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

// Err is why the lease was lost (nil while it is held; ErrLeaseLost once released).
func (l *Lease) Err() error {
	select {
	case <-l.lost:
		return l.cause
	default:
		return nil
	}
}

func (l *Lease) markLost() { l.lose(ErrLeaseLost) }

// lose marks the lease lost for cause (the first cause given is kept).
func (l *Lease) lose(cause error) {
	l.once.Do(func() {
		l.cause = cause
		close(l.lost)
	})
}

// until is when the lease expires unless renewed again.
func (l *Lease) until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewed.Add(l.ttl)
}

// definite reports whether err is the bucket's answer that the key is no longer ours (another
// revision, or no key at all) rather than no answer.
func definite(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) ||
		errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted)
}

// keep renews the lease every third of its TTL until it is lost or released.
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
		if err := l.renew(); err != nil {
			l.lose(err)
			return
		}
	}
}

// renew moves the key to a new revision if it still holds ours. A request that gets no answer
// is sent again until the lease would have expired; the key's revision says whether it was
// renewed meanwhile by an attempt whose answer was lost (the key then holds this holder at a
// later revision: nobody else writes this holder's name).
func (l *Lease) renew() error {
	l.mu.Lock()
	rev, deadline := l.rev, l.renewed.Add(l.ttl)
	l.renewals++
	l.renewing = true
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.renewing = false
		l.mu.Unlock()
	}()
	var unanswered error
	for attempt := 1; ; attempt++ {
		select {
		case <-l.lost: // released
			return ErrLeaseLost
		default:
		}
		sent := time.Now()
		ctx, cancel := context.WithDeadline(context.Background(), minTime(sent.Add(attemptTimeout(l.ttl)), deadline))
		next, err := l.kv.Update(ctx, l.key, []byte(l.holder), rev)
		if err != nil && unanswered != nil && errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			// An earlier attempt may have landed with its answer lost.
			if e, gerr := l.kv.Get(ctx, l.key); gerr == nil && string(e.Value()) == l.holder && e.Revision() > rev {
				next, err = e.Revision(), nil
			}
		}
		cancel()
		if err == nil {
			l.mu.Lock()
			l.rev, l.renewed = next, sent
			l.mu.Unlock()
			if attempt > 1 {
				l.log.Info("lease renewed after retrying", zap.Int("attempts", attempt), zap.Duration("since_last_renewal", time.Since(deadline.Add(-l.ttl))))
			}
			return nil
		}
		if definite(err) {
			return fmt.Errorf("%w: renewal refused: %v", ErrLeaseLost, err)
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%w: not renewed within its TTL %v (%d attempts): %v", ErrLeaseLost, l.ttl, attempt, err)
		}
		if unanswered == nil {
			l.log.Warn("lease renewal got no answer; trying again until the lease would expire", zap.Duration("expires_in", time.Until(deadline)), zap.Error(err))
		}
		unanswered = err
		sleepUntil(minTime(time.Now().Add(retryPause), deadline), l.lost)
	}
}

// Check fences a write: nil only while the key still holds this worker's last renewal. A read
// that gets no answer is sent again until the lease would have expired, and no longer than
// ctx allows. It holds no lock while it asks, so a renewal never waits for it: the revisions
// recorded before and after the read are both ours, and so is a later one holding this holder
// while a renewal was under way (one that landed but is not recorded yet).
func (l *Lease) Check(ctx context.Context) error {
	// Never past the lease's expiry as it stands now: a lease that cannot be confirmed
	// within its own lifetime may be someone else's by then.
	deadline := l.until()
	for {
		select {
		case <-l.lost:
			return ErrLeaseLost
		default:
		}
		l.mu.Lock()
		before := l.rev
		renewals, renewing := l.renewals, l.renewing
		l.mu.Unlock()
		actx, cancel := context.WithDeadline(ctx, minTime(time.Now().Add(attemptTimeout(l.ttl)), deadline))
		e, err := l.kv.Get(actx, l.key)
		cancel()
		if err == nil {
			l.mu.Lock()
			after := l.rev
			renewed := renewing || l.renewing || l.renewals != renewals
			l.mu.Unlock()
			ours := e.Revision() == before || e.Revision() == after || renewed && e.Revision() > after
			if !ours || string(e.Value()) != l.holder {
				err := fmt.Errorf("%w: the key holds %q at revision %d, not this worker's revision %d", ErrLeaseLost, e.Value(), e.Revision(), after)
				l.lose(err)
				return err
			}
			return nil
		}
		if definite(err) || ctx.Err() != nil || !time.Now().Before(deadline) {
			err = fmt.Errorf("%w: not confirmed: %v", ErrLeaseLost, err)
			l.lose(err)
			return err
		}
		sleepUntil(minTime(time.Now().Add(retryPause), deadline), ctx.Done())
	}
}

// Release ends the renewals and gives the lease up so a standby can take over at once.
func (l *Lease) Release(ctx context.Context) error {
	l.markLost()
	<-l.kept
	l.mu.Lock()
	rev := l.rev
	l.mu.Unlock()
	return l.kv.Delete(ctx, l.key, jetstream.LastRevision(rev))
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// sleepUntil waits until t or until stop is closed.
func sleepUntil(t time.Time, stop <-chan struct{}) {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-stop:
	}
}

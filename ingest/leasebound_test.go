package ingest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// slowKV is a lease bucket whose answers the test holds back: what a worker meets while the
// bucket's stream elects a new leader or its connection moves to another server.
type slowKV struct {
	jetstream.KeyValue
	mu      sync.Mutex
	rev     uint64
	value   string
	updates atomic.Int64
	// getBlocks makes every Get wait until its context ends; loseUpdates makes that many
	// Updates land and then wait until their context ends (their answer lost).
	getBlocks   bool
	loseUpdates int
	// landed is called after an Update landed, before it answers.
	landed func()
}

type entry struct {
	jetstream.KeyValueEntry
	rev   uint64
	value string
}

func (e entry) Revision() uint64 { return e.rev }
func (e entry) Value() []byte    { return []byte(e.value) }

func (k *slowKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if k.getBlocks {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return entry{rev: k.rev, value: k.value}, nil
}

func (k *slowKV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	k.updates.Add(1)
	k.mu.Lock()
	if last != k.rev {
		k.mu.Unlock()
		return 0, jetstream.ErrKeyRevisionMismatch
	}
	k.rev++
	k.value = string(value)
	rev, lose := k.rev, k.loseUpdates > 0
	if lose {
		k.loseUpdates--
	}
	landed := k.landed
	k.mu.Unlock()
	if landed != nil {
		landed()
	}
	if lose {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return rev, nil
}

func (k *slowKV) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	return nil
}

// heldLease is a lease just created in kv; start begins its renewals.
func heldLease(kv *slowKV, ttl time.Duration) (l *Lease, start func()) {
	kv.rev, kv.value = 1, "me"
	l = &Lease{kv: kv, key: "demo", holder: "me", ttl: ttl, log: zap.NewNop(), rev: 1, epoch: 1, renewed: time.Now(),
		lost: make(chan struct{}), kept: make(chan struct{})}
	return l, func() { go l.keep() }
}

// TestLeaseCheckBoundedAndNeverHoldsTheRenewals: a fence check whose read gets no answer
// (the caller's context has no deadline, as a commit's has not) ends within the lease's TTL,
// and the renewals go on meanwhile. Before, the read held the renewals' lock and waited for
// JetStream's default timeout (5 s): longer than a 2 s TTL, which lapsed behind it.
func TestLeaseCheckBoundedAndNeverHoldsTheRenewals(t *testing.T) {
	const ttl = 600 * time.Millisecond
	kv := &slowKV{getBlocks: true}
	l, renew := heldLease(kv, ttl)
	renew()
	defer func() { _ = l.Release(context.Background()) }()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- l.Check(context.Background()) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * ttl):
		t.Fatalf("Check did not return within %v", 5*ttl)
	}
	if took := time.Since(start); took > ttl+200*time.Millisecond {
		t.Fatalf("Check took %v, want at most the TTL %v", took, ttl)
	}
	if !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Check: %v, want ErrLeaseLost", err)
	}
	if n := kv.updates.Load(); n < 1 {
		t.Fatalf("%d renewals while the check waited, want the renewals to go on", n)
	}
	if !errors.Is(l.Err(), ErrLeaseLost) || !strings.Contains(l.Err().Error(), "not confirmed") {
		t.Fatalf("lease lost for %v, want why", l.Err())
	}
}

// TestLeaseRenewalSurvivesALostAnswer: a renewal whose answer is lost (its connection moved to
// another server) is tried again, and the key, which the lost attempt did renew, is recognised
// as still ours: the lease is kept. Before, the first renewal without an answer lost the lease.
func TestLeaseRenewalSurvivesALostAnswer(t *testing.T) {
	const ttl = 900 * time.Millisecond
	kv := &slowKV{loseUpdates: 1}
	l, renew := heldLease(kv, ttl)
	renew()
	defer func() { _ = l.Release(context.Background()) }()
	time.Sleep(3 * ttl)
	if err := l.Err(); err != nil {
		t.Fatalf("lease lost: %v", err)
	}
	if err := l.Check(context.Background()); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if n := kv.updates.Load(); n < 3 {
		t.Fatalf("%d renewals, want the renewals to go on", n)
	}
}

// TestLeaseCheckDuringARenewal: a check that reads the key after a renewal landed but before
// the renewal recorded its revision takes it for ours (the renewals no longer wait for checks,
// nor checks for renewals).
func TestLeaseCheckDuringARenewal(t *testing.T) {
	const ttl = 600 * time.Millisecond
	kv := &slowKV{}
	checked := make(chan error, 1)
	var once sync.Once
	var l *Lease
	kv.landed = func() { once.Do(func() { checked <- l.Check(context.Background()) }) }
	l, renew := heldLease(kv, ttl)
	renew()
	defer func() { _ = l.Release(context.Background()) }()
	select {
	case err := <-checked:
		if err != nil {
			t.Fatalf("Check during a renewal: %v", err)
		}
	case <-time.After(2 * ttl):
		t.Fatal("no renewal")
	}
}

// TestLeaseRenewalRefusedSaysWhy: a renewal the bucket refuses (another revision holds the
// key) loses the lease at once, and Err says why.
func TestLeaseRenewalRefusedSaysWhy(t *testing.T) {
	const ttl = 300 * time.Millisecond
	kv := &slowKV{}
	l, renew := heldLease(kv, ttl)
	renew()
	kv.mu.Lock()
	kv.rev, kv.value = 7, "other"
	kv.mu.Unlock()
	select {
	case <-l.Lost():
	case <-time.After(3 * ttl):
		t.Fatal("the lease was not lost")
	}
	if err := l.Err(); !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), "renewal refused") {
		t.Fatalf("Err: %v", err)
	}
	if err := l.Check(context.Background()); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Check after the loss: %v", err)
	}
}

package memlimit

import (
	"context"
	"fmt"
	"runtime/debug"
	"testing"
	"time"
)

func TestPolicyLimit(t *testing.T) {
	const mib = 1 << 20
	p := Policy{Headroom: 64 * mib, Floor: 128 * mib}
	for _, c := range []struct {
		name                   string
		p                      Policy
		state, inFlight, bound int64
		want                   int64
	}{
		{"the state, the bound and the headroom", p, 200 * mib, 100 * mib, 128 * mib, 200*mib + 128*mib + 64*mib},
		{"counted past the bound: room for what is counted", p, 100 * mib, 300 * mib, 128 * mib, 100*mib + 300*mib + 64*mib},
		{"never below the floor", p, 1 * mib, 0, 1, 128 * mib},
		{"never above the ceiling", Policy{Headroom: 64 * mib, Floor: 128 * mib, Ceiling: 180 * mib}, 40 * mib, 0, 128 * mib, 180 * mib},
		{"the ceiling wins over the floor", Policy{Headroom: 64 * mib, Floor: 128 * mib, Ceiling: 90 * mib}, 0, 0, 0, 90 * mib},
	} {
		if got := c.p.Limit(c.state, c.inFlight, c.bound); got != c.want {
			t.Errorf("%s: %d MiB, want %d MiB", c.name, got/mib, c.want/mib)
		}
	}
}

// The state is the least of the last few: a while of more (a compaction) does not raise it,
// what stays does once the window has passed.
func TestWindowLeast(t *testing.T) {
	w := window{size: 3}
	var got []int64
	for _, v := range []int64{10, 50, 50, 9, 50, 50, 50, 60} {
		got = append(got, w.least(v))
	}
	if fmt.Sprint(got) != "[10 10 10 9 9 9 50 50]" {
		t.Fatal(got)
	}
}

func TestMoved(t *testing.T) {
	for _, c := range []struct {
		from, want, frac int64
		moved            bool
	}{
		{0, 100, 4, true},    // the first
		{100, 124, 4, false}, // under a quarter up
		{100, 125, 4, true},
		{100, 76, 4, false},
		{100, 75, 4, true},
		{3200, 3299, 32, false},
		{3200, 3300, 32, true},
	} {
		if got := moved(c.from, c.want, c.frac); got != c.moved {
			t.Errorf("moved(%d, %d, %d) = %v", c.from, c.want, c.frac, got)
		}
	}
}

// The governor sets the runtime's limit from the counts and the live heap, tells it once, and
// ends with its context.
func TestGovernorSetsTheLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	const bound = 1 << 40 // far above any live heap of this test, so the limit is known to a MiB
	told := make(chan int64, 16)
	g := &Governor{Policy: Policy{Headroom: 64 << 20, Floor: 128 << 20}, Period: time.Millisecond, StateWindow: 4,
		Counts:  func() (int64, int64) { return 0, bound },
		Changed: func(limit, _, _, _ int64) { told <- limit }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { g.Run(ctx); close(done) }()
	limit := <-told
	if limit < bound+64<<20 || limit > bound+64<<20+1<<30 {
		t.Fatalf("told %d, want the bound, the headroom and the live heap", limit)
	}
	if got := debug.SetMemoryLimit(-1); got != limit {
		t.Fatalf("the runtime's limit is %d, told %d", got, limit)
	}
	cancel()
	<-done
	if len(told) != 0 {
		t.Fatalf("told %d more times with nothing changed", len(told))
	}
}

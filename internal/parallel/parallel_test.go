package parallel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

func TestEachReportsTheFirstErrorInOrder(t *testing.T) {
	items := []int{0, 1, 2, 3, 4, 5, 6, 7}
	for _, limit := range []int{1, 3, 8} {
		var ran atomic.Int32
		err := Each(items, limit, func(i int) error {
			ran.Add(1)
			if i == 2 || i == 6 {
				time.Sleep(time.Duration(8-i) * time.Millisecond) // the later failure finishes first
				return fmt.Errorf("item %d", i)
			}
			return nil
		})
		if err == nil || err.Error() != "item 2" {
			t.Fatalf("limit %d: %v", limit, err)
		}
		if limit > 1 && ran.Load() != int32(len(items)) {
			t.Fatalf("limit %d: ran %d of %d", limit, ran.Load(), len(items))
		}
	}
}

func TestEachBoundsConcurrency(t *testing.T) {
	var cur, peak atomic.Int32
	err := Each(make([]int, 20), 3, func(int) error {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(time.Millisecond)
		cur.Add(-1)
		return nil
	})
	if err != nil || peak.Load() > 3 {
		t.Fatalf("peak %d, err %v", peak.Load(), err)
	}
	if Each([]int{}, 4, func(int) error { return errors.New("never") }) != nil {
		t.Fatal("no items, yet an error")
	}
}

// Callers sharing one Slots run at most its number of pieces together, a single item
// included, and still report the first error in item order.
func TestEachSlotSharesTheBound(t *testing.T) {
	slots := NewSlots(2)
	var cur, peak atomic.Int32
	work := func(int) error {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(2 * time.Millisecond)
		cur.Add(-1)
		return nil
	}
	errs := make(chan error, 4)
	for _, n := range []int{5, 3, 1, 1} {
		go func() { errs <- EachSlot(context.Background(), make([]int, n), slots, work) }()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if peak.Load() != 2 {
		t.Fatalf("peak %d across the callers, want 2", peak.Load())
	}
	err := EachSlot(context.Background(), []int{0, 1, 2, 3}, slots, func(i int) error {
		if i == 1 || i == 3 {
			time.Sleep(time.Duration(4-i) * time.Millisecond)
			return fmt.Errorf("item %d", i)
		}
		return nil
	})
	if err == nil || err.Error() != "item 1" {
		t.Fatalf("first error %v, want item 1", err)
	}
}

// A piece waiting for a slot when the context ends is not run; nil slots run in order.
func TestEachSlotStopsWaitingOnCancel(t *testing.T) {
	slots := NewSlots(1)
	slots.c <- struct{}{} // every slot taken
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var ran atomic.Int32
	err := EachSlot(ctx, []int{1, 2}, slots, func(int) error { ran.Add(1); return nil })
	if !errors.Is(err, context.Canceled) || ran.Load() != 0 {
		t.Fatalf("err %v, ran %d", err, ran.Load())
	}
	var order []int
	if err := EachSlot(context.Background(), []int{1, 2, 3}, nil, func(i int) error { order = append(order, i); return nil }); err != nil || fmt.Sprint(order) != "[1 2 3]" {
		t.Fatalf("nil slots: %v %v", order, err)
	}
}

func TestIndices(t *testing.T) {
	if got := Indices(4); !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Fatalf("Indices(4) = %v", got)
	}
	if got := Indices(0); len(got) != 0 {
		t.Fatalf("Indices(0) = %v", got)
	}
}

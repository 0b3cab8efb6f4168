// Package parallel runs independent pieces of work side by side with a bound, reporting
// errors deterministically.
package parallel

import (
	"context"
	"sync"
)

// Each runs fn over items, up to limit at once (limit <= 1: one at a time, in order), waits
// for all of them, and returns the first error in item order, so a parallel run reports the
// same failure a sequential one would.
func Each[T any](items []T, limit int, fn func(T) error) error {
	if len(items) <= 1 || limit <= 1 {
		for _, it := range items {
			if err := fn(it); err != nil {
				return err
			}
		}
		return nil
	}
	errs := make([]error, len(items))
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = fn(it)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Indices is 0, 1, …, n-1: the items of an Each or EachSlot over the positions of a slice
// whose pieces write their results into slices of their own, by position.
func Indices(n int) []int {
	at := make([]int, n)
	for i := range at {
		at[i] = i
	}
	return at
}

// Slots bounds work started from several places at once: a piece holds one slot while it
// runs (EachSlot), so pieces of different callers sharing one Slots run at most n together.
type Slots struct{ c chan struct{} }

// NewSlots returns Slots of n (at least 1).
func NewSlots(n int) *Slots { return &Slots{c: make(chan struct{}, max(n, 1))} }

// Do runs fn holding one slot; it waits for a slot until ctx ends, and then returns ctx's
// error without running fn.
func (s *Slots) Do(ctx context.Context, fn func() error) error {
	select {
	case s.c <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.c }()
	return fn()
}

// EachSlot runs fn over items, each in a goroutine of its own holding one of slots while fn
// runs, waits for all of them, and returns the first error in item order, as Each does. nil
// slots run them one at a time, in order. An item still waiting for a slot when ctx ends is
// not run and reports ctx's error.
func EachSlot[T any](ctx context.Context, items []T, slots *Slots, fn func(T) error) error {
	if slots == nil {
		return Each(items, 1, fn)
	}
	errs := make([]error, len(items))
	run := func(i int, it T) { errs[i] = slots.Do(ctx, func() error { return fn(it) }) }
	if len(items) == 1 {
		run(0, items[0])
		return errs[0]
	}
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(i, it)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Package parallel runs independent pieces of work side by side with a bound, reporting
// errors deterministically.
package parallel

import "sync"

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

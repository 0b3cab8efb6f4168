package recovery

import "context"

// Fence says whether the caller is still the graph's single writer (a leased worker checks
// that its lease still holds). An error means another writer may be live, so nothing more may
// be written. A nil Fence fences nothing: a process that is the only writer by construction
// (a direct tool, a test). It is called from several goroutines at once (the forks of one
// write each check it).
type Fence func(context.Context) error

// FenceError is a step refused because the writer's fence failed: that step wrote nothing.
type FenceError struct {
	Step string
	Err  error
}

func (e *FenceError) Error() string { return "fenced before " + e.Step + ": " + e.Err.Error() }

func (e *FenceError) Unwrap() error { return e.Err }

// Check runs the fence before step.
func (f Fence) Check(ctx context.Context, step string) error {
	if f == nil {
		return nil
	}
	if err := f(ctx); err != nil {
		return &FenceError{Step: step, Err: err}
	}
	return nil
}

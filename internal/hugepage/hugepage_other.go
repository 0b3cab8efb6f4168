//go:build !linux

package hugepage

// AdviseHeap does nothing where there are no transparent huge pages to ask for.
func AdviseHeap(n int) (Result, error) { return Result{}, nil }

//go:build !linux

package hugepage

import (
	"errors"
	"time"
)

// AdviseHeap does nothing where there are no transparent huge pages to ask for.
func AdviseHeap(n int) (Result, error) { return Result{}, nil }

// KernelMode is "": no transparent huge pages here.
func KernelMode() (string, error) { return "", nil }

// ErrUnsupported: FirstTouch needs Linux's madvise advice for each page size.
var ErrUnsupported = errors.New("hugepage: first-touch probe needs Linux")

// FirstTouch cannot tell page sizes apart here.
func FirstTouch(n int) (small, huge time.Duration, err error) { return 0, 0, ErrUnsupported }

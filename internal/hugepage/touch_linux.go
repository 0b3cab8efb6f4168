package hugepage

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// pageBytes is the small page the probe writes one byte of at a time: every page of the
// mapping is touched whatever size backs it.
const pageBytes = 4 << 10

// FirstTouch is what this host charges a process for n bytes of memory it never touched
// before, in each page size: two fresh anonymous mappings of n bytes (rounded up to whole huge
// pages), one advised MADV_NOHUGEPAGE and one MADV_HUGEPAGE, each written one byte per 4 KiB
// page, the small one first. Both stay mapped until both are measured, so the second cannot
// reuse the first's pages. Under transparent_hugepage=never the "huge" mapping gets small pages
// too; the caller reads the kernel's mode from AdviseHeap's Result or /sys.
//
// The figures are the host's at that moment: memory another process just freed costs far less
// than memory the hypervisor has taken back, so a probe is a reading, not a constant.
func FirstTouch(n int) (small, huge time.Duration, err error) {
	return firstTouch(n, nil)
}

// firstTouch is FirstTouch; inspect, when not nil, sees both touched spans before they are
// unmapped (the tests read how the kernel backed them).
func firstTouch(n int, inspect func(small, huge []byte)) (small, huge time.Duration, err error) {
	if n <= 0 {
		return 0, 0, fmt.Errorf("hugepage: first touch of %d bytes", n)
	}
	n = (n + hugePageBytes - 1) &^ (hugePageBytes - 1)
	var maps, spans [][]byte
	defer func() {
		for _, m := range maps {
			_ = unix.Munmap(m)
		}
	}()
	touch := func(advice int) (time.Duration, error) {
		// Room to align the advised range to huge pages at both ends, as AdviseHeap does.
		m, err := unix.Mmap(-1, 0, n+hugePageBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return 0, fmt.Errorf("hugepage: mmap %d bytes: %w", n, err)
		}
		maps = append(maps, m)
		skip := alignUp(m)
		span := m[skip : skip+n]
		spans = append(spans, span)
		if err := unix.Madvise(span, advice); err != nil {
			return 0, fmt.Errorf("hugepage: madvise: %w", err)
		}
		t0 := time.Now()
		for i := 0; i < len(span); i += pageBytes {
			span[i] = 1
		}
		return time.Since(t0), nil
	}
	if small, err = touch(unix.MADV_NOHUGEPAGE); err != nil {
		return 0, 0, err
	}
	if huge, err = touch(unix.MADV_HUGEPAGE); err != nil {
		return 0, 0, err
	}
	if inspect != nil {
		inspect(spans[0], spans[1])
	}
	return small, huge, nil
}

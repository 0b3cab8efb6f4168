package hugepage

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/omnigraph/omnigraph-worker/internal/memlimit"
)

const hugePageBytes = 2 << 20

// The kernel's transparent huge page setting (e.g. "always [madvise] never"), the machine's
// memory, and the cgroup file system holding a container's memory limit.
const (
	enabledPath = "/sys/kernel/mm/transparent_hugepage/enabled"
	meminfoPath = "/proc/meminfo"
	cgroupRoot  = "/sys/fs/cgroup"
)

// AdviseHeap advises the next n bytes of the Go heap's growth for transparent huge pages, at
// most a quarter of the memory the process may have (memoryOf). The span is one mapping, and
// the kernel's overcommit heuristic refuses a mapping larger than the memory it could ever
// back, which the runtime would treat as running out of memory; and the kernel may back
// memory the collector gave back with a huge page again (khugepaged fills the rest of a 2 MiB
// region a page of which is in use), so the span bounds how far the resident memory can stray
// above what the collector counts, which a container must have room for. Call it first thing
// in main, before the heap has free memory of its own: the span must come from fresh address
// space (which the runtime knows to be zero and does not touch), not from free pages the
// runtime would clear.
//
// Only the first call of a process does anything; later ones return its result.
func AdviseHeap(n int) (Result, error) {
	once.Do(func() { result, resultErr = adviseHeap(n, enabledPath, meminfoPath, cgroupRoot) })
	return result, resultErr
}

var (
	once      sync.Once
	result    Result
	resultErr error
)

func adviseHeap(n int, enabled, meminfo, cgroup string) (Result, error) {
	mode, err := kernelMode(enabled)
	if err != nil || mode != "madvise" || n <= 0 {
		return Result{Mode: mode}, err
	}
	if n = spanBytes(n, memoryOf(meminfo, cgroup)); n == 0 {
		return Result{Mode: mode}, nil
	}
	if free := heapFree(); free >= n/2 {
		// The span could come from pages the heap already has, which the runtime clears
		// (touching all of it) before handing them out: better no advice than that.
		return Result{Mode: mode}, fmt.Errorf("hugepage: the heap already holds %d free bytes: advise it before it grows", free)
	}
	span := make([]byte, n+hugePageBytes) // room to align both ends to huge pages
	skip := alignUp(span)
	err = unix.Madvise(span[skip:skip+n], unix.MADV_HUGEPAGE)
	runtime.KeepAlive(span) // the span is garbage from here on
	// Collect the span now and release it (never touched, releasing it is cheap): otherwise
	// the runtime counts it as retained memory until its scavenger gets to it, which a memory
	// limit would read as a full heap.
	debug.FreeOSMemory()
	if err != nil {
		return Result{Mode: mode}, fmt.Errorf("hugepage: madvise: %w", err)
	}
	return Result{Mode: mode, Advised: n}, nil
}

// alignUp is how many bytes into b its first huge page boundary lies.
func alignUp(b []byte) int {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return int((p+hugePageBytes-1)&^(hugePageBytes-1) - p)
}

// memoryOf is the memory the process may have: the machine's (MemTotal of meminfo), or its
// container's limit under cgroup when that is less; 0 when neither is known.
func memoryOf(meminfo, cgroup string) int {
	total, err := memTotal(meminfo)
	if err != nil {
		total = 0
	}
	if hard, ok := memlimit.FromCgroup(cgroup); ok && hard > 0 && (total == 0 || int(hard) < total) {
		total = int(hard)
	}
	return total
}

// spanBytes is the span to advise for a request of n: at most a quarter of total (memoryOf;
// 0 if unknown: no cap), in whole huge pages.
func spanBytes(n, total int) int {
	if total > 0 {
		n = min(n, total/4)
	}
	return n &^ (hugePageBytes - 1)
}

// heapFree is the memory the heap holds for reuse, released to the system or not.
func heapFree() int {
	s := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64() + s[1].Value.Uint64())
}

// KernelMode is the kernel's transparent huge page setting ("always", "madvise", "never"), as
// Result.Mode reports it: "" where the kernel has none.
func KernelMode() (string, error) { return kernelMode(enabledPath) }

// kernelMode reads the bracketed word of the setting at path; no file is no mode.
func kernelMode(path string) (string, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("hugepage: %w", err)
	}
	for _, w := range strings.Fields(string(b)) {
		if len(w) > 2 && w[0] == '[' && w[len(w)-1] == ']' {
			return w[1 : len(w)-1], nil
		}
	}
	return "", fmt.Errorf("hugepage: %s: no setting marked in %q", path, bytes.TrimSpace(b))
}

// memTotal is MemTotal of /proc/meminfo, in bytes.
func memTotal(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				return 0, fmt.Errorf("hugepage: %s: MemTotal %q", path, rest)
			}
			return kb << 10, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("hugepage: %s: no MemTotal", path)
}

// Package memlimit chooses the Go collector's soft memory limit: under the memory limit a
// container puts on this process, so that the collector runs before the kernel's OOM killer
// would, and by default in step with what the worker's pipelines may hold (Policy, Governor).
package memlimit

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FromCgroup returns the memory limit of the cgroup mounted at root (normally
// /sys/fs/cgroup): cgroup v2's memory.max, else cgroup v1's memory/memory.limit_in_bytes.
// ok is false when there is none: no file, "max", or v1's "unlimited" (a value near 2^63).
func FromCgroup(root string) (limit int64, ok bool) {
	for _, name := range []string{"memory.max", filepath.Join("memory", "memory.limit_in_bytes")} {
		raw, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(raw))
		if v == "max" {
			return 0, false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 || n >= math.MaxInt64/2 {
			return 0, false
		}
		return n, true
	}
	return 0, false
}

// Soft is the soft limit to give the collector under a hard limit: nine tenths of it, room
// for what the Go heap does not count (stacks, the OS's view of freed pages, cgo).
func Soft(hard int64) int64 { return hard / 10 * 9 }

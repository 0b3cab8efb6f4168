package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// What creating a file costs moves on this machine by up to forty times, and both sides of a
// paired line pay it for nearly every file they write (the worker about ten a commit, the
// official engine about eight a batch of two tables). The volume is ext4 without a journal:
// there the kernel, choosing an inode for a new file, passes over every free inode of the
// block group that was freed before the current second and less than 60 seconds ago (360
// while its inode table block is not yet written back), one by one, because without a journal
// it cannot be sure the deletion has reached the disk. Every deletion in the group, by any process, makes the next creations
// there dearer: in a quiet group creat(2) took 23-30 µs; in /tmp's group, where builds, tests
// and bench rounds delete thousands of files, 600-1,100 µs (performance.md, twenty-ninth
// session).

// createProbeFiles is how many files a probe creates: enough for a median, few enough that
// the probe (at about a millisecond a file on a bad minute) stays out of the round's way.
const createProbeFiles = 25

var createProbeSeq atomic.Int64

// createCost is the median wall time of creating an empty file in a directory of its own
// under parent, createProbeFiles times. The files are kept: deleting them would free inodes,
// which is what makes the creations after it dear.
func createCost(parent string) (time.Duration, error) {
	dir := filepath.Join(parent, "create-probe", strconv.FormatInt(createProbeSeq.Add(1), 10))
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return 0, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	took := make([]time.Duration, createProbeFiles)
	for i := range took {
		name := filepath.Join(dir, strconv.Itoa(i))
		t0 := time.Now()
		fd, err := syscall.Open(name, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC, 0o666)
		if err != nil {
			return 0, fmt.Errorf("create probe %s: %w", name, err)
		}
		took[i] = time.Since(t0)
		_ = syscall.Close(fd)
	}
	slices.Sort(took)
	return took[len(took)/2], nil
}

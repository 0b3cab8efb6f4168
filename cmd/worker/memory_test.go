package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestHugePageSpanFollowsTheContainerLimit(t *testing.T) {
	dir := t.TempDir()
	if got := hugePageSpan(1<<30, dir); got != 1<<30 {
		t.Errorf("no cgroup limit: %d, want the configured 1 GiB", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte("536870912\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := hugePageSpan(1<<30, dir); got != 128<<20 {
		t.Errorf("512 MiB container: %d, want a quarter of it", got)
	}
	if got := hugePageSpan(64<<20, dir); got != 64<<20 {
		t.Errorf("512 MiB container, 64 MiB configured: %d", got)
	}
	if got := hugePageSpan(0, dir); got != 0 {
		t.Errorf("turned off: %d", got)
	}
}

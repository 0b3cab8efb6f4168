package fstree

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSnapshotSeesEveryChange(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	snap := func(mtimes bool) string {
		t.Helper()
		s, err := Snapshot(dir, mtimes)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	write("a/b.txt", "12")
	write("c.txt", "1")
	if got := snap(false); got != "a/b.txt 2\nc.txt 1" {
		t.Fatalf("snapshot %q", got)
	}
	before, withTimes := snap(false), snap(true)
	// same size, rewritten later: only the mtime snapshot sees it
	time.Sleep(10 * time.Millisecond)
	write("c.txt", "2")
	if snap(false) != before || snap(true) == withTimes {
		t.Fatal("a rewrite of the same size: size snapshot changed or mtime snapshot did not")
	}
	write("d.txt", "")
	if snap(false) == before {
		t.Fatal("an added file went unseen")
	}
	if _, err := Snapshot(filepath.Join(dir, "missing"), false); err == nil {
		t.Fatal("a missing directory gave no error")
	}
}

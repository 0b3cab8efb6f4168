package storage_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// spareFiles lists the spare files (not the lock) of every process directory under root.
func spareFiles(t *testing.T, root string) []string {
	t.Helper()
	dirs, err := os.ReadDir(filepath.Join(root, storage.SpareDirName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range dirs {
		entries, err := os.ReadDir(filepath.Join(root, storage.SpareDirName, d.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Name() != ".lock" {
				out = append(out, filepath.Join(root, storage.SpareDirName, d.Name(), e.Name()))
			}
		}
	}
	return out
}

// filledSpares are the spare files under root that hold data: a write's, not yet published.
func filledSpares(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	for _, f := range spareFiles(t, root) {
		if fi, err := os.Stat(f); err == nil && fi.Size() > 0 {
			out = append(out, f)
		}
	}
	return out
}

// waitSpares waits until s has at least n spare files ready to take, and returns the spare
// files under root.
func waitSpares(t *testing.T, s storage.Store, root string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if storage.ReadySpares(s) >= n {
			return spareFiles(t, root)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d spares ready after 20s, want %d", storage.ReadySpares(s), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// warmSpares makes a first write on s, which starts the refill, and waits until n spares are
// ready; it returns the spare files under dir.
func warmSpares(t *testing.T, s storage.Store, dir string, n int) []string {
	t.Helper()
	if err := s.Put(t.Context(), "warm", nil); err != nil {
		t.Fatal(err)
	}
	return waitSpares(t, s, dir, n)
}

func openLocal(t *testing.T, dir string) storage.Store {
	t.Helper()
	s, err := storage.Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if !storage.KeepSpares(s) {
		t.Fatal("KeepSpares refused a local root")
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestLocalWritesUseSpareFiles: once spares are ready, Put and PutIfAbsent publish one of them
// (the same inode) instead of creating a file, and the object reads back exactly.
func TestLocalWritesUseSpareFiles(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openLocal(t, dir)
	spares := warmSpares(t, s, dir, storage.SpareTarget)
	var inodes []os.FileInfo
	for _, f := range spares {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		inodes = append(inodes, fi)
	}
	isSpare := func(key string) bool {
		fi, err := os.Stat(filepath.Join(dir, key))
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(inodes, func(s os.FileInfo) bool { return os.SameFile(s, fi) })
	}
	if err := s.Put(ctx, "t/data/a.lance", []byte("put bytes")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "t/_versions/1.manifest", []byte("manifest bytes")); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"t/data/a.lance": "put bytes", "t/_versions/1.manifest": "manifest bytes"} {
		if !isSpare(key) {
			t.Errorf("%s was not written through a spare file", key)
		}
		if got, err := s.Get(ctx, key); err != nil || string(got) != want {
			t.Errorf("Get(%s) = %q, %v", key, got, err)
		}
	}
	// A link leaves no second name behind: the spare's own name is gone.
	if n := len(spareFiles(t, dir)); n >= storage.SpareTarget+1 {
		t.Fatalf("%d spare files after two writes", n)
	}
	// PutIfAbsent on a taken name still refuses, through a spare too.
	if err := s.PutIfAbsent(ctx, "t/_versions/1.manifest", []byte("other")); !errors.Is(err, storage.ErrAlreadyExists) {
		t.Fatalf("second PutIfAbsent: %v", err)
	}
	if got, _ := s.Get(ctx, "t/_versions/1.manifest"); string(got) != "manifest bytes" {
		t.Fatalf("the winner's object changed: %q", got)
	}
}

// TestLocalSpareWithBytesIsEmptiedFirst: a spare is filled without truncating it on open (a
// truncation makes ext4 start the writeback in close); one that somehow holds bytes is still
// emptied, so the object is exactly what was written.
func TestLocalSpareWithBytesIsEmptiedFirst(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openLocal(t, dir)
	for _, f := range warmSpares(t, s, dir, storage.SpareTarget) {
		if err := os.WriteFile(f, []byte("stale bytes, longer than the object"), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	for i, key := range []string{"t/data/a.lance", "t/data/b.lance"} {
		want := fmt.Sprintf("new %d", i)
		if err := s.Put(ctx, key, []byte(want)); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Get(ctx, key); err != nil || string(got) != want {
			t.Fatalf("Get(%s) = %q, %v; want %q", key, got, err, want)
		}
	}
}

// TestLocalReplaceUsesASpare: ReplaceIfUnchanged exchanges a spare file with the object (a
// recovery sidecar's confirmation creates no file), leaves no bytes behind in the spares
// whether it replaced or refused, and re-creates nothing for a gone object, not even its
// directory.
func TestLocalReplaceUsesASpare(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openLocal(t, dir)
	warmSpares(t, s, dir, storage.SpareTarget)
	if err := s.Put(ctx, "__recovery/op.json", []byte("armed")); err != nil {
		t.Fatal(err)
	}
	var spares []os.FileInfo // the supply is still above the refill's mark: no refill runs
	for _, f := range spareFiles(t, dir) {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		spares = append(spares, fi)
	}
	if err := s.ReplaceIfUnchanged(ctx, "__recovery/op.json", []byte("armed"), []byte("confirmed")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "__recovery", "op.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(spares, func(s os.FileInfo) bool { return os.SameFile(s, fi) }) {
		t.Error("the replace did not publish a spare file")
	}
	if err := s.ReplaceIfUnchanged(ctx, "__recovery/op.json", []byte("armed"), []byte("stale")); !errors.Is(err, storage.ErrChanged) {
		t.Fatalf("replace of a changed object: %v", err)
	}
	if got, err := s.Get(ctx, "__recovery/op.json"); err != nil || string(got) != "confirmed" {
		t.Fatalf("Get = %q, %v; want the confirmed bytes", got, err)
	}
	if err := s.ReplaceIfUnchanged(ctx, "gone/op.json", []byte("armed"), []byte("confirmed")); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("replace of a gone object: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "gone")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the replace of a gone object made its directory: %v", err)
	}
	if left := filledSpares(t, dir); len(left) != 0 {
		t.Fatalf("spares holding bytes after the replaces: %v", left)
	}
	if entries, err := os.ReadDir(filepath.Join(dir, "__recovery")); err != nil || len(entries) != 1 {
		t.Fatalf("__recovery holds %v (%v), want op.json alone", entries, err)
	}
}

// TestLocalWritesAcrossAMountPoint: a directory of the root on another file system than its
// spares (a mount point inside the root) is written all the same: where a spare cannot be
// renamed, linked or exchanged into it (EXDEV), Put, PutIfAbsent and ReplaceIfUnchanged write
// a temporary file beside the object instead.
func TestLocalWritesAcrossAMountPoint(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs inside the root needs root") // CI runs as root
	}
	ctx := t.Context()
	dir := t.TempDir()
	s := openLocal(t, dir)
	warmSpares(t, s, dir, storage.SpareTarget)
	mnt := filepath.Join(dir, "__recovery")
	if err := os.Mkdir(mnt, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount a tmpfs on %s: %v", mnt, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(mnt, syscall.MNT_DETACH) })
	if err := s.Put(ctx, "__recovery/op.json", []byte("armed")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "__recovery/claim", []byte("mine")); err != nil {
		t.Fatal(err)
	}
	if err := s.ReplaceIfUnchanged(ctx, "__recovery/op.json", []byte("armed"), []byte("confirmed")); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"__recovery/op.json": "confirmed", "__recovery/claim": "mine"} {
		if got, err := s.Get(ctx, key); err != nil || string(got) != want {
			t.Errorf("Get(%s) = %q, %v; want %q", key, got, err, want)
		}
	}
	if left := filledSpares(t, dir); len(left) != 0 {
		t.Fatalf("spares holding bytes after the writes: %v", left)
	}
	if entries, err := os.ReadDir(mnt); err != nil || len(entries) != 2 {
		t.Fatalf("the mounted directory holds %v (%v), want the two objects alone", entries, err)
	}
}

// TestLocalSpareDirIsHidden: listings never show the spare directory, its keys are refused,
// and emptying the root empties it of spares.
func TestLocalSpareDirIsHidden(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openLocal(t, dir)
	if err := s.Put(ctx, "a/b", []byte("1")); err != nil {
		t.Fatal(err)
	}
	waitSpares(t, s, dir, 1)
	objs, err := s.List(ctx, "")
	if err != nil || len(objs) != 1 || objs[0].Key != "a/b" {
		t.Fatalf("List(\"\") = %v, %v; want only a/b", objs, err)
	}
	files, dirs, err := s.ListDir(ctx, "")
	if err != nil || len(files) != 0 || !slices.Equal(dirs, []string{"a"}) {
		t.Fatalf("ListDir(\"\") = %v %v, %v; want only dir a", files, dirs, err)
	}
	for _, key := range []string{storage.SpareDirName, storage.SpareDirName + "/p1/1"} {
		if err := s.Put(ctx, key, nil); !errors.Is(err, storage.ErrInvalidKey) {
			t.Errorf("Put(%s): %v, want ErrInvalidKey", key, err)
		}
		if _, err := s.List(ctx, key); !errors.Is(err, storage.ErrInvalidKey) {
			t.Errorf("List(%s): %v, want ErrInvalidKey", key, err)
		}
	}
	// In a Sub the name is an ordinary key: only the root's spare directory is reserved.
	if err := s.Sub("a").Put(ctx, storage.SpareDirName+"/x", []byte("2")); err != nil {
		t.Fatal(err)
	}
	if err := s.DeletePrefix(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Fatalf("root after DeletePrefix(\"\"): %v, %v; want it empty", entries, err)
	}
	if err := s.Put(ctx, "c", []byte("3")); err != nil { // and writes go on afterwards
		t.Fatal(err)
	}
	waitSpares(t, s, dir, 1)
}

// TestLocalSpareFailuresFallBack: a spare that vanished under the writer (another process
// emptied the root) is skipped, and the write creates its own file.
func TestLocalSpareFailuresFallBack(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openLocal(t, dir)
	for _, f := range warmSpares(t, s, dir, storage.SpareTarget) {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(ctx, "k", []byte("fallback")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "m", []byte("fallback too")); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"k": "fallback", "m": "fallback too"} {
		if got, err := s.Get(ctx, key); err != nil || string(got) != want {
			t.Fatalf("Get(%s) = %q, %v", key, got, err)
		}
	}
}

// TestLocalSparesPerProcess: two stores on one root keep separate, locked directories; one
// whose lock is free (its process is gone) is removed by the next store to start, with any
// half-filled spare in it; Close removes a store's own directory.
func TestLocalSparesPerProcess(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	abandoned := filepath.Join(dir, storage.SpareDirName, "pdead")
	if err := os.MkdirAll(abandoned, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{".lock", "1", "2"} {
		if err := os.WriteFile(filepath.Join(abandoned, name), []byte("half-filled"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a, err := storage.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	storage.KeepSpares(a)
	b := openLocal(t, dir)
	if err := a.Put(ctx, "from-a", nil); err != nil {
		t.Fatal(err)
	}
	// The store's first refill removes the abandoned directory before it makes its own.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(abandoned); errors.Is(err, os.ErrNotExist) {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("abandoned spare directory survived: %v", err)
		}
	}
	if err := b.Put(ctx, "from-b", nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		entries, err := os.ReadDir(filepath.Join(dir, storage.SpareDirName))
		if err != nil {
			t.Fatal(err)
		}
		locked := 0 // a directory is made before its lock file
		for _, e := range entries {
			if _, err := os.Stat(filepath.Join(dir, storage.SpareDirName, e.Name(), ".lock")); err == nil {
				locked++
			}
		}
		if len(entries) == 2 && locked == 2 {
			break // each store has its own directory, and neither removed the other's
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d spare directories, want 2", len(entries))
		}
		time.Sleep(5 * time.Millisecond)
	}
	// a's directory is locked while a is open.
	for _, e := range mustReadDir(t, filepath.Join(dir, storage.SpareDirName)) {
		f, err := os.Open(filepath.Join(dir, storage.SpareDirName, e.Name(), ".lock"))
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
			t.Errorf("spare directory %s of an open store is not locked", e.Name())
		}
		f.Close()
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(mustReadDir(t, filepath.Join(dir, storage.SpareDirName))); n != 1 {
		t.Fatalf("%d spare directories after closing one store, want 1", n)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, storage.SpareDirName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("spare directory left after the last store closed: %v", err)
	}
}

func mustReadDir(t *testing.T, dir string) []os.DirEntry {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// TestKeepSparesOnlyForLocalRoots: mem and Sub stores keep none, and a plain local root
// creates no spare directory.
func TestKeepSparesOnlyForLocalRoots(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	plain, err := storage.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.Put(ctx, "k", nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(dir, storage.SpareDirName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a store without KeepSpares made spares: %v", err)
	}
	mem, err := storage.Open(ctx, "mem://keep-spares")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if storage.KeepSpares(mem) || storage.KeepSpares(plain.Sub("a")) {
		t.Fatal("KeepSpares took a mem store or a Sub")
	}
}

const spareCrashEnv = "STORAGE_TEST_SPARE_CRASH_CHILD" // the root directory

// TestLocalSpareCrash kills a writer after it filled a spare and before it published it: the
// object is absent, nothing half-written is listed, and the next process to keep spares in the
// root removes the dead one's directory.
func TestLocalSpareCrash(t *testing.T) {
	if dir := os.Getenv(spareCrashEnv); dir != "" {
		s := openLocal(t, dir)
		if err := s.Put(t.Context(), "warm", []byte("w")); err != nil {
			t.Fatal(err)
		}
		waitSpares(t, s, dir, 1)
		_ = s.Put(t.Context(), "victim", []byte("never published")) // killed in here
		t.Fatal("the failpoint did not kill the writer")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLocalSpareCrash$", "-test.count=1")
	cmd.Env = append(os.Environ(), spareCrashEnv+"="+dir, failpoint.EnvVar+"="+storage.FailpointSpareFilled+"=kill")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child was not killed at %s: %v\n%s", storage.FailpointSpareFilled, err, out)
	}
	if filled := filledSpares(t, dir); len(filled) != 1 {
		t.Fatalf("%d filled spares left by the killed writer, want 1", len(filled))
	}
	s := openLocal(t, dir)
	if objs, err := s.List(t.Context(), ""); err != nil || len(objs) != 1 || objs[0].Key != "warm" {
		t.Fatalf("after the crash List = %v, %v; want only warm", objs, err)
	}
	if err := s.Put(t.Context(), "after", []byte("a")); err != nil {
		t.Fatal(err)
	}
	waitSpares(t, s, dir, 1)
	if filled := filledSpares(t, dir); len(filled) > 0 {
		t.Fatalf("the dead writer's filled spare %s survived", filled[0])
	}
	if n := len(mustReadDir(t, filepath.Join(dir, storage.SpareDirName))); n != 1 {
		t.Fatalf("%d spare directories, want only the live store's", n)
	}
}

// An injected error after the fill leaves nothing behind: no object, no filled spare.
func TestLocalSpareFailpointError(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openLocal(t, dir)
	warmSpares(t, s, dir, 1)
	if err := failpoint.Enable(storage.FailpointSpareFilled, "error"); err != nil {
		t.Fatal(err)
	}
	err := s.Put(ctx, "k", []byte("x"))
	failpoint.Disable(storage.FailpointSpareFilled)
	if !failpoint.IsInjected(err) {
		t.Fatalf("Put: %v, want the injected failure", err)
	}
	if ok, _ := s.Exists(ctx, "k"); ok {
		t.Fatal("a failed Put published its object")
	}
	if filled := filledSpares(t, dir); len(filled) > 0 {
		t.Fatalf("filled spare %s left behind", filled[0])
	}
}

// A process's spare directory that vanished (another process judged it abandoned in the
// instant before it was locked) is made afresh: writes go on, through spares again.
func TestLocalSpareDirVanishes(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openLocal(t, dir)
	warmSpares(t, s, dir, storage.SpareTarget)
	if err := os.RemoveAll(filepath.Join(dir, storage.SpareDirName)); err != nil {
		t.Fatal(err)
	}
	for i := range 3 * storage.SpareTarget {
		if err := s.Put(ctx, fmt.Sprintf("k%d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	waitSpares(t, s, dir, 1)
}

// TestLiveWriters: a store keeping spares is seen, with its pid, by any other handle on the
// root while it is open; an abandoned spare directory, a closed store and a mem root are not.
func TestLiveWriters(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	plain, err := storage.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	live := func() []int {
		t.Helper()
		pids, err := storage.LiveWriters(plain)
		if err != nil {
			t.Fatal(err)
		}
		return pids
	}
	if p := live(); p != nil {
		t.Fatalf("live writers on a fresh root: %v", p)
	}
	abandoned := filepath.Join(dir, storage.SpareDirName, "pdead")
	if err := os.MkdirAll(abandoned, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(abandoned, ".lock"), []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p := live(); p != nil {
		t.Fatalf("an abandoned spare directory counted as a live writer: %v", p)
	}
	w, err := storage.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	storage.KeepSpares(w)
	if err := w.Put(ctx, "x", []byte("x")); err != nil { // starts the refill, which locks its directory
		t.Fatal(err)
	}
	waitSpares(t, w, dir, 1)
	if p := live(); !slices.Equal(p, []int{os.Getpid()}) {
		t.Fatalf("live writers %v, want [%d]", p, os.Getpid())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if p := live(); p != nil {
		t.Fatalf("live writers after the writer closed: %v", p)
	}
	mem, err := storage.Open(ctx, "mem://live-writers")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if p, err := storage.LiveWriters(mem); p != nil || err != nil {
		t.Fatalf("mem root: %v %v", p, err)
	}
}

// A write right after a drain (DeletePrefix of the whole root), while the refill of the drained
// generation is still finishing its file, gets spares again: that refill carries on for the
// new generation instead of ending with no refill scheduled until some later write.
func TestSparesRefillAfterDrainRace(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openLocal(t, dir)
	// The first refill stops for half a second right after creating its first spare.
	if err := failpoint.Enable(storage.FailpointSpareCreated, "1*sleep(500)"); err != nil {
		t.Fatal(err)
	}
	defer failpoint.Disable(storage.FailpointSpareCreated)
	if err := s.Put(ctx, "a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the refill is inside its pause now
	if err := s.DeletePrefix(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "b", []byte("2")); err != nil { // wants spares while that refill still runs
		t.Fatal(err)
	}
	waitSpares(t, s, dir, 1)
}

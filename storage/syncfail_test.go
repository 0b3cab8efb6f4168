package storage

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
)

// failDirSyncs fails each directory sync with what fail returns for its directory (nil: the
// real sync) until the end of the test, and clears the latched failure then: the latch outlives
// everything but the process, and the next test is a new process as far as it should know.
func failDirSyncs(t *testing.T, fail func(dir string) error) {
	t.Helper()
	t.Cleanup(clearSyncFailure) // after the swap's cleanup: no sync left to latch
	var mu sync.Mutex
	swapFsyncDir(t, func(real func(string) error) func(string) error {
		return func(dir string) error {
			mu.Lock()
			err := fail(dir)
			mu.Unlock()
			if err != nil {
				return err
			}
			return real(dir)
		}
	})
}

// clearSyncFailure forgets the latched directory sync failure (tests only).
func clearSyncFailure() {
	syncer.mu.Lock()
	syncer.failure.Store(nil)
	syncer.mu.Unlock()
}

// requireSyncFailed fails the test unless err is the latched failure of a sync of dir with
// errno.
func requireSyncFailed(t *testing.T, what string, err error, dir string, errno syscall.Errno) {
	t.Helper()
	var se *SyncError
	if !errors.As(err, &se) || !errors.Is(err, ErrSyncFailed) || !errors.Is(err, errno) {
		t.Fatalf("%s: want the latched sync failure (%v), got %v", what, errno, err)
	}
	if se.Dir != dir || !strings.Contains(err.Error(), dir) {
		t.Fatalf("%s: the failure names %q, want %q: %v", what, se.Dir, dir, err)
	}
}

// A directory sync that fails (EIO, as a failing disk's does) is latched: the Put whose name it
// was to make durable has returned, but nothing the process writes afterwards, on any root with
// fsync on, is published or removed, and every call that promises durability says so. A root
// without fsync promises nothing and goes on.
func TestFailedDirSyncFailsEveryLaterWrite(t *testing.T) {
	ctx := context.Background()
	st, root := openTestLocal(t, true)
	data := filepath.Join(root, "data")
	if err := st.Put(ctx, "data/keep", []byte("k")); err != nil { // the directory exists, durably
		t.Fatal(err)
	}
	failDirSyncs(t, func(dir string) error {
		if dir == data {
			return syscall.EIO
		}
		return nil
	})
	if err := st.Put(ctx, "data/a.lance", []byte("a")); err != nil {
		t.Fatalf("the Put returns before its directory sync: %v", err)
	}
	_ = wait(syncer.barrier()) // the sync has failed now

	err := st.Put(ctx, "_versions/1.manifest", []byte("m"))
	requireSyncFailed(t, "a later Put", err, data, syscall.EIO)
	var oe *OpError
	if !errors.As(err, &oe) || oe.Op != opPut || oe.Key != "_versions/1.manifest" {
		t.Fatalf("want the OpError of the Put, got %#v", err)
	}
	if Classify(err) != Transient {
		t.Fatalf("class %v, want transient: a new process on a mended disk goes on", Classify(err))
	}
	requireSyncFailed(t, "PutIfAbsent", st.PutIfAbsent(ctx, "_versions/2.manifest", []byte("m")), data, syscall.EIO)
	for _, k := range []string{"_versions/1.manifest", "_versions/2.manifest"} {
		if _, err := os.Stat(filepath.Join(root, k)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s was published after the failure: %v", k, err)
		}
	}
	requireSyncFailed(t, "ReplaceIfUnchanged", st.ReplaceIfUnchanged(ctx, "data/keep", []byte("k"), []byte("k2")), data, syscall.EIO)
	requireSyncFailed(t, "Compose", Compose(ctx, st, "composed", []Part{{Data: []byte("c")}}), data, syscall.EIO)
	requireSyncFailed(t, "Delete", st.Delete(ctx, "data/keep"), data, syscall.EIO)
	requireSyncFailed(t, "DeletePrefix", st.DeletePrefix(ctx, "data/"), data, syscall.EIO)
	if b, err := os.ReadFile(filepath.Join(data, "keep")); err != nil || string(b) != "k" {
		t.Fatalf("a replace or delete went through after the failure: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(root, "composed")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a composition was published after the failure: %v", err)
	}
	requireSyncFailed(t, "Sync", Sync(ctx, st), data, syscall.EIO)
	requireSyncFailed(t, "SyncNames", SyncNames(ctx, st, []string{"data/a.lance"}), data, syscall.EIO)

	other, _ := openTestLocal(t, true)
	requireSyncFailed(t, "a Put to another root", other.Put(ctx, "x", []byte("x")), data, syscall.EIO)
	requireSyncFailed(t, "its Close", other.Close(), data, syscall.EIO)

	unsynced, _ := openTestLocal(t, false)
	if err := unsynced.PutIfAbsent(ctx, "x", []byte("x")); err != nil {
		t.Fatalf("a root without fsync promises nothing, and is not stopped: %v", err)
	}
	if err := unsynced.Delete(ctx, "x"); err != nil {
		t.Fatal(err)
	}
}

// A PutIfAbsent is durable when it returns: when its own directory's sync fails it fails, its
// name in place (visible to this process, maybe not after a power loss), so the commit it was
// is never acknowledged. Under DeferDirSync it returns as a Put does, and the next write fails.
// A ReplaceIfUnchanged is the same.
func TestPutIfAbsentFailsWhenItsOwnDirSyncFails(t *testing.T) {
	ctx := context.Background()
	st, root := openTestLocal(t, true)
	versions := filepath.Join(root, "_versions")
	if err := st.Put(ctx, "_versions/0.manifest", []byte("0")); err != nil {
		t.Fatal(err)
	}
	failDirSyncs(t, func(dir string) error {
		if dir == versions {
			return syscall.EIO
		}
		return nil
	})
	if err := st.PutIfAbsent(DeferDirSync(ctx), "_versions/1.manifest", []byte("1")); err != nil {
		t.Fatalf("deferred: returns before the sync: %v", err)
	}
	requireSyncFailed(t, "the next PutIfAbsent", st.PutIfAbsent(ctx, "_versions/2.manifest", []byte("2")), versions, syscall.EIO)

	clearSyncFailure()
	err := st.PutIfAbsent(ctx, "_versions/3.manifest", []byte("3"))
	requireSyncFailed(t, "a PutIfAbsent whose own sync fails", err, versions, syscall.EIO)
	if b, rerr := os.ReadFile(filepath.Join(versions, "3.manifest")); rerr != nil || string(b) != "3" {
		t.Fatalf("the name was linked before its sync: %q, %v", b, rerr)
	}

	clearSyncFailure() // a replace waits for its own directory's sync as well
	err = st.ReplaceIfUnchanged(ctx, "_versions/0.manifest", []byte("0"), []byte("r"))
	requireSyncFailed(t, "a replace whose own sync fails", err, versions, syscall.EIO)
	if b, rerr := os.ReadFile(filepath.Join(versions, "0.manifest")); rerr != nil || string(b) != "r" {
		t.Fatalf("the replace was in place before its sync: %q, %v", b, rerr)
	}
}

// A new directory's name is made durable in its parent before anything is published inside:
// when that sync fails, the write that needed the directory fails.
func TestFailedParentSyncFailsTheWriteIntoANewDirectory(t *testing.T) {
	ctx := context.Background()
	st, root := openTestLocal(t, true)
	failDirSyncs(t, func(dir string) error {
		if dir == filepath.Join(root, "_indices") {
			return syscall.EIO
		}
		return nil
	})
	err := st.Put(ctx, "_indices/u1/page_data.lance", []byte("p"))
	requireSyncFailed(t, "a Put into a new directory", err, filepath.Join(root, "_indices"), syscall.EIO)
	if _, serr := os.Stat(filepath.Join(root, "_indices/u1/page_data.lance")); !errors.Is(serr, os.ErrNotExist) {
		t.Fatalf("published into a directory whose name is not durable: %v", serr)
	}
}

// What a file system that does not sync directories answers (EINVAL, ENOTSUP), and a directory
// removed before its sync, are not failures: writes go on.
func TestDirSyncRefusalIsNotAFailure(t *testing.T) {
	ctx := context.Background()
	if err := fsyncDir(filepath.Join(t.TempDir(), "gone")); err != nil {
		t.Fatalf("a directory removed before its sync: %v", err)
	}
	st, _ := openTestLocal(t, true)
	refusals := []error{syscall.EINVAL, syscall.ENOTSUP, syscall.EOPNOTSUPP}
	n := 0
	failDirSyncs(t, func(string) error {
		n++
		return refusals[n%len(refusals)]
	})
	for _, k := range []string{"a/1", "a/2", "b/1"} {
		if err := st.PutIfAbsent(ctx, k, []byte(k)); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
	if err := Sync(ctx, st); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no directory was synced")
	}
}

// The failpoint storage.dir_sync fails a sync as the disk would, and it is latched the same way
// (the engine's and the worker's tests arm it from outside the package).
func TestDirSyncFailpoint(t *testing.T) {
	ctx := context.Background()
	st, root := openTestLocal(t, true)
	failDirSyncs(t, func(string) error { return nil })
	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable(FailpointDirSync, "1*error(EIO)"); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "k", []byte("x")); err != nil {
		t.Fatal(err)
	}
	_ = wait(syncer.barrier()) // the injected failure has fired
	failpoint.Reset()
	err := st.Put(ctx, "k2", []byte("x"))
	requireSyncFailed(t, "after the injected failure", err, root, syscall.EIO)
	if !failpoint.IsInjected(err) {
		t.Fatalf("want the injected failure in the chain: %v", err)
	}
}

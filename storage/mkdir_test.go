package storage

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// traceEvents collects every syncEvent until the test ends.
func traceEvents(t *testing.T) func() []syncEvent {
	t.Helper()
	var mu sync.Mutex
	var evs []syncEvent
	t.Cleanup(setTrace(func(ev syncEvent) {
		mu.Lock()
		evs = append(evs, ev)
		mu.Unlock()
	}))
	return func() []syncEvent {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(evs)
	}
}

// syncedAfter reports whether a sync of dir started after index from and ended before index
// before (the syncs of one directory never overlap).
func syncedAfter(evs []syncEvent, dir string, from, before int) bool {
	start := -1
	for i := 0; i < before && i < len(evs); i++ {
		if evs[i].Path != dir {
			continue
		}
		switch evs[i].Kind {
		case eventDirSyncStart:
			start = i
		case eventDirSyncDone:
			if start > from {
				return true
			}
		}
	}
	return false
}

// A write into directories that do not exist yet creates them outermost first, and publishes
// its name only once each one's own name is durable: its parent synced after its creation.
// A write into directories that exist creates and syncs nothing more.
func TestWriteIntoNewDirectoriesSyncsTheirParentsFirst(t *testing.T) {
	s, root := openTestLocal(t, true)
	ctx := context.Background()
	events := traceEvents(t)
	if err := s.Put(ctx, "tables/t1/_indices/u1/page_data.lance", []byte("x")); err != nil {
		t.Fatal(err)
	}
	evs := events()
	want := []string{"tables", "tables/t1", "tables/t1/_indices", "tables/t1/_indices/u1"}
	var created []string
	published := slices.IndexFunc(evs, func(ev syncEvent) bool { return ev.Kind == eventPublished })
	if published < 0 {
		t.Fatal("nothing published")
	}
	for i, ev := range evs {
		if ev.Kind != eventDirCreated {
			continue
		}
		rel, _ := filepath.Rel(root, ev.Path)
		created = append(created, filepath.ToSlash(rel))
		if i > published {
			t.Errorf("%s created after the name was published", rel)
		}
		if !syncedAfter(evs, filepath.Dir(ev.Path), i, published) {
			t.Errorf("the name of %s was published into it before its parent was synced after its creation", rel)
		}
	}
	if !slices.Equal(created, want) {
		t.Fatalf("created %v, want %v", created, want)
	}

	// Into the same directory again: nothing created, one sync (of the file's directory).
	before := len(evs)
	if err := s.Put(ctx, "tables/t1/_indices/u1/other.lance", []byte("y")); err != nil {
		t.Fatal(err)
	}
	if err := Sync(ctx, s); err != nil {
		t.Fatal(err)
	}
	for _, ev := range events()[before:] {
		if ev.Kind == eventDirCreated || (ev.Kind == eventDirSyncStart && ev.Path != filepath.Join(root, "tables/t1/_indices/u1")) {
			t.Errorf("a write into existing directories traced %+v", ev)
		}
	}
}

// Writes that need the same missing directory at once: one creates it, and none publishes into
// it (nor returns) while the sync that makes its name durable is held.
func TestConcurrentWritesIntoOneNewDirectoryWaitForItsCreation(t *testing.T) {
	s, root := openTestLocal(t, true)
	ctx := context.Background()
	tables := filepath.Join(root, "tables")
	if err := os.Mkdir(tables, 0o777); err != nil {
		t.Fatal(err)
	}
	g := gateDirSyncs(t)
	release := g.hold(tables) // the sync that makes tables/t1's name durable
	events := traceEvents(t)
	const writers = 8
	done := make(chan error, writers)
	for i := range writers {
		go func() { done <- s.Put(ctx, "tables/t1/data/f"+string(rune('a'+i)), []byte("x")) }()
	}
	g.waitStart(t, tables)
	select {
	case err := <-done:
		t.Fatalf("a write returned (%v) while its directory's name was not durable", err)
	case <-time.After(50 * time.Millisecond):
	}
	for _, ev := range events() {
		if ev.Kind == eventPublished {
			t.Fatalf("%s published while its directory's name was not durable", ev.Path)
		}
	}
	release()
	for range writers {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for _, ev := range events() {
		if ev.Kind == eventDirCreated {
			n++
		}
	}
	if n != 2 { // tables/t1 and tables/t1/data, each once
		t.Fatalf("%d directory creations traced for 8 writes into one new directory, want 2", n)
	}
	if c := g.n(tables); c != 1 {
		t.Fatalf("tables/ synced %d times for one directory created in it, want 1", c)
	}
}

// A directory found in place while another write of this process is still making its name
// durable is waited for, not published into.
func TestExistingDirectoryUnderCreationIsWaitedFor(t *testing.T) {
	_, root := openTestLocal(t, true)
	dir := filepath.Join(root, "d")
	mine, theirs, err := claimMissing(dir)
	if err != nil || theirs != nil || !slices.Equal(mine, []string{dir}) {
		t.Fatalf("claim: %v %v %v", mine, theirs, err)
	}
	if err := os.Mkdir(dir, 0o777); err != nil { // made, not yet durable
		t.Fatal(err)
	}
	returned := make(chan error, 1)
	go func() { returned <- makeDirs(dir, true) }()
	select {
	case err := <-returned:
		t.Fatalf("makeDirs returned (%v) while the directory's creation was under way", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := createDurably(mine); err != nil {
		t.Fatal(err)
	}
	if err := <-returned; err != nil {
		t.Fatal(err)
	}
}

// A new root's own directory is created durably too.
func TestOpenCreatesTheRootDurably(t *testing.T) {
	parent := t.TempDir()
	events := traceEvents(t)
	dir := filepath.Join(parent, "graph")
	st, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs := events()
	c := slices.IndexFunc(evs, func(ev syncEvent) bool { return ev.Kind == eventDirCreated && ev.Path == dir })
	if c < 0 || !syncedAfter(evs, parent, c, len(evs)) {
		t.Fatalf("the root %s was not created durably: %+v", dir, evs)
	}
}

// A directory reached through a symbolic link is a directory, as os.MkdirAll has it: a root
// (or any directory above a new one) may be a link to where the data lives.
func TestNewDirectoriesUnderALinkedRoot(t *testing.T) {
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "graph")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	st, err := Open(context.Background(), link)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Put(context.Background(), "tables/t1/data/f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(real, "tables/t1/data/f")); err != nil {
		t.Fatal(err)
	}
}

// Without fsync directories are made as os.MkdirAll makes them: nothing synced or traced.
func TestNewDirectoriesWithoutFsync(t *testing.T) {
	s, root := openTestLocal(t, false)
	g := gateDirSyncs(t)
	events := traceEvents(t)
	if err := s.Put(context.Background(), "a/b/c/f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "a/b/c/f")); err != nil {
		t.Fatal(err)
	}
	if n := g.n(root) + g.n(filepath.Join(root, "a")) + g.n(filepath.Join(root, "a/b")); n != 0 || len(events()) != 0 {
		t.Fatalf("durability=none synced %d directories, traced %v", n, events())
	}
}

// A file where a directory must go fails the write with ENOTDIR, and releases its claim: a
// later write there fails the same way instead of waiting forever.
func TestFileInTheWayOfANewDirectory(t *testing.T) {
	s, root := openTestLocal(t, true)
	ctx := context.Background()
	if err := os.WriteFile(filepath.Join(root, "a"), []byte("x"), 0o666); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		err := s.Put(ctx, "a/b/f", []byte("x"))
		if !errors.Is(err, syscall.ENOTDIR) {
			t.Fatalf("Put under a file: %v, want ENOTDIR", err)
		}
	}
	dirCreations.mu.Lock()
	n := len(dirCreations.now)
	dirCreations.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d directory claims left", n)
	}
}

package storage

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// gatedSyncs replaces the directory sync with one that counts and blocks on the directories
// held (until released). It restores the real one at the end of the test.
type gatedSyncs struct {
	mu      sync.Mutex
	count   map[string]int
	held    map[string]chan struct{}
	started chan string
}

// swapFsyncDir replaces the directory sync, for the rest of the test, with what wrap makes of
// the real one: once no sync of an earlier write still reads it, and until every sync begun
// meanwhile has ended (cleanups the caller registers afterwards run before that wait).
func swapFsyncDir(t *testing.T, wrap func(real func(string) error) func(string) error) {
	t.Helper()
	_ = wait(syncer.barrier())
	real := fsyncDir
	fsyncDir = wrap(real)
	t.Cleanup(func() {
		_ = wait(syncer.barrier())
		fsyncDir = real
	})
}

func gateDirSyncs(t *testing.T) *gatedSyncs {
	t.Helper()
	g := &gatedSyncs{count: map[string]int{}, held: map[string]chan struct{}{}, started: make(chan string, 1000)}
	swapFsyncDir(t, func(real func(string) error) func(string) error {
		return func(dir string) error {
			g.mu.Lock()
			g.count[dir]++
			gate := g.held[dir]
			g.mu.Unlock()
			g.started <- dir
			if gate != nil {
				<-gate
			}
			return real(dir)
		}
	})
	t.Cleanup(func() { // before the swap's own cleanup waits for the syncs held here
		g.mu.Lock()
		for d, c := range g.held {
			close(c)
			delete(g.held, d)
		}
		g.mu.Unlock()
	})
	return g
}

// hold makes the syncs of dir block until the returned release is called.
func (g *gatedSyncs) hold(dir string) (release func()) {
	c := make(chan struct{})
	g.mu.Lock()
	g.held[dir] = c
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.held[dir] == c {
			close(c)
			delete(g.held, dir)
		}
	}
}

// waitStart returns once a sync of dir has started, passing over the starts of other
// directories' syncs (the channel holds every start since the test began); it fails the test
// if none starts within 10 s.
func (g *gatedSyncs) waitStart(t *testing.T, dir string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case d := <-g.started:
			if d == dir {
				return
			}
		case <-timeout:
			t.Fatalf("no sync of %s started", dir)
		}
	}
}

func (g *gatedSyncs) n(dir string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.count[dir]
}

func openTestLocal(t *testing.T, fsync bool) (*store, string) {
	t.Helper()
	dir := t.TempDir()
	st, err := Open(context.Background(), dir, WithLocalFsync(fsync))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s := st.(*store)
	return s, s.dir
}

// add is addLocked for a name published in dir at the tick at, taken by the test.
func (s *dirSyncer) add(dir string, at uint64) *dirSync {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addLocked(dir, at)
}

// Names published into one directory while its sync is in flight share one queued sync: many
// files written side by side cost the directory two syncs, not one each. A name published
// before the running sync began joins it, however late it asks.
func TestDirSyncsGroupPerDirectory(t *testing.T) {
	_, root := openTestLocal(t, true)
	data := filepath.Join(root, "data")
	g := gateDirSyncs(t)
	release := g.hold(data)
	early := syncClock.Add(1) // a name published before the sync below, asking only after it began
	first := syncer.add(data, syncClock.Add(1))
	<-g.started // in flight, held
	if d := syncer.add(data, early); d != first {
		t.Fatal("a name published before the running sync began was not given that sync")
	}
	queued := syncer.add(data, syncClock.Add(1))
	if queued == first {
		t.Fatal("a name published while its directory's sync runs was given that sync")
	}
	for range 16 {
		if d := syncer.add(data, syncClock.Add(1)); d != queued {
			t.Fatal("names published while the directory's sync runs do not share one queued sync")
		}
	}
	if n := len(syncer.barrier()); n != 2 {
		t.Fatalf("barrier sees %d syncs, want the running and the queued one", n)
	}
	release()
	wait([]*dirSync{first, queued})
	if n := g.n(data); n != 2 {
		t.Fatalf("directory synced %d times for 18 names, want 2", n)
	}
	if len(syncer.barrier()) != 0 {
		t.Fatal("syncs left pending after they ended")
	}
}

// A write does not publish anything until the directory syncs of the writes that returned
// before it began are done, and a PutIfAbsent returns only once its own name is durable.
func TestWriteWaitsForEarlierDirSyncs(t *testing.T) {
	s, root := openTestLocal(t, true)
	ctx := context.Background()
	g := gateDirSyncs(t)
	for i, w := range []struct {
		name  string
		key   string // published by the write, or removed by a delete
		write func() error
	}{
		{"put_if_absent", "_versions/1.manifest", func() error { return s.PutIfAbsent(ctx, "_versions/1.manifest", []byte("m")) }},
		{"put", "other/x", func() error { return s.Put(ctx, "other/x", []byte("x")) }},
		{"compose", "other/y", func() error { return Compose(ctx, s, "other/y", []Part{{Data: []byte("y")}}) }},
		{"delete", "other/x", func() error { return s.Delete(ctx, "other/x") }},
		{"delete_prefix", "other/y", func() error { return s.DeletePrefix(ctx, "other") }},
	} {
		dir := filepath.Join(root, "data", strconv.Itoa(i))
		release := g.hold(dir)
		if err := s.Put(ctx, "data/"+strconv.Itoa(i)+"/f.lance", []byte("bytes")); err != nil {
			t.Fatal(err)
		}
		_, before := os.Stat(filepath.Join(root, w.key))
		done := make(chan error, 1)
		go func() { done <- w.write() }()
		select {
		case err := <-done:
			t.Fatalf("%s returned (%v) while the earlier Put's directory sync was in flight", w.name, err)
		case <-time.After(50 * time.Millisecond):
		}
		if _, now := os.Stat(filepath.Join(root, w.key)); (now == nil) != (before == nil) {
			t.Fatalf("%s changed %s before the earlier Put's name was durable", w.name, w.key)
		}
		release()
		if err := <-done; err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
	}
}

// A PutIfAbsent under DeferDirSync returns while its directory's sync is in flight, and the
// next write publishes only once that sync ended; without it, a PutIfAbsent waits.
func TestDeferDirSyncLeavesTheWaitToTheNextWrite(t *testing.T) {
	s, root := openTestLocal(t, true)
	ctx := context.Background()
	g := gateDirSyncs(t)
	versions := filepath.Join(root, "t", "_versions")
	release := g.hold(versions)
	returned := make(chan error, 1)
	go func() { returned <- s.PutIfAbsent(DeferDirSync(ctx), "t/_versions/1.manifest", []byte("m")) }()
	select {
	case err := <-returned:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a deferred PutIfAbsent waited for its directory sync")
	}
	next := make(chan error, 1)
	go func() { next <- s.PutIfAbsent(ctx, "m/_versions/1.manifest", []byte("p")) }()
	select {
	case err := <-next:
		t.Fatalf("the next write returned (%v) while the deferred commit's directory sync was in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := os.Stat(filepath.Join(root, "m", "_versions", "1.manifest")); err == nil {
		t.Fatal("the next write published before the deferred commit's name was durable")
	}
	release()
	if err := <-next; err != nil {
		t.Fatal(err)
	}
	// Not deferred: the commit waits for its own directory.
	release = g.hold(versions)
	go func() { returned <- s.PutIfAbsent(ctx, "t/_versions/2.manifest", []byte("m")) }()
	select {
	case err := <-returned:
		t.Fatalf("a PutIfAbsent returned (%v) before its directory sync ended", err)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	if err := <-returned; err != nil {
		t.Fatal(err)
	}
}

// A write whose context ends while it waits for earlier syncs publishes nothing.
func TestBarrierWaitHonoursContext(t *testing.T) {
	s, root := openTestLocal(t, true)
	g := gateDirSyncs(t)
	release := g.hold(filepath.Join(root, "data"))
	if err := s.Put(context.Background(), "data/f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := s.PutIfAbsent(ctx, "_versions/1.manifest", []byte("m")); err == nil {
		t.Fatal("PutIfAbsent succeeded while the earlier sync was held and its context ended")
	}
	if _, err := os.Stat(filepath.Join(root, "_versions/1.manifest")); err == nil {
		t.Fatal("a write that gave up published its name")
	}
	if err := Sync(ctx, s); err == nil {
		t.Fatal("Sync returned nil while a sync was held and its context ended")
	}
	release()
	if err := Sync(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Join(root, "_versions"))
	if len(entries) != 0 {
		t.Fatalf("the abandoned write left %v", entries)
	}
}

// Close of a root waits for the directory syncs of what was written before it.
func TestCloseWaitsForDirSyncs(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	g := gateDirSyncs(t)
	release := g.hold(filepath.Join(dir, "data"))
	if err := st.Put(context.Background(), "data/f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { st.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a directory sync of its writes was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	release()
	<-closed
}

// Without fsync nothing is synced and nothing waits.
func TestNoFsyncSyncsNothing(t *testing.T) {
	s, root := openTestLocal(t, false)
	g := gateDirSyncs(t)
	var events []syncEvent
	stop := setTrace(func(ev syncEvent) { events = append(events, ev) })
	defer stop()
	ctx := context.Background()
	if err := s.Put(ctx, "data/f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "_versions/1.manifest", []byte("m")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "data/f"); err != nil {
		t.Fatal(err)
	}
	if n := g.n(filepath.Join(root, "data")) + g.n(filepath.Join(root, "_versions")); n != 0 || len(events) != 0 {
		t.Fatalf("durability=none synced %d directories, traced %v", n, events)
	}
}

// Names published under Unreferenced start no directory sync and hold up no later write; the
// first SyncNames of one of them syncs its directory once for all the names published there
// by then, and asking for those again costs nothing. A name published after that sync began
// needs a sync of its own.
func TestSyncNamesSyncsEachDirectoryOnceForTheNamesWrittenAhead(t *testing.T) {
	s, root := openTestLocal(t, true)
	ctx := context.Background()
	g := gateDirSyncs(t)
	data := filepath.Join(root, "t", "data")
	ahead := Unreferenced(ctx)
	keys := []string{"t/data/1.lance", "t/data/2.lance", "t/data/3.lance"}
	for _, k := range keys {
		if err := s.Put(ahead, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := Compose(ahead, s, "t/data/4.lance", []Part{{Data: []byte("4")}}); err != nil {
		t.Fatal(err)
	}
	keys = append(keys, "t/data/4.lance")
	if n := g.n(data); n != 0 {
		t.Fatalf("%d syncs of a directory only unreferenced names were published into", n)
	}
	// A later write does not wait for them: their directory is held, and it returns.
	release := g.hold(data)
	if err := s.PutIfAbsent(ctx, "t/_versions/1.manifest", []byte("m")); err != nil {
		t.Fatal(err)
	}
	if err := Sync(ctx, s); err != nil {
		t.Fatal(err)
	}
	synced := make(chan error, 1)
	go func() { synced <- SyncNames(ctx, s, keys[:1]) }()
	g.waitStart(t, data)
	select {
	case err := <-synced:
		t.Fatalf("SyncNames returned (%v) while its directory's sync was in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	if err := SyncNames(ctx, s, keys); err != nil {
		t.Fatal(err)
	}
	if n := g.n(data); n != 1 {
		t.Fatalf("directory synced %d times for 4 names written ahead, want once", n)
	}
	if err := s.Put(ahead, "t/data/5.lance", []byte("5")); err != nil {
		t.Fatal(err)
	}
	if err := SyncNames(ctx, s, append(keys, "t/data/5.lance")); err != nil {
		t.Fatal(err)
	}
	if n := g.n(data); n != 2 {
		t.Fatalf("directory synced %d times, want a second sync for the name published after the first", n)
	}
	if n := unsyncedUnder(root); n != 0 {
		t.Fatalf("%d durable names still held as unsynced", n)
	}
}

// A name written ahead and removed before any commit asked for it is forgotten: asking for
// it syncs nothing.
func TestSyncNamesForgetsRemovedNames(t *testing.T) {
	s, root := openTestLocal(t, true)
	ctx := context.Background()
	g := gateDirSyncs(t)
	if err := s.Put(Unreferenced(ctx), "t/data/1.lance", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "t/data/1.lance"); err != nil {
		t.Fatal(err)
	}
	if err := SyncNames(ctx, s, []string{"t/data/1.lance"}); err != nil {
		t.Fatal(err)
	}
	if n, u := g.n(filepath.Join(root, "t", "data")), unsyncedUnder(root); n != 0 || u != 0 {
		t.Fatalf("%d syncs and %d unsynced names after the name written ahead was removed", n, u)
	}
}

// Names no commit ever asks for are bounded: past maxUnsynced, their directories are synced.
func TestUnsyncedNamesAreBounded(t *testing.T) {
	s, root := openTestLocal(t, true)
	ctx := Unreferenced(context.Background())
	g := gateDirSyncs(t)
	defer func(n int) { maxUnsynced = n }(maxUnsynced)
	maxUnsynced = 8 + syncer.held() // what other tests left, and eight of this one's
	for i := range 9 {
		if err := s.Put(ctx, "t/data/"+strconv.Itoa(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	wait(syncer.barrier())
	if n, u := g.n(filepath.Join(root, "t", "data")), unsyncedUnder(root); n != 1 || u != 0 {
		t.Fatalf("%d syncs and %d unsynced names past the bound, want 1 and none", n, u)
	}
}

// Without fsync nothing is held: SyncNames has nothing to do.
func TestSyncNamesWithoutFsync(t *testing.T) {
	s, root := openTestLocal(t, false)
	ctx := context.Background()
	if err := s.Put(Unreferenced(ctx), "t/data/1.lance", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := SyncNames(ctx, s, []string{"t/data/1.lance"}); err != nil || unsyncedUnder(root) != 0 {
		t.Fatalf("SyncNames without fsync: %v, %d unsynced names", err, unsyncedUnder(root))
	}
}

// unsyncedUnder is how many names under root are held as unsynced.
func unsyncedUnder(root string) int {
	syncer.mu.Lock()
	defer syncer.mu.Unlock()
	n := 0
	for dir, names := range syncer.unsynced {
		if strings.HasPrefix(dir, root+string(filepath.Separator)) {
			n += len(names)
		}
	}
	return n
}

// held is how many names are held as unsynced.
func (s *dirSyncer) held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nUnsynced
}

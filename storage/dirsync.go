package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
)

// The sync chain of a local root with fsync on (docs/durability.md tells it as a whole).
//
// A local write makes its bytes durable before it gives them a name: the staged file is
// filled and fsynced, and only then renamed (Put) or linked (PutIfAbsent) into place. So a
// name never points at bytes a power loss could take, whatever happens afterwards; what a
// power loss can still take is the name itself, until its directory has been fsynced.
//
// A PutIfAbsent (the commit primitive: a manifest version, a branch ref, a claim) fsyncs its
// directory before it returns: a commit is durable when it is acknowledged.
//
// A Put (and a Compose) does not wait for its directory: the directory sync starts as soon as
// the name is published and runs in the background. Every local write that starts afterwards
// in this process (Put, PutIfAbsent, Compose, Delete, DeletePrefix), on any root, first waits
// for the directory syncs started before it began (barrier), and so does Close of a root.
// Whatever this process writes or deletes after a Put returned is therefore published only
// once the Put's name is durable: a manifest never names a data file, deletion file or sidecar
// whose name a power loss could take, and no write outlives one that returned before it began.
// What this saves is one sequential directory sync per step of a commit: the staged files'
// directory syncs run beside the next step's own file sync instead of before it.
//
// A PutIfAbsent under DeferDirSync does not wait for its directory either: a graph write's
// table commits, which nobody outside the process hears of before the same write publishes
// its __manifest version (whose barrier waits for them). Their directory syncs then run beside
// the next step's file syncs, one flush fewer in the chain a load waits for.
//
// The one thing a Put no longer promises on its own is durability at the moment it returns
// when nothing else is written after it: a caller that acknowledges something outside the
// store right after a bare Put calls Sync first. (The engine's writes all end with a
// PutIfAbsent or a Delete: a load, a merge and a compaction with their publish and retire.)
//
// Directory syncs are grouped per directory (group commit): while one is in flight, every
// name published into the same directory joins one queued sync that starts when it ends, so
// many files written side by side into one directory (a compaction's data files, an index
// build's files) cost at most two syncs of it, not one each.
//
// A Put or Compose under Unreferenced (a file nothing names until a later commit: a data file
// written ahead of its batch's turn, a staged compaction's or index build's files) publishes
// its name without starting its directory's sync, and no later write waits for it: the commit
// that will name it asks for it first (SyncNames). Such files arrive ahead of their commits,
// several batches' into one directory, and the sync one commit asks for covers every name
// published into that directory before it began, so the commits after it find theirs durable
// already: one directory sync for several commits' files instead of one each. A power loss
// before a commit asked can take such a name; nothing names it then, and cleanup's orphan
// sweep removes a file whose name survived.
//
// A directory sync that fails is not retried and not forgotten. After a failed writeback the
// kernel may have dropped the directory blocks it could not write (ext4 marks them not up to
// date and reads the old ones back), so a later sync that succeeds proves nothing about the
// names the failed one was to make durable, and no write can tell whether it depends on them.
// The first failure is therefore latched for the process: every local write with fsync on that
// would publish or remove something afterwards, every SyncNames, Sync and Close, fails with a
// *SyncError (ErrSyncFailed) instead of building on a name a power loss could take. Nothing
// clears it but a new process, which reads the directories back from the disk. What a sync
// cannot do on a file system that does not sync directories (EINVAL, ENOTSUP), or on a
// directory removed meanwhile, is not a failure: there is nothing such a sync could add.

// syncer is the process's one set of directory syncs: a barrier has to see the syncs of every
// root and Sub of this process, since an engine's writes go through several of them.
var syncer = newDirSyncer()

type dirSyncer struct {
	mu sync.Mutex
	// failure is the first directory sync that failed: latched (above). Set under mu, read
	// without it by every write.
	failure atomic.Pointer[SyncError]
	running map[string]*dirSync   // per directory: the sync in flight
	queued  map[string]*dirSync   // per directory: the sync that starts when the running one ends
	pending map[*dirSync]struct{} // every sync in flight or queued
	// unsynced holds, per directory, the names published under Unreferenced that no sync
	// begun after them has ended yet, with their publication ticks (SyncNames).
	unsynced  map[string]map[string]uint64
	nUnsynced int // the names in unsynced
}

// maxUnsynced bounds the names held in unsynced: names no commit ever asks for (the files of
// a staged compaction that went stale, say) would otherwise stay forever; past it, every
// directory holding some is synced, which drops them.
var maxUnsynced = 4096 // a variable for tests

// dirSync is one fsync of a directory; done is closed when it ended.
type dirSync struct {
	dir  string
	done chan struct{}
	// startedAt is the syncClock tick taken, under the syncer's mutex, just before the fsync
	// itself (0 until then): the sync covers every name published into dir before that tick.
	startedAt uint64
}

// syncClock orders publications and the starts of directory syncs: a publication takes a tick
// after its name is in place, a sync one before its fsync begins, so a sync whose tick is the
// later one covers the name. Both are taken under the syncer's mutex together with their trace
// events, so that a test's trace orders them as the syncer does.
var syncClock atomic.Uint64

func newDirSyncer() *dirSyncer {
	return &dirSyncer{running: map[string]*dirSync{}, queued: map[string]*dirSync{}, pending: map[*dirSync]struct{}{},
		unsynced: map[string]map[string]uint64{}}
}

// FailpointDirSync fires before each fsync of a directory; error(EIO) there fails the sync as
// a failing disk's would, and the failure is latched as a real one is.
const FailpointDirSync = "storage.dir_sync"

// fsyncDir is the directory sync itself; tests replace it. It returns nil for what is not a
// failure (dirSyncFailed).
var fsyncDir = func(dir string) error {
	if err := failpoint.Inject(FailpointDirSync); err != nil {
		return err
	}
	d, err := openFile(dir, os.O_RDONLY, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed meanwhile, with every name in it
		}
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// SyncError is the latched failure of a directory sync: the directory and the system's error.
// errors.Is finds ErrSyncFailed and the error itself (an errno such as EIO) in it.
type SyncError struct {
	Dir string
	Err error
}

// ErrSyncFailed is what every write of a process whose directory sync failed fails with.
var ErrSyncFailed = errors.New("directory sync failed")

func (e *SyncError) Error() string {
	return fmt.Sprintf("%v: fsync of %s: %v; the names published there may not survive a power loss, so this process makes no more local writes with fsync on: restart it once the disk is mended",
		ErrSyncFailed, e.Dir, e.Err)
}

func (e *SyncError) Unwrap() []error { return []error{ErrSyncFailed, e.Err} }

// latchLocked records err, the failure of a sync of dir, unless one is latched already or it
// is not a failure.
func (s *dirSyncer) latchLocked(dir string, err error) {
	if err == nil || s.failure.Load() != nil || !dirSyncFailed(err) {
		return
	}
	s.failure.Store(&SyncError{Dir: dir, Err: err})
}

// SyncFailure is this process's latched directory sync failure (a *SyncError), or nil: once
// it is set, no local write with fsync on succeeds in this process again, so a liveness check
// should report the process dead and have it restarted.
func SyncFailure() error { return syncer.err() }

// err is the latched failure, or nil.
func (s *dirSyncer) err() error {
	if f := s.failure.Load(); f != nil {
		return f
	}
	return nil
}

// published is called right after path's name was put in place: it traces the publication,
// takes its syncClock tick and returns a sync of path's directory that begins after that tick
// (addLocked), all under the syncer's mutex.
func (s *dirSyncer) published(path string, deferred bool) *dirSync {
	s.mu.Lock()
	defer s.mu.Unlock()
	trace(syncEvent{Kind: eventPublished, Path: path, Deferred: deferred})
	return s.addLocked(filepath.Dir(path), syncClock.Add(1))
}

// created is published for a directory this process just created (makeDirs): it traces the
// creation and returns a sync of the new directory's parent that begins after it.
func (s *dirSyncer) created(dir string) *dirSync {
	s.mu.Lock()
	defer s.mu.Unlock()
	trace(syncEvent{Kind: eventDirCreated, Path: dir})
	return s.addLocked(filepath.Dir(dir), syncClock.Add(1))
}

// publishedUnreferenced is published for a name published under Unreferenced: it only takes
// the name's tick, for SyncNames to find a sync that covers it.
func (s *dirSyncer) publishedUnreferenced(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	trace(syncEvent{Kind: eventPublished, Path: path, Deferred: true, Unreferenced: true})
	dir := filepath.Dir(path)
	names := s.unsynced[dir]
	if names == nil {
		names = map[string]uint64{}
		s.unsynced[dir] = names
	}
	if _, ok := names[path]; !ok {
		s.nUnsynced++
	}
	names[path] = syncClock.Add(1)
	if s.nUnsynced > maxUnsynced {
		now := syncClock.Load()
		for dir := range s.unsynced {
			s.addLocked(dir, now)
		}
	}
}

// syncNames returns the syncs that make the names of paths durable: for each one still
// unsynced, a sync of its directory begun after it was published (addLocked), the same one
// for every name of a directory that it covers.
func (s *dirSyncer) syncNames(paths []string) []*dirSync {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*dirSync
	for _, p := range paths {
		dir := filepath.Dir(p)
		at, ok := s.unsynced[dir][p]
		if !ok {
			continue // published otherwise (a later write's barrier covers it), or durable
		}
		d := s.addLocked(dir, at)
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// forget drops path from the unsynced names: it was removed.
func (s *dirSyncer) forget(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dir := filepath.Dir(path)
	if names := s.unsynced[dir]; names != nil {
		if _, ok := names[path]; ok {
			delete(names, path)
			s.nUnsynced--
		}
		if len(names) == 0 {
			delete(s.unsynced, dir)
		}
	}
}

// coveredLocked drops the unsynced names of d's directory that d, which just ended, made
// durable: those published before it began.
func (s *dirSyncer) coveredLocked(d *dirSync) {
	names := s.unsynced[d.dir]
	for p, at := range names {
		if at < d.startedAt {
			delete(names, p)
			s.nUnsynced--
		}
	}
	if names != nil && len(names) == 0 {
		delete(s.unsynced, d.dir)
	}
}

// addLocked returns a sync of dir that begins after the tick at, under the syncer's mutex.
// The running one is the answer when it has not begun or began after the tick: files
// published side by side into one directory often come before the first one's sync begins,
// or reach here only after it did, and they all join it.
func (s *dirSyncer) addLocked(dir string, at uint64) *dirSync {
	if r := s.running[dir]; r != nil && (r.startedAt == 0 || r.startedAt > at) {
		return r
	}
	if q := s.queued[dir]; q != nil {
		return q // not started yet, so it covers the name
	}
	d := &dirSync{dir: dir, done: make(chan struct{})}
	s.pending[d] = struct{}{}
	if s.running[dir] != nil {
		s.queued[dir] = d
		return d
	}
	s.running[dir] = d
	go s.run(d)
	return d
}

// run syncs d's directory, then the sync queued behind it, if any, and so on.
func (s *dirSyncer) run(d *dirSync) {
	for d != nil {
		s.mu.Lock()
		d.startedAt = syncClock.Add(1)
		trace(syncEvent{Kind: eventDirSyncStart, Path: d.dir})
		s.mu.Unlock()
		err := fsyncDir(d.dir)
		trace(syncEvent{Kind: eventDirSyncDone, Path: d.dir})
		s.mu.Lock()
		s.latchLocked(d.dir, err)
		s.coveredLocked(d)
		delete(s.pending, d)
		close(d.done)
		next := s.queued[d.dir]
		delete(s.queued, d.dir)
		if next != nil {
			s.running[d.dir] = next
		} else {
			delete(s.running, d.dir)
		}
		s.mu.Unlock()
		d = next
	}
}

// barrier returns the directory syncs started or queued so far: what a write that starts now
// waits for before it publishes anything.
func (s *dirSyncer) barrier() []*dirSync {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) == 0 {
		return nil
	}
	out := make([]*dirSync, 0, len(s.pending))
	for d := range s.pending {
		out = append(out, d)
	}
	return out
}

// wait waits for every sync of syncs to end (they always do: a sync is never abandoned), and
// returns the latched failure, if any.
func wait(syncs []*dirSync) error {
	for _, d := range syncs {
		<-d.done
	}
	return syncer.err()
}

// waitCtx is wait for a write that has published nothing yet, which may give up instead.
func waitCtx(ctx context.Context, syncs []*dirSync) error {
	for _, d := range syncs {
		select {
		case <-d.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return syncer.err()
}

// Sync returns once every local write this process made before the call is durable, names
// included: for a caller that acknowledges a bare Put outside the store with nothing written
// after it. Every local write (and Close) does this itself before it publishes anything, and
// a PutIfAbsent is durable when it returns, so the write path never needs it. Names written
// under Unreferenced are not waited for (SyncNames is theirs). Stores other than local roots
// with fsync on have nothing to wait for. It fails with the latched *SyncError once a directory
// sync of this process has failed.
func Sync(ctx context.Context, st Store) error {
	s, ok := unwrap(st).(*store)
	if !ok || !s.local() || s.noFsync {
		return nil
	}
	return waitCtx(ctx, syncer.barrier())
}

// unreferencedKey marks a context made by Unreferenced.
type unreferencedKey struct{}

// Unreferenced returns a context under which a Put or Compose to a local root with fsync on
// publishes its name (its bytes durable, as always) without starting its directory's sync, and
// without any later write waiting for that sync: for a file nothing names until a commit of
// this process that calls SyncNames for it first. Sync and Close do not wait for such names
// either. Elsewhere (other stores, fsync off) it changes nothing.
func Unreferenced(ctx context.Context) context.Context {
	return context.WithValue(ctx, unreferencedKey{}, true)
}

func unreferenced(ctx context.Context) bool {
	v, _ := ctx.Value(unreferencedKey{}).(bool)
	return v
}

// SyncNames returns once the names of keys, written to st under Unreferenced, are durable:
// it starts a sync of each one's directory, or waits for one that began after the name was
// published, and one sync covers every name of its directory published before it began. A key
// not written under Unreferenced, or already durable, costs nothing: a commit calls it for
// the files it is about to name, before it writes the name that names them. It fails with the
// latched *SyncError once a directory sync of this process has failed.
func SyncNames(ctx context.Context, st Store, keys []string) error {
	s, ok := unwrap(st).(*store)
	if !ok || !s.local() || s.noFsync || len(keys) == 0 {
		return nil
	}
	paths := make([]string, len(keys))
	for i, k := range keys {
		if err := checkKey(k); err != nil {
			return wrap(ctx, opPut, k, err)
		}
		paths[i] = s.path(s.prefix + k)
	}
	return waitCtx(ctx, syncer.syncNames(paths))
}

// deferDirSyncKey marks a context made by DeferDirSync.
type deferDirSyncKey struct{}

// DeferDirSync returns a context under which a PutIfAbsent to a local root with fsync on
// returns once its name is published and its directory sync has started, as a Put does,
// instead of once that sync has ended. The name is durable before anything this process
// publishes afterwards (every later write's barrier waits for the sync), but not when the
// call returns. It is for commits that nobody outside the process learns of before a later
// write of the same process: never for one whose success is acknowledged on its own.
func DeferDirSync(ctx context.Context) context.Context {
	return context.WithValue(ctx, deferDirSyncKey{}, true)
}

func dirSyncDeferred(ctx context.Context) bool {
	v, _ := ctx.Value(deferDirSyncKey{}).(bool)
	return v
}

// syncEvent is what a test's trace (setTrace) sees of a local write with fsync on.
type syncEvent struct {
	Kind eventKind
	Path string // the published name (file events) or the directory (directory events)
	// Deferred marks an eventPublished whose write returns without waiting for the
	// directory sync (a Put, or a PutIfAbsent under DeferDirSync).
	Deferred bool
	// Unreferenced marks an eventPublished under Unreferenced: no sync of its directory
	// starts until SyncNames asks for one.
	Unreferenced bool
}

// eventKind names a syncEvent.
type eventKind int

const (
	// eventFileSynced: the bytes to be published as Path are fsynced (not published yet).
	eventFileSynced eventKind = iota + 1
	// eventPublished: Path was renamed or linked into place.
	eventPublished
	// eventDirSyncStart and eventDirSyncDone bracket an fsync of the directory Path.
	eventDirSyncStart
	eventDirSyncDone
	// eventWriteStart: a write of Path begins (its barrier is taken right after).
	eventWriteStart
	// eventWriteDone: the write of Path returns successfully.
	eventWriteDone
	// eventDirCreated: the directory Path was created (makeDirs); a sync of its parent
	// follows before anything is published into it.
	eventDirCreated
)

var (
	traceOn atomic.Bool
	traceMu sync.Mutex
	traceFn func(syncEvent)
)

// trace hands ev to the test's trace, if any, in the order the events happened.
func trace(ev syncEvent) {
	if !traceOn.Load() {
		return
	}
	traceMu.Lock()
	if traceFn != nil {
		traceFn(ev)
	}
	traceMu.Unlock()
}

// setTrace makes fn see every syncEvent until the returned function is called (tests).
func setTrace(fn func(syncEvent)) (stop func()) {
	traceMu.Lock()
	traceFn = fn
	traceOn.Store(true)
	traceMu.Unlock()
	return func() {
		traceMu.Lock()
		traceFn = nil
		traceOn.Store(false)
		traceMu.Unlock()
	}
}

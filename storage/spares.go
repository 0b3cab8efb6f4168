package storage

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
)

// Creating a file can be the dearest step of a local write: on the ext4 volume this project
// is measured on, creat(2) once cost about 450µs of kernel time, while opening an existing
// file, writing it and renaming it into another directory cost about 60µs (later, on the same
// volume, 25-45µs against 64-72µs for a 200 KiB file: the saving depends on the host). A
// graph load creates a dozen files, one after another, so a local root keeps empty files
// created ahead of need (as etcd's WAL does with its next segment): a write fills a spare and
// renames or links it into place, and a background refill creates the next ones off the write
// path.
//
// Spares are for a long-lived writer (the worker, the bench), which turns them on with
// KeepSpares; every other store creates its files as it writes them, so a short-lived store
// (a test's, a read-only tool's) never leaves a refill running behind it.
//
// The spares live in <root>/.omnigraph-spare/<process dir>/, hidden from listings and refused
// as keys. Each process has its own directory, held by an flock on its ".lock" file, so two
// processes writing one root never fill the same spare; a directory whose lock is free belongs
// to a process that is gone and is removed by the next one to start.

// SpareDirName is the root directory that holds the spare files of local roots.
const SpareDirName = ".omnigraph-spare"

// inSpareDir reports whether a bucket key of a local root lies in the spare directory.
func inSpareDir(full string) bool {
	return full == SpareDirName || strings.HasPrefix(full, SpareDirName+"/")
}

// FailpointSpareFilled fires after a write has filled a spare file, before it is renamed or
// linked into place.
const FailpointSpareFilled = "storage.spare_filled"

// FailpointSpareCreated fires in the refill after it created a spare, before it records it.
const FailpointSpareCreated = "storage.spare_created"

// spareTarget is how many spares a process keeps ready.
const spareTarget = 24

type spares struct {
	base string // <root>/.omnigraph-spare

	mu      sync.Mutex
	dir     string   // this process's directory; "" until the first refill makes it
	lock    *os.File // holds the flock on dir/.lock
	ready   []string // empty files in dir
	seq     uint64   // names the next spare
	gen     uint64   // bumped by drain, so a refill in flight drops what it made
	running bool     // a refill goroutine is active
	// again: a take found the supply low while the running refill belonged to an older
	// generation (one about to end because of a drain): that refill carries on for the new one
	// instead of ending, or nothing would refill until the next take. Cleared whenever a
	// refill ends, so it never outlives the refill it was meant for.
	again  bool
	runGen uint64 // the generation the running refill works for
	closed bool
	broken bool // the directory could not be made: every write creates its own file
	wg     sync.WaitGroup
}

func newSpares(root string) *spares { return &spares{base: filepath.Join(root, SpareDirName)} }

// KeepSpares turns spare files on for st, a local root from Open, and reports whether it did
// (other stores, and Subs, are left as they are). Call it before taking Subs of st: they
// share its spares from then on. Close stops the refill and removes the spares.
func KeepSpares(st Store) bool {
	s, ok := unwrap(st).(*store)
	if !ok || !s.local() || !s.root || s.prefix != "" {
		return false
	}
	if s.spares == nil {
		s.spares = newSpares(s.dir)
	}
	return true
}

// take returns an empty spare file, or "" when none is ready (the caller then creates its
// own), and starts a refill when the supply runs low.
func (p *spares) take() string {
	if p == nil {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.broken {
		return ""
	}
	var name string
	if n := len(p.ready); n > 0 {
		name, p.ready = p.ready[n-1], p.ready[:n-1]
	}
	if len(p.ready) < spareTarget/2 {
		switch {
		case !p.running:
			p.running, p.runGen = true, p.gen
			gen := p.gen
			p.wg.Go(func() { p.refill(gen) })
		case p.runGen != p.gen:
			p.again = true
		}
	}
	return name
}

// stale is called, p.mu held, by a refill of generation gen that is about to end because a
// drain moved on: it returns the generation to carry on with, and whether to, so a take that
// came meanwhile is not left without a refill.
func (p *spares) stale(gen uint64) (uint64, bool) {
	if p.gen == gen || !p.again || p.closed || p.broken {
		return gen, false
	}
	p.again, p.runGen = false, p.gen
	return p.gen, true
}

// refill creates spares until spareTarget are ready, then ends; a drain since gen ends it.
func (p *spares) refill(gen uint64) {
	for {
		p.mu.Lock()
		if next, ok := p.stale(gen); ok {
			gen = next
		}
		if p.closed || p.broken || p.gen != gen || len(p.ready) >= spareTarget {
			p.running, p.again = false, false
			p.mu.Unlock()
			return
		}
		if p.dir == "" {
			if err := p.start(); err != nil {
				p.broken, p.running, p.again = true, false, false
				p.mu.Unlock()
				return
			}
		}
		p.seq++
		name := filepath.Join(p.dir, strconv.FormatUint(p.seq, 10))
		p.mu.Unlock()

		err := createEmpty(name, 0o666)
		created := err == nil
		if created {
			err = failpoint.Inject(FailpointSpareCreated)
		}
		p.mu.Lock()
		if p.gen != gen && p.again && !p.closed && (err == nil || errors.Is(err, fs.ErrNotExist)) {
			// Drained meanwhile and wanted again: the file is in a removed directory, or was
			// refused by its removal; drop it and go on for the new generation.
			p.mu.Unlock()
			if created {
				_ = os.Remove(name)
			}
			continue
		}
		if err != nil || p.gen != gen || p.closed {
			// Drained or closed meanwhile, or the directory went away (another process took
			// it for abandoned in the instant before we locked it): nothing is kept, and a
			// vanished directory is made afresh by the next refill.
			if errors.Is(err, fs.ErrNotExist) && p.gen == gen {
				p.gen++
				if p.lock != nil {
					_ = p.lock.Close()
				}
				p.dir, p.lock, p.ready = "", nil, nil
			}
			p.running, p.again = false, false
			p.mu.Unlock()
			if created {
				_ = os.Remove(name)
			}
			return
		}
		p.ready = append(p.ready, name)
		p.mu.Unlock()
	}
}

// start makes this process's directory and locks it; p.mu is held.
func (p *spares) start() error {
	if err := os.MkdirAll(p.base, 0o777); err != nil {
		return err
	}
	p.removeAbandoned()
	dir, err := os.MkdirTemp(p.base, "p")
	if err != nil {
		return err
	}
	// The lock file is locked under another name and then renamed (the flock goes with the
	// file): a ".lock" is never seen unlocked, which another process starting would take for
	// the lock of a process that is gone, and remove the directory.
	made := filepath.Join(dir, ".lock.new")
	lock, err := os.OpenFile(made, os.O_RDWR|os.O_CREATE, 0o666)
	if err == nil {
		err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			// The holder's pid, for LiveWriters to name (best effort: the flock is what counts).
			_, _ = lock.WriteString(strconv.Itoa(os.Getpid()))
			err = os.Rename(made, filepath.Join(dir, ".lock"))
		}
		if err != nil {
			_ = lock.Close()
		}
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return err
	}
	p.dir, p.lock = dir, lock
	return nil
}

// LiveWriters returns the process ids of the live processes keeping spare files under st, a
// local root from Open: on a local root only a long-lived writer (`worker run`) keeps spares,
// so a tool that is about to write the root directly can refuse to write under it. A pid is 0
// when its holder did not record one. Other stores, whose writers cannot be seen this way,
// report none.
func LiveWriters(st Store) ([]int, error) {
	s, ok := unwrap(st).(*store)
	if !ok || !s.local() || s.prefix != "" {
		return nil, nil
	}
	base := filepath.Join(s.dir, SpareDirName)
	entries, err := os.ReadDir(base)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		lock, err := os.Open(filepath.Join(base, e.Name(), ".lock"))
		if err != nil {
			continue // being made or removed right now
		}
		err = syscall.Flock(int(lock.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b, _ := os.ReadFile(lock.Name())
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			pids = append(pids, pid)
		}
		_ = lock.Close() // releases the shared lock when we took it
	}
	return pids, nil
}

// removeAbandoned removes the spare directories of processes that are gone (their lock is
// free). Best effort: a directory that cannot be judged is left alone.
func (p *spares) removeAbandoned() {
	entries, err := os.ReadDir(p.base)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(p.base, e.Name())
		lock, err := os.Open(filepath.Join(dir, ".lock"))
		if errors.Is(err, fs.ErrNotExist) {
			continue // being made right now, or not ours to judge
		}
		if err != nil {
			continue
		}
		if syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			_ = os.RemoveAll(dir)
		}
		_ = lock.Close()
	}
}

// drain removes every spare and this process's directory (and the shared one if it is then
// empty), so that a root emptied with DeletePrefix("") is empty. The next write starts over.
func (p *spares) drain() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.gen++
	dir, lock := p.dir, p.lock
	p.dir, p.lock, p.ready, p.broken = "", nil, nil, false
	p.mu.Unlock()
	if dir != "" {
		_ = os.RemoveAll(dir)
		_ = lock.Close()
	}
	_ = os.Remove(p.base) // fails, harmlessly, while other processes keep spares there
}

// close drains the spares and waits for a refill under way to end.
func (p *spares) close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.wg.Wait()
	p.drain()
}

// emptySpare makes sure the spare f holds no bytes before it is filled.
func emptySpare(f *os.File) error {
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return err
	}
	return f.Truncate(0)
}

// fillSpare writes the object (fill) into the spare file name (fsynced when sync); on failure
// the spare is removed.
//
// A spare is opened without O_TRUNC: on ext4 (auto_da_alloc, the default) a truncation to
// zero marks the file as one being replaced, and its close then starts the writeback of
// everything written to it, in the writer's close(2) instead of the kernel's flusher: 37 to
// 61µs for a 1 MiB file where a plain close takes 3µs, for every file of every commit. A spare
// is created empty and filled once, so there is nothing to truncate; should one ever hold
// bytes, it is truncated then.
func fillSpare(name string, fill fillFunc, sync bool) error {
	f, err := openFile(name, os.O_WRONLY, 0)
	if err == nil {
		err = emptySpare(f)
		if err != nil {
			_ = f.Close()
		}
	}
	if err == nil {
		err = writeClose(f, fill, sync)
	}
	if err != nil {
		_ = os.Remove(name)
	}
	return err
}

package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/memblob"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
)

// Local roots read and list through fileblob but write and delete here. fileblob's writer does
// publish by rename (so readers never see a torn file), but it never fsyncs, by default stages
// in os.TempDir (rename fails across mounts), and its IfNotExist is a stat under an in-process
// mutex, which two processes can both pass. Writing here also gives every temporary file the
// one hidden name form "<name>#<digits>".

func openLocal(path string, o openOptions) (Store, error) {
	dir, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("storage: open %q: %w", path, err)
	}
	if o.mustExist {
		fi, err := os.Stat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist) || (err == nil && !fi.IsDir()):
			return nil, &NoGraphError{Root: dir}
		case err != nil:
			return nil, fmt.Errorf("storage: open %q: %w", path, err)
		}
	} else if err := makeDirs(dir, !o.noFsync); err != nil {
		// A new root's own name is made durable as any directory a write creates.
		return nil, fmt.Errorf("storage: open %q: %w", path, err)
	}
	// The root exists by now, so fileblob is not asked to create it.
	b, err := fileblob.OpenBucket(dir, &fileblob.Options{
		NoTempDir: true,                       // never stage across a mount point
		Metadata:  fileblob.MetadataDontWrite, // no ".attrs" sidecars next to Lance files
	})
	if err != nil {
		return nil, fmt.Errorf("storage: open %q: %w", path, err)
	}
	return &store{b: b, scheme: "file", dir: dir, root: true, owner: true, closed: new(atomic.Bool), noFsync: o.noFsync}, nil
}

// localWrite is how a local root writes: through its spare files (nil: none) and with or
// without fsync (see WithLocalFsync).
type localWrite struct {
	sp   *spares
	sync bool
}

// localPut publishes a fully written, fsynced file with rename, which replaces the target
// atomically on POSIX file systems. With fsync on, the directory sync of the new name runs in
// the background: the next write of this process waits for it before it publishes anything
// (dirsync.go).
func localPut(ctx context.Context, lw localWrite, path string, fill fillFunc) error {
	before := lw.barrier(path)
	staged, err := stage(lw, path, fill)
	if err != nil {
		return err
	}
	if err := lw.settle(ctx, before); err != nil {
		_ = os.Remove(staged)
		return err
	}
	if err := ctx.Err(); err != nil {
		_ = os.Remove(staged)
		return err
	}
	if err := os.Rename(staged, path); err != nil {
		_ = os.Remove(staged)
		if errors.Is(err, syscall.EXDEV) && filepath.Dir(staged) != filepath.Dir(path) {
			return localPut(ctx, localWrite{sync: lw.sync}, path, fill) // the target is on another file system
		}
		return err
	}
	if unreferenced(ctx) && lw.sync {
		syncer.publishedUnreferenced(path)
		trace(syncEvent{Kind: eventWriteDone, Path: path})
		return nil
	}
	return lw.published(path, false)
}

// localPutIfAbsent publishes with link(2), which fails with EEXIST if the name exists. The
// check is the kernel's (the file system's), so it is atomic across processes, unlike a stat
// followed by a rename. The name only ever points at complete, fsynced bytes, so no reader
// sees a partial manifest. With fsync on it returns once the name is durable too: a commit is
// durable when it is acknowledged. Under DeferDirSync it returns as a Put does.
func localPutIfAbsent(ctx context.Context, lw localWrite, path string, fill fillFunc) error {
	before := lw.barrier(path)
	staged, err := stage(lw, path, fill)
	if err != nil {
		return err
	}
	defer os.Remove(staged) // after a successful link the data lives on under path
	if err := lw.settle(ctx, before); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.Link(staged, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			if fi, serr := os.Lstat(path); serr == nil && fi.IsDir() {
				return fmt.Errorf("a directory occupies the key's path: %w", err)
			}
			return fmt.Errorf("%w: %w", ErrAlreadyExists, err)
		}
		if errors.Is(err, syscall.EXDEV) && filepath.Dir(staged) != filepath.Dir(path) {
			return localPutIfAbsent(ctx, localWrite{sync: lw.sync}, path, fill)
		}
		return err
	}
	// A failed sync of its own directory fails the call with the name in place: visible to
	// this process, maybe not after a power loss. The commit it was is not acknowledged, and
	// nothing this process writes afterwards builds on it (the failure is latched).
	return lw.published(path, !dirSyncDeferred(ctx))
}

// barrier begins a write of path: with fsync on it returns the directory syncs of the writes
// before it, which it must wait for before it publishes anything (dirsync.go).
func (lw localWrite) barrier(path string) []*dirSync {
	if !lw.sync {
		return nil
	}
	trace(syncEvent{Kind: eventWriteStart, Path: path})
	return syncer.barrier()
}

// settle waits for before, the barrier a write took when it began, before it publishes: with
// fsync on it fails if it gave up (ctx) or a directory sync of this process has failed.
func (lw localWrite) settle(ctx context.Context, before []*dirSync) error {
	if !lw.sync {
		return nil
	}
	return waitCtx(ctx, before)
}

// wait is the barrier of a write that publishes nothing (a delete): it returns once the
// directory syncs of the writes before it ended, so that it cannot outlive them.
func (lw localWrite) wait(ctx context.Context) error {
	if !lw.sync {
		return nil
	}
	return waitCtx(ctx, syncer.barrier())
}

// published follows the publication of path: with fsync on, its directory sync starts, and
// waitDir says to wait for it (else the next write's barrier does), and to fail if it did.
func (lw localWrite) published(path string, waitDir bool) error {
	if !lw.sync {
		return nil
	}
	d := syncer.published(path, !waitDir)
	if waitDir {
		if err := wait([]*dirSync{d}); err != nil {
			return err
		}
	}
	trace(syncEvent{Kind: eventWriteDone, Path: path})
	return nil
}

// fillFunc writes an object's bytes into a new, empty file.
type fillFunc func(f *os.File) error

// fillWith writes data.
func fillWith(data []byte) fillFunc {
	return func(f *os.File) error {
		_, err := f.Write(data)
		return err
	}
}

// stage writes the object (fill), fsynced, where it can be renamed or linked to path: into a
// spare file when one is ready, else into a new temporary file beside path. path's directory
// exists afterwards, durably when fsync is on (makeDirs).
func stage(lw localWrite, path string, fill fillFunc) (string, error) {
	if err := makeDirs(filepath.Dir(path), lw.sync); err != nil {
		return "", err
	}
	name, _, err := stageIn(lw, path, fill)
	return name, err
}

// stageIn is stage without making path's directory: where that directory is missing, only a
// spare can be filled (a temporary file beside path then fails with fs.ErrNotExist). spare
// says which it filled.
func stageIn(lw localWrite, path string, fill fillFunc) (name string, spare bool, err error) {
	if name := lw.sp.take(); name != "" && fillSpare(name, fill, lw.sync) == nil {
		if err := failpoint.Inject(FailpointSpareFilled); err != nil {
			_ = os.Remove(name)
			return "", false, err
		}
		lw.synced(path)
		return name, true, nil
	}
	if name, err = writeTemp(path, fill, lw.sync); err != nil {
		return "", false, err
	}
	lw.synced(path)
	return name, false, nil
}

// synced traces that the bytes to be published as path are durable.
func (lw localWrite) synced(path string) {
	if lw.sync {
		trace(syncEvent{Kind: eventFileSynced, Path: path})
	}
}

// writeTemp writes the object (fill) to "<path>#<random digits>" in path's directory, fsyncs
// (when sync) and closes it. The caller publishes and removes it.
func writeTemp(path string, fill fillFunc, sync bool) (string, error) {
	for range 100 {
		tmp := path + "#" + strconv.FormatUint(rand.Uint64(), 10)
		f, err := openFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		if err := writeClose(f, fill, sync); err != nil {
			_ = os.Remove(tmp)
			return "", err
		}
		return tmp, nil
	}
	return "", fmt.Errorf("no free temporary name next to %s", path)
}

// writeClose fills f, fsyncs it when sync, and closes it.
func writeClose(f *os.File, fill fillFunc, sync bool) error {
	err := fill(f)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// localDelete removes a file; a missing file or a directory (not an object) is a no-op.
func localDelete(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		return err
	}
	if fi.IsDir() {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	syncer.forget(path)
	return nil
}

// pruneEmptyDirs removes the subdirectories of dir that hold no files, and dir itself unless
// keep, so a deleted table does not leave a skeleton behind. Best effort: rmdir fails
// harmlessly on anything non-empty, such as a directory another writer just filled.
func pruneEmptyDirs(dir string, keep bool) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() {
			pruneEmptyDirs(filepath.Join(dir, e.Name()), false)
		}
	}
	if !keep {
		_ = os.Remove(dir)
	}
}

// mem:// buckets live for the life of the process, one per name, so that separate Opens (a
// writer and a reader in one test, say) see the same objects. memblob serialises writes and
// its IfNotExist check-and-insert under the bucket's own mutex, which makes PutIfAbsent atomic
// without any extra lock here.
var (
	memMu      sync.Mutex
	memBuckets = map[string]*blob.Bucket{}
)

func openMem(u *url.URL) (Store, error) {
	if u.Host == "" {
		return nil, fmt.Errorf("storage: open %q: mem URIs need a name (mem://name)", u.String())
	}
	if u.RawQuery != "" {
		return nil, fmt.Errorf("storage: open %q: mem URIs take no parameters", u.String())
	}
	prefix, err := cleanPrefix(u.Path)
	if err != nil {
		return nil, fmt.Errorf("storage: open %q: %w", u.String(), err)
	}
	memMu.Lock()
	b := memBuckets[u.Host]
	if b == nil {
		b = memblob.OpenBucket(&memblob.Options{NoMD5: true}) // nothing reads an object's MD5
		memBuckets[u.Host] = b
	}
	memMu.Unlock()
	// owner stays false: closing one handle must not empty the bucket for the others.
	return &store{b: b, scheme: "mem", host: u.Host, prefix: prefix, root: true, closed: new(atomic.Bool)}, nil
}

// listLocal lists a local root with the OS directly. fileblob's listing stats every entry it
// read from the directory and fails when one vanished in between, which is routine here: a
// concurrent writer's temp file is linked and removed while another process lists the same
// _versions/ directory. An entry that vanished was never listed, so it is skipped.
func (s *store) listLocal(ctx context.Context, full, delim string, withTemp bool) ([]Object, []string, error) {
	files := []Object{}
	dirs := []string{}
	add := func(rel string, d fs.DirEntry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		key, ok := strings.CutPrefix(rel, s.prefix)
		if !ok {
			return nil
		}
		if d.IsDir() {
			dirs = append(dirs, key)
			return nil
		}
		if !withTemp && (isTempName(key) || isFileblobTemp(key)) || strings.HasSuffix(key, ".attrs") {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		files = append(files, Object{Key: key, Size: info.Size(), ModTime: info.ModTime()})
		return nil
	}
	base := filepath.Join(s.dir, filepath.FromSlash(full))
	if delim == "/" {
		entries, err := os.ReadDir(base)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return files, dirs, nil // object-store semantics: no such "directory" lists empty
		}
		if err != nil {
			return nil, nil, err
		}
		for _, e := range entries {
			if full == "" && e.Name() == SpareDirName {
				continue
			}
			if err := add(full+e.Name(), e); err != nil {
				return nil, nil, err
			}
		}
	} else {
		if fi, err := os.Stat(base); err != nil || !fi.IsDir() {
			if err == nil || errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return files, dirs, nil
			}
			return nil, nil, err
		}
		spareDir := filepath.Join(s.dir, SpareDirName)
		err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil // vanished while walking
				}
				return err
			}
			if d.IsDir() {
				if p == spareDir {
					return filepath.SkipDir
				}
				return nil
			}
			rel, err := filepath.Rel(s.dir, p)
			if err != nil {
				return err
			}
			return add(filepath.ToSlash(rel), d)
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, err
		}
	}
	slices.SortFunc(files, func(a, b Object) int { return strings.Compare(a.Key, b.Key) })
	slices.Sort(dirs)
	return files, dirs, nil
}

// localGetRange reads length bytes at offset of the file at path with one pread(2): a data
// file's metadata and pages are read by many small ranges, for which fileblob's reader (a
// stat, an open, a seek and its own buffering each) costs several times the read.
func localGetRange(path string, offset, length int64) ([]byte, error) {
	f, err := openFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, localAbsence(err)
	}
	defer f.Close()
	return readRangeAt(f, offset, length)
}

// localAbsence marks an error opening or reading a key's file as ErrNotFound where the file
// is missing or is a directory (which opens, then fails to read: a directory is no object).
func localAbsence(err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EISDIR) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

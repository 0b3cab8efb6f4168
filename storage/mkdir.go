package storage

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// A directory a local write creates (a table's data/ on its first append, an index's
// _indices/<uuid>/, a new graph's root) is itself a name in its parent directory, and a power
// loss can take that name as it can a file's until the parent has been fsynced: with it would
// go every file published inside, whatever their own directory syncs. So with fsync on,
// makeDirs syncs the parent of each directory it creates before the write that needed it puts
// anything inside: a name is only ever published into a directory whose own name is durable,
// and the chain above it (dirsync.go) holds unchanged. It costs one directory sync per
// directory created, which a graph does once per table directory and once per index file set,
// never per commit.
//
// Two writes of this process may need the same missing directory at once (a compaction's data
// files written side by side into a new table's data/; an index's files into one new
// _indices/<uuid>/). The one that creates it syncs it; the other must not find it in place and
// publish into it before that sync ended, so it waits for the creation (dirCreations).

// dirCreations are the directories this process is creating, each with a channel closed once
// it exists and its name is durable (or its creation failed).
var dirCreations = struct {
	mu  sync.Mutex
	now map[string]chan struct{}
}{now: map[string]chan struct{}{}}

// makeDirs makes dir and any missing parent, as os.MkdirAll does; with sync (fsync on) it
// returns once each directory it created is durable in its parent, and once any of them that
// another write of this process is creating is.
func makeDirs(dir string, sync bool) error {
	fi, err := os.Stat(dir)
	if err == nil && fi.IsDir() {
		if sync {
			awaitCreation(dir)
		}
		return nil
	}
	if !sync {
		return os.MkdirAll(dir, 0o777)
	}
	for {
		mine, theirs, err := claimMissing(dir)
		if err != nil {
			return err
		}
		if theirs != nil {
			<-theirs // then look again: it may have failed, or made only part of the way
			continue
		}
		return createDurably(mine)
	}
}

// awaitCreation waits for dir's creation by another write of this process, if one is under
// way: a directory found in place may be one whose name is not durable yet.
func awaitCreation(dir string) {
	dirCreations.mu.Lock()
	ch := dirCreations.now[dir]
	dirCreations.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// claimMissing finds the directories of dir's chain that do not exist, outermost first, and
// claims them for this write (mine, each to be created and synced, then released by
// createDurably). If another write is creating one of them, it claims nothing and returns
// that creation's channel (theirs) to wait for.
func claimMissing(dir string) (mine []string, theirs chan struct{}, err error) {
	dirCreations.mu.Lock()
	defer dirCreations.mu.Unlock()
	for d := dir; ; {
		if ch := dirCreations.now[d]; ch != nil {
			return nil, ch, nil
		}
		fi, err := os.Stat(d) // following links, as os.MkdirAll does: a root may be one
		if err == nil {
			if !fi.IsDir() {
				return nil, nil, &fs.PathError{Op: "mkdir", Path: d, Err: syscall.ENOTDIR}
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, err
		}
		mine = append(mine, d)
		up := filepath.Dir(d)
		if up == d {
			break
		}
		d = up
	}
	for i, j := 0, len(mine)-1; i < j; i, j = i+1, j-1 {
		mine[i], mine[j] = mine[j], mine[i]
	}
	for _, d := range mine {
		dirCreations.now[d] = make(chan struct{})
	}
	return mine, nil, nil
}

// createDurably creates the claimed directories, outermost first, syncs the parent of each
// (the syncs of one parent grouped as every directory sync is, dirsync.go) and waits for
// them, then releases the claims, failed or not.
func createDurably(dirs []string) error {
	defer func() {
		dirCreations.mu.Lock()
		for _, d := range dirs {
			close(dirCreations.now[d])
			delete(dirCreations.now, d)
		}
		dirCreations.mu.Unlock()
	}()
	var syncs []*dirSync
	var err error
	for _, d := range dirs {
		if err = mkdir(d); err != nil {
			break // the directories made so far stay, as os.MkdirAll leaves them
		}
		syncs = append(syncs, syncer.created(d))
	}
	if werr := wait(syncs); err == nil {
		err = werr // a parent's sync failed: nothing may be published inside
	}
	return err
}

// mkdir makes d, or finds it made by another process meanwhile (whose name that process makes
// durable; syncing the parent here as well costs one sync and leaves no doubt).
func mkdir(d string) error {
	err := os.Mkdir(d, 0o777)
	if errors.Is(err, fs.ErrExist) {
		if fi, serr := os.Stat(d); serr == nil && fi.IsDir() {
			return nil
		}
	}
	return err
}

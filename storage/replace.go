package storage

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	gcs "cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azblobsdk "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	azblobblob "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
)

// ErrChanged: ReplaceIfUnchanged found the object holding other bytes than the caller last
// saw; it was left as it was.
var ErrChanged = errors.New("changed since it was read")

// ReplaceIfUnchanged is a compare-and-swap on a whole object: it replaces key with data only if
// the object still holds exactly old. An object that is gone is ErrNotFound and stays gone; one
// that holds anything else is ErrChanged and keeps it. Of writers replacing the same old bytes
// at once, at most one succeeds. It is how a writer rewrites an object another process may
// retire meanwhile (a recovery sidecar a new leader rolled back or removed), so that a writer
// that lost its lease re-creates and overwrites nothing.
//
// Each backend makes the check and the write one step: S3 a PUT with If-Match on the ETag
// (the MD5 of old for a plain PUT; otherwise the ETag read back, one HEAD and one GET more);
// GCS a write conditional on the generation and Azure on the ETag, both read first; a local
// root takes its directory's flock(2) against other replacers and exchanges the new file with
// the object in one renameat2(2) (RENAME_EXCHANGE), so a gone object is never re-created, then
// checks the bytes it displaced and exchanges them back when they were not old; mem:// holds
// the key's lock across the read and the write.
func (s *store) ReplaceIfUnchanged(ctx context.Context, key string, old, data []byte) error {
	full, err := s.begin(ctx, "storage.replace", key)
	if err == nil {
		switch s.scheme {
		case "file":
			err = localReplace(ctx, s.localWrite(), s.path(full), old, data)
		case "mem":
			err = s.memReplace(ctx, full, old, data)
		default:
			err = s.cloudReplace(ctx, full, old, data)
		}
	}
	return wrap(ctx, opReplace, key, err)
}

// memLocks serialise the writes of one mem:// key (by hash): ReplaceIfUnchanged holds it from
// its read to its write, and Put, PutIfAbsent and Delete take it too, so none of them lands
// between the two.
var (
	memLocks    [64]sync.Mutex
	memLockSeed = maphash.MakeSeed()
)

func (s *store) memLock(full string) func() {
	if s.scheme != "mem" {
		return func() {}
	}
	m := &memLocks[maphash.String(memLockSeed, s.host+"\x00"+full)%uint64(len(memLocks))]
	m.Lock()
	return m.Unlock
}

func (s *store) memReplace(ctx context.Context, full string, old, data []byte) error {
	defer s.memLock(full)()
	cur, err := s.b.ReadAll(ctx, full)
	if err != nil {
		return err
	}
	if !bytes.Equal(cur, old) {
		return ErrChanged
	}
	return writeAll(ctx, s.b, full, data, writeOpts)
}

// cloudReplace writes data on condition that the object is the version holding old.
func (s *store) cloudReplace(ctx context.Context, full string, old, data []byte) error {
	if s.scheme == "s3" {
		// A plain PUT's ETag is the MD5 of its bytes, so the common case costs one request.
		sum := md5.Sum(old)
		err := s.conditionalPut(ctx, full, data, `"`+hex.EncodeToString(sum[:])+`"`, 0)
		if err == nil || !isPreconditionFailed(err) {
			return err
		}
		// Changed, gone, or an ETag that is not an MD5 (SSE-KMS, a multipart upload): read.
	}
	attrs, err := s.b.Attributes(ctx, full)
	if err != nil {
		return err
	}
	var generation int64
	var ga gcs.ObjectAttrs
	if s.scheme == "gs" && attrs.As(&ga) {
		generation = ga.Generation
	}
	cur, err := s.b.ReadAll(ctx, full)
	if err != nil {
		return err
	}
	if !bytes.Equal(cur, old) {
		return ErrChanged
	}
	// The condition names the version the attributes came from: if the object changed after
	// them, even back to old, the write is refused, which errs on the side of writing nothing.
	err = s.conditionalPut(ctx, full, data, attrs.ETag, generation)
	if isPreconditionFailed(err) {
		return fmt.Errorf("%w: %w", ErrChanged, err)
	}
	return err
}

// conditionalPut writes data only over the object whose ETag is etag (GCS: whose generation is
// generation).
func (s *store) conditionalPut(ctx context.Context, full string, data []byte, etag string, generation int64) error {
	opts := *writeOpts
	opts.BeforeWrite = func(as func(any) bool) error {
		var s3in *transfermanager.UploadObjectInput
		var gobj **gcs.ObjectHandle
		var az *azblobsdk.UploadStreamOptions
		switch {
		case as(&s3in):
			s3in.IfMatch = &etag
		case as(&gobj):
			if generation == 0 {
				return errors.New("no generation to condition the write on")
			}
			// gcsblob makes its writer from the handle this points at once BeforeWrite returns.
			*gobj = (*gobj).If(gcs.Conditions{GenerationMatch: generation})
		case as(&az):
			e := azcore.ETag(etag)
			if az.AccessConditions == nil {
				az.AccessConditions = &azblobblob.AccessConditions{}
			}
			if az.AccessConditions.ModifiedAccessConditions == nil {
				az.AccessConditions.ModifiedAccessConditions = &azblobblob.ModifiedAccessConditions{}
			}
			az.AccessConditions.ModifiedAccessConditions.IfMatch = &e
		default:
			return fmt.Errorf("%s:// offers no conditional write to replace an object with", s.scheme)
		}
		return nil
	}
	return writeAll(ctx, s.b, full, data, &opts)
}

// localReplace publishes data as path if path still holds old. Replacers of one directory
// take turns on its lock; deleters do not, so the staged file is exchanged with path in one
// step, which fails when path is gone (nothing is re-created). The staged name then holds the
// displaced bytes: old means the replace took, anything else is put back with a second
// exchange (between the two a reader of path can see data).
func localReplace(ctx context.Context, lw localWrite, path string, old, data []byte) error {
	before := lw.barrier(path)
	// A spare when one is ready: an exchange (or a rename) works between two directories of
	// one file system, and the spare spares the replace a file creation, the dearest step of
	// a local write. Either way a gone object is found gone before anything is published and
	// nothing is created in its place: a spare is exchanged only with a name that exists, and
	// a temporary file cannot be made in a directory that does not.
	staged, spare, err := stageIn(lw, path, fillWith(data))
	if err != nil {
		return localAbsence(err)
	}
	defer os.Remove(staged)
	if err := lw.settle(ctx, before); err != nil {
		return err
	}
	unlock, err := lockDir(ctx, filepath.Dir(path))
	if err != nil {
		return localAbsence(err)
	}
	defer unlock()
	swapped, err := exchange(staged, path)
	if err != nil {
		if spare && errors.Is(err, syscall.EXDEV) {
			// path is on another file system than the spares: again with a temporary file
			// beside it. The retry takes the lock again; the deferred unlock is then a no-op.
			unlock()
			return localReplace(ctx, localWrite{sync: lw.sync}, path, old, data)
		}
		return localAbsence(err)
	}
	if !swapped {
		// The file system cannot exchange: compare, then rename. Against other replacers the
		// lock still holds; a delete between the two is undone, so this narrows that window
		// without closing it.
		cur, err := os.ReadFile(path)
		if err != nil {
			return localAbsence(err)
		}
		if !bytes.Equal(cur, old) {
			return ErrChanged
		}
		if err := os.Rename(staged, path); err != nil {
			return err
		}
		return lw.published(path, true)
	}
	displaced, err := os.ReadFile(staged)
	if err == nil && bytes.Equal(displaced, old) {
		return lw.published(path, true)
	}
	if _, xerr := exchange(staged, path); xerr != nil && !errors.Is(xerr, fs.ErrNotExist) {
		return fmt.Errorf("put back the object this replace displaced: %w", xerr)
	}
	if perr := lw.published(path, true); perr != nil {
		return perr
	}
	if err != nil {
		return err
	}
	return ErrChanged
}

// lockWait bounds how long a replace waits for another process's replace in the same
// directory: one holds the lock for a read and two renames, so a longer wait means that process
// is frozen there, and the caller gets EWOULDBLOCK (transient) to retry later rather than hang.
const lockWait = 10 * time.Second

// lockDir takes the exclusive flock(2) of dir, polling so that ctx and lockWait can end the
// wait. The kernel drops it when its holder dies, so a crash leaves no stale lock.
func lockDir(ctx context.Context, dir string) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(lockWait)
	for pause := 100 * time.Microsecond; ; pause = min(2*pause, 10*time.Millisecond) {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = f.Close() }, nil // closing the last descriptor releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", dir, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, ctx.Err()
		case <-time.After(pause):
		}
	}
}

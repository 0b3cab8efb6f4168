// Package storage is the single object-store adapter the rest of the worker goes through, so
// that Lance datasets behave the same on local disk, in memory and in S3, GCS or Azure Blob.
//
// Lance commits a version by creating a manifest file that must not already exist. Every
// backend therefore offers PutIfAbsent with cross-process atomicity: hard-link publishing on
// local disk, the bucket lock in memory, and a conditional PUT (If-None-Match: *) on the cloud
// backends. Put is an atomic whole-object replace everywhere, and ReplaceIfUnchanged a
// compare-and-swap of a whole object (replace.go).
//
// # URIs
//
//	/abs/path, rel/path      local directory (created if missing unless MustExist; relative paths are made absolute)
//	                         (a path never starts with a scheme: "s3:/b", "s3:b", "foo:x" are refused, "./foo:x" is local)
//	file:///abs/path         local directory
//	mem://name[/prefix]      process-global in-memory bucket; every Open of "mem://name" shares it
//	s3://bucket[/prefix]?... gocloud s3blob URL parameters (region, endpoint, use_path_style, ...)
//	gs://bucket[/prefix]     gocloud gcsblob
//	azblob://container[/prefix]
//
// Any other scheme, a known one spelt wrongly, or one without its bucket or name is a
// *URIError (CheckURI tells without opening anything).
//
// # Keys
//
// Keys are '/'-separated and relative to the store's root. They must be valid UTF-8 and must
// not be empty, start or end with '/', contain empty, "." or ".." segments, control characters
// or gocloud's escape marker "__0x" — such keys would name a different file on disk than in
// the bucket, breaking Location. On local stores keys ending in ".attrs" are rejected as well,
// because fileblob refuses to read them. Objects whose last segment looks like "<name>#<digits>"
// are in-flight temporary files of a local writer; List and ListDir never show them.
//
// # Errors
//
// Every failure of a Store method is an *OpError carrying the operation (the failpoint op name below) and the key.
// Match causes with errors.Is: ErrNotFound, ErrAlreadyExists, ErrOutOfRange, ErrInvalidKey,
// context.Canceled, context.DeadlineExceeded; failpoint.IsInjected for injected faults.
//
// # Failpoints
//
// Every I/O method first runs failpoint.Inject with one of these names (see internal/failpoint):
//
//	storage.get  storage.get_if_exists  storage.get_range  storage.size  storage.exists
//	storage.put  storage.put_if_absent  storage.list  storage.list_dir
//	storage.delete  storage.delete_prefix  storage.replace
//
// An injected error comes back as *OpError{Op: "<op>"} wrapping the *failpoint.Error.
// DeletePrefix lists and deletes internally without firing storage.list or storage.delete,
// so each point targets exactly one public method. Compose (compose.go), a Put of the
// concatenation of byte ranges of other objects, fires storage.put, and storage.get_range for
// each range it reads.
//
// # Latency
//
// Tests and the bench open a root WithLatency to delay every request as a distant object store
// would and to count the sequential round trips a piece of work waits for (latency.go).
package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"
)

// Store is a flat key space of immutable-ish objects under one root. Keys are '/'-separated,
// relative to the root, never start with '/'.
type Store interface {
	// URI is the root as opened, normalised so that Open(URI()) reaches the same objects.
	URI() string
	// Location names key the way another tool (Lance, a CLI) would: an absolute OS path for
	// local roots, "<scheme>://<bucket>/<prefix>/<key>" otherwise.
	Location(key string) string
	// KeyOf inverts Location; false when location is outside this root.
	KeyOf(location string) (string, bool)
	// Sub shares the underlying bucket so that nested tables cost no new connections; closing
	// a Sub does nothing.
	Sub(prefix string) Store

	// Get treats absence as a failure (ErrNotFound); use GetIfExists where absence is normal.
	Get(ctx context.Context, key string) ([]byte, error)
	// GetIfExists costs exactly one request, so probing for the next manifest is cheap. Only a
	// definite "no such object" from the backend means absent; every other failure is an error.
	GetIfExists(ctx context.Context, key string) ([]byte, bool, error)
	// GetRange never returns fewer bytes than asked: a short object is ErrOutOfRange, so a
	// truncated data file cannot be mistaken for valid data.
	GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error)
	// Size reads metadata only, never the object (absent -> ErrNotFound).
	Size(ctx context.Context, key string) (int64, error)
	// Exists uses object-store semantics on every backend: a "directory" is not an object.
	Exists(ctx context.Context, key string) (bool, error)
	// Put replaces the object atomically: readers see the old or the new bytes, never a mix.
	Put(ctx context.Context, key string, data []byte) error
	// PutIfAbsent is the commit primitive: of any number of concurrent writers, in any number
	// of processes sharing the backend, exactly one succeeds; the others get ErrAlreadyExists
	// and the winner's object is untouched.
	PutIfAbsent(ctx context.Context, key string, data []byte) error
	// ReplaceIfUnchanged replaces the object with data only if it still holds exactly old:
	// ErrNotFound (and nothing created) when it is gone, ErrChanged (and nothing changed) when
	// it holds other bytes; of concurrent replacers of the same old bytes at most one succeeds.
	ReplaceIfUnchanged(ctx context.Context, key string, old, data []byte) error
	// List returns every object under the directory prefix ("" = whole store), recursively,
	// sorted by key. The prefix is a directory, not a string prefix, so "t/a" never matches
	// "t/ab/x".
	List(ctx context.Context, prefix string) ([]Object, error)
	// ListDir lists one level under the directory prefix. dirs are full keys (relative to
	// the root) without the trailing slash, so they can be passed back to ListDir.
	ListDir(ctx context.Context, prefix string) (files []Object, dirs []string, err error)
	// Delete is idempotent, so cleanup can be retried blindly.
	Delete(ctx context.Context, key string) error
	// DeletePrefix removes every object under the directory prefix, including leftover
	// temporary files; absent is fine.
	DeletePrefix(ctx context.Context, prefix string) error
	// Close ends this handle: later calls fail instead of answering "absent" or "exists". It
	// releases the bucket only if this Store opened it; mem buckets outlive every handle. A
	// local root with fsync on returns once what the process wrote is durable, or with the
	// latched *SyncError when a directory sync failed.
	Close() error
}

// Object is one listed object; Key is relative to the Store's root.
type Object struct {
	Key     string
	Size    int64
	ModTime time.Time // last modified, as the store reports it (zero when it does not)
}

// Option adjusts how Open opens a store.
type Option func(*openOptions)

type openOptions struct {
	noFsync   bool
	mustExist bool
	log       LogFunc
	latency   *Latency // test and bench only (latency.go)
}

// MustExist opens a local root only if its directory exists (*NoGraphError otherwise), and so
// never creates one: for commands that only read, where a mistyped root must fail rather than
// leave an empty directory behind. Other schemes ignore it (a bucket is never created).
func MustExist() Option { return func(o *openOptions) { o.mustExist = true } }

// NoGraphError is a root that holds no graph: a local directory that does not exist under
// MustExist, or a root without a schema where one is needed. Hint says what to do, if anything.
type NoGraphError struct {
	Root, Hint string
}

func (e *NoGraphError) Error() string {
	msg := "no graph at " + e.Root
	if e.Hint != "" {
		msg += ": " + e.Hint
	}
	return msg
}

// Unwrap makes a missing root ErrNotFound.
func (e *NoGraphError) Unwrap() error { return ErrNotFound }

// WithLocalFsync says whether a local root fsyncs each written file before its name is
// published and its directory before anything written after it (the default; a PutIfAbsent is
// durable when it returns, see dirsync.go). Off, a process crash still never shows a torn or
// half-published object (temp file, then link or rename), but a power loss may lose the newest
// commits, which is what the official Lance engine's local store risks too. Other schemes
// ignore it.
func WithLocalFsync(on bool) Option { return func(o *openOptions) { o.noFsync = !on } }

// Open opens the store named by uri (see the package comment for the schemes).
func Open(ctx context.Context, uri string, opts ...Option) (Store, error) {
	var o openOptions
	for _, opt := range opts {
		opt(&o)
	}
	st, err := open(ctx, uri, o)
	if err != nil || o.latency == nil {
		return st, err
	}
	return &latencyStore{in: st, l: o.latency}, nil
}

func open(ctx context.Context, uri string, o openOptions) (Store, error) {
	u, err := parseURI(uri)
	if err != nil {
		return nil, err
	}
	switch {
	case u == nil:
		return openLocal(uri, o)
	case u.Scheme == "file":
		return openLocal(filepath.FromSlash(u.Path), o)
	case u.Scheme == "mem":
		return openMem(u)
	default:
		return openCloud(ctx, u, o)
	}
}

// cleanPrefix turns a URI path or Sub argument into "" or "a/b/".
func cleanPrefix(p string) (string, error) {
	p = strings.Trim(p, "/")
	if p == "" {
		return "", nil
	}
	if err := checkKey(p); err != nil {
		return "", err
	}
	return p + "/", nil
}

// dirPrefix turns a List/ListDir/DeletePrefix argument into "" or "a/b/".
func dirPrefix(p string) (string, error) {
	if strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("%w: %q starts with '/'", ErrInvalidKey, p)
	}
	p = strings.TrimSuffix(p, "/")
	if p == "" {
		return "", nil
	}
	if err := checkKey(p); err != nil {
		return "", err
	}
	return p + "/", nil
}

func checkKey(key string) error {
	bad := func(why string) error { return fmt.Errorf("%w: %q %s", ErrInvalidKey, key, why) }
	switch {
	case key == "":
		return bad("is empty")
	case !utf8.ValidString(key):
		return bad("is not valid UTF-8")
	case strings.Contains(key, "__0x"):
		return bad(`contains gocloud's escape marker "__0x"`)
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f {
			return bad("contains a control character")
		}
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return bad("has an empty segment (leading, trailing or double '/')")
		case ".", "..":
			return bad(`has a "." or ".." segment`)
		}
	}
	return nil
}

// isTempName reports whether the last segment of key is "<name>#<digits>": a local writer's
// temporary file, published by rename or link and removed on every exit path.
func isTempName(key string) bool {
	base := key[strings.LastIndexByte(key, '/')+1:]
	i := strings.LastIndexByte(base, '#')
	if i <= 0 || i == len(base)-1 {
		return false
	}
	for _, c := range base[i+1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// isFileblobTemp matches "<name>.<hex>.tmp", the temporary file gocloud's fileblob writer puts
// next to its target when NoTempDir is set. This package never writes through fileblob, but
// another gocloud-based tool sharing the directory might; the hex part is a UnixNano, so at
// least 12 digits are required to keep ordinary ".tmp" keys visible.
func isFileblobTemp(key string) bool {
	base := key[strings.LastIndexByte(key, '/')+1:]
	rest, ok := strings.CutSuffix(base, ".tmp")
	if !ok {
		return false
	}
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 {
		return false
	}
	hex := rest[i+1:]
	if len(hex) < 12 || len(hex) > 16 {
		return false
	}
	for _, c := range hex {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

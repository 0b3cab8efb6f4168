package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // registers azblob://
	_ "gocloud.dev/blob/gcsblob"   // registers gs://
	"gocloud.dev/gcerrors"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
)

// store implements Store for every backend over one *blob.Bucket. Local roots differ only in
// how they write and delete (see local.go), because fileblob's own writer is neither durable
// nor safe for cross-process create-if-absent.
type store struct {
	b      *blob.Bucket
	scheme string // file, mem, s3, gs, azblob
	host   string // bucket / container / mem name; "" for file
	query  string // encoded URL parameters of cloud roots, kept so URI() can be reopened
	dir    string // file: absolute directory the bucket is rooted at
	prefix string // "" or "a/b/": where this Store sits inside the bucket
	bad    error  // set on a Sub whose prefix is invalid; every operation reports it
	root   bool   // came from Open: Close ends this handle (a Sub's Close does nothing)
	owner  bool   // Close also closes b (false for the process-global mem buckets)
	// closed is shared by a handle and its Subs. Checking it here keeps gocloud's own
	// "bucket closed" error (code FailedPrecondition) from ever reaching PutIfAbsent, where
	// it would read as "already exists".
	closed *atomic.Bool
	spares *spares // local roots: files created ahead of writes (shared with Subs)
	// noFsync: local writes skip fsync (WithLocalFsync(false)); the zero value is durable.
	noFsync bool
	// bucketExists asks the store whether the bucket itself is there (nil: gocloud's
	// IsAccessible, a one-object listing).
	bucketExists func(context.Context) (bool, error)
}

// localWrite is how this local root writes.
func (s *store) localWrite() localWrite { return localWrite{sp: s.spares, sync: !s.noFsync} }

var errClosed = errors.New("store is closed")

// deleteConcurrency bounds DeletePrefix's in-flight deletes.
const deleteConcurrency = 16

var writeOpts = &blob.WriterOptions{ContentType: "application/octet-stream"}

func openCloud(ctx context.Context, u *url.URL, o openOptions) (Store, error) {
	if u.Host == "" {
		return nil, fmt.Errorf("storage: open %q: missing bucket name", u.Redacted())
	}
	q := u.Query()
	if q.Has("prefix") {
		return nil, fmt.Errorf("storage: open %q: put the prefix in the path, not in ?prefix=", u.Redacted())
	}
	prefix, err := cleanPrefix(u.Path)
	if err != nil {
		return nil, fmt.Errorf("storage: open %q: %w", u.Redacted(), err)
	}
	var b *blob.Bucket
	var exists func(context.Context) (bool, error)
	if u.Scheme == "s3" {
		b, exists, err = openS3(ctx, u.Host, q, o.log)
	} else {
		bu := url.URL{Scheme: u.Scheme, Host: u.Host, RawQuery: q.Encode()}
		b, err = blob.OpenBucket(ctx, bu.String())
	}
	if err != nil {
		return nil, fmt.Errorf("storage: open %q: %w", u.Redacted(), err)
	}
	return &store{b: b, scheme: u.Scheme, host: u.Host, query: q.Encode(), prefix: prefix, root: true, owner: true, closed: new(atomic.Bool),
		bucketExists: exists}, nil
}

func (s *store) local() bool { return s.scheme == "file" }

func (s *store) URI() string {
	if s.local() {
		p := filepath.ToSlash(s.dir)
		if s.prefix != "" {
			p = strings.TrimSuffix(p, "/") + "/" + strings.TrimSuffix(s.prefix, "/")
		}
		return (&url.URL{Scheme: "file", Path: p}).String()
	}
	u := url.URL{Scheme: s.scheme, Host: s.host, RawQuery: s.query}
	if s.prefix != "" {
		u.Path = "/" + strings.TrimSuffix(s.prefix, "/")
	}
	return u.String()
}

func (s *store) Location(key string) string {
	if s.local() {
		return filepath.Join(s.dir, filepath.FromSlash(s.prefix+key))
	}
	return s.scheme + "://" + s.host + "/" + s.prefix + key
}

func (s *store) KeyOf(location string) (string, bool) {
	var rest string
	if s.local() {
		if strings.HasPrefix(location, "file://") {
			u, err := url.Parse(location)
			if err != nil || (u.Host != "" && u.Host != "localhost") {
				return "", false
			}
			location = filepath.FromSlash(u.Path)
		}
		root := s.dir
		if !strings.HasSuffix(root, string(filepath.Separator)) {
			root += string(filepath.Separator)
		}
		r, ok := strings.CutPrefix(location, root)
		if !ok {
			return "", false
		}
		rest = filepath.ToSlash(r)
	} else {
		var ok bool
		rest, ok = strings.CutPrefix(location, s.scheme+"://"+s.host+"/")
		if !ok {
			return "", false
		}
	}
	key, ok := strings.CutPrefix(rest, s.prefix)
	if !ok || checkKey(key) != nil {
		return "", false
	}
	return key, true
}

func (s *store) Sub(prefix string) Store {
	sub := *s
	sub.root, sub.owner = false, false
	if s.bad != nil {
		return &sub
	}
	p, err := cleanPrefix(prefix)
	if err != nil {
		sub.bad = err
		return &sub
	}
	sub.prefix = s.prefix + p
	return &sub
}

func (s *store) Close() error {
	if !s.root || s.closed.Swap(true) {
		return nil
	}
	s.spares.close()
	var synced error
	if s.local() && !s.noFsync {
		synced = wait(syncer.barrier()) // what this process wrote is durable once its root is closed
	}
	if !s.owner {
		return synced
	}
	return errors.Join(synced, s.b.Close())
}

// begin runs the checks every keyed operation shares and returns the bucket key.
func (s *store) begin(ctx context.Context, point, key string) (string, error) {
	if err := failpoint.Inject(point); err != nil {
		return "", err
	}
	if s.closed.Load() {
		return "", errClosed
	}
	if s.bad != nil {
		return "", s.bad
	}
	if err := checkKey(key); err != nil {
		return "", err
	}
	if s.local() && strings.HasSuffix(key, ".attrs") {
		return "", fmt.Errorf("%w: %q: fileblob cannot read keys ending in .attrs", ErrInvalidKey, key)
	}
	if s.local() && inSpareDir(s.prefix+key) {
		return "", fmt.Errorf("%w: %q: %s/ holds the store's spare files", ErrInvalidKey, key, SpareDirName)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return s.prefix + key, nil
}

// beginDir is begin for directory-prefix operations.
func (s *store) beginDir(ctx context.Context, point, prefix string) (string, error) {
	if err := failpoint.Inject(point); err != nil {
		return "", err
	}
	if s.closed.Load() {
		return "", errClosed
	}
	if s.bad != nil {
		return "", s.bad
	}
	p, err := dirPrefix(prefix)
	if err != nil {
		return "", err
	}
	if s.local() && inSpareDir(s.prefix+p) {
		return "", fmt.Errorf("%w: %q: %s/ holds the store's spare files", ErrInvalidKey, prefix, SpareDirName)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return s.prefix + p, nil
}

func (s *store) Get(ctx context.Context, key string) ([]byte, error) {
	full, err := s.begin(ctx, "storage.get", key)
	if err != nil {
		return nil, wrap(ctx, opGet, key, err)
	}
	data, err := s.readAll(ctx, full)
	if err != nil {
		return nil, wrap(ctx, opGet, key, err)
	}
	return data, nil
}

func (s *store) GetIfExists(ctx context.Context, key string) ([]byte, bool, error) {
	full, err := s.begin(ctx, "storage.get_if_exists", key)
	if err != nil {
		return nil, false, wrap(ctx, opGetIfExists, key, err)
	}
	data, err := s.readAll(ctx, full)
	if err != nil {
		err = wrap(ctx, opGetIfExists, key, err)
		if errors.Is(err, ErrNotFound) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return data, true, nil
}

// readAll reads a whole object. A local file is read directly: gocloud's reader copies it
// through a buffer grown as it goes, several times slower for an object of megabytes (the
// writer's checkpoint is read at every open).
func (s *store) readAll(ctx context.Context, full string) ([]byte, error) {
	if !s.local() {
		return s.b.ReadAll(ctx, full)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	data, err := readFile(s.path(full))
	switch {
	case err == nil:
		return data, nil
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.EISDIR):
		return nil, fmt.Errorf("%w: %w", ErrNotFound, err) // a directory is no object
	}
	return nil, err
}

// beginRange is begin for a read of length bytes at offset of key (GetRange, and Compose's
// ranges), which refuses a negative offset or length.
func (s *store) beginRange(ctx context.Context, key string, offset, length int64) (string, error) {
	full, err := s.begin(ctx, "storage.get_range", key)
	if err == nil && (offset < 0 || length < 0) {
		err = fmt.Errorf("%w: negative offset %d or length %d", ErrOutOfRange, offset, length)
	}
	return full, err
}

func (s *store) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	full, err := s.beginRange(ctx, key, offset, length)
	if err != nil {
		return nil, wrap(ctx, opGetRange, key, err)
	}
	if length == 0 {
		// S3 cannot serve an empty range (it reads one byte, which fails at the end of the
		// object), so the bounds check goes through Attributes on every backend alike.
		a, err := s.b.Attributes(ctx, full)
		if err == nil && offset > a.Size {
			err = fmt.Errorf("%w: offset %d, object size %d", ErrOutOfRange, offset, a.Size)
		}
		if err != nil {
			return nil, wrap(ctx, opGetRange, key, err)
		}
		return []byte{}, nil
	}
	if s.local() && length <= 64<<20 {
		b, err := localGetRange(s.path(full), offset, length)
		return b, wrap(ctx, opGetRange, key, err)
	}
	r, err := s.b.NewRangeReader(ctx, full, offset, length, nil)
	if err != nil {
		return nil, wrap(ctx, opGetRange, key, err)
	}
	defer r.Close()
	if length <= 64<<20 {
		// The common case, read into exactly its size: a bytes.Buffer would grow once more to
		// find the end, doubling what every range read allocates.
		buf := make([]byte, length)
		n, err := io.ReadFull(r, buf)
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w: wanted %d bytes at offset %d, got %d", ErrOutOfRange, length, offset, n)
		}
		if err != nil {
			return nil, wrap(ctx, opGetRange, key, err)
		}
		return buf, nil
	}
	var buf bytes.Buffer // a length no read is trusted to allocate up front
	buf.Grow(64 << 20)
	n, err := buf.ReadFrom(io.LimitReader(r, length))
	if err == nil && n != length {
		err = fmt.Errorf("%w: wanted %d bytes at offset %d, got %d", ErrOutOfRange, length, offset, n)
	}
	if err != nil {
		return nil, wrap(ctx, opGetRange, key, err)
	}
	return buf.Bytes(), nil
}

func (s *store) Size(ctx context.Context, key string) (int64, error) {
	full, err := s.begin(ctx, "storage.size", key)
	if err != nil {
		return 0, wrap(ctx, opSize, key, err)
	}
	a, err := s.b.Attributes(ctx, full)
	if err != nil {
		return 0, wrap(ctx, opSize, key, err)
	}
	return a.Size, nil
}

func (s *store) Exists(ctx context.Context, key string) (bool, error) {
	full, err := s.begin(ctx, "storage.exists", key)
	if err != nil {
		return false, wrap(ctx, opExists, key, err)
	}
	_, err = s.b.Attributes(ctx, full)
	if err != nil {
		err = wrap(ctx, opExists, key, err)
		if errors.Is(err, ErrNotFound) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

func (s *store) Put(ctx context.Context, key string, data []byte) error {
	full, err := s.begin(ctx, "storage.put", key)
	if err == nil {
		if s.local() {
			err = localPut(ctx, s.localWrite(), s.path(full), fillWith(data))
		} else {
			unlock := s.memLock(full)
			err = writeAll(ctx, s.b, full, data, writeOpts)
			unlock()
		}
	}
	return wrap(ctx, opPut, key, err)
}

// writeAll writes data as the object key in one request. Unlike blob.Bucket.WriteAll it sends
// no Content-MD5: that costs two MD5 passes over every byte written (its sum, then the
// writer's check of it), a third of a compaction's time on mem://, and the S3 SDK already
// checksums each PutObject itself (CRC32 by default).
func writeAll(ctx context.Context, b *blob.Bucket, key string, data []byte, opts *blob.WriterOptions) error {
	w, err := b.NewWriter(ctx, key, opts)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		_ = w.Close()
		return err
	}
	return w.Close()
}

func (s *store) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	full, err := s.begin(ctx, "storage.put_if_absent", key)
	if err == nil {
		if s.local() {
			err = localPutIfAbsent(ctx, s.localWrite(), s.path(full), fillWith(data))
		} else {
			// s3blob, gcsblob and azureblob send this as a conditional PUT (If-None-Match: *,
			// ifGenerationMatch=0, If-None-Match: * respectively), so the service decides;
			// memblob checks and inserts under its bucket mutex, which every Open of the
			// same mem:// name shares.
			opts := *writeOpts
			opts.IfNotExist = true
			unlock := s.memLock(full)
			err = writeAll(ctx, s.b, full, data, &opts)
			unlock()
		}
	}
	return wrap(ctx, opPutIfAbsent, key, err)
}

func (s *store) List(ctx context.Context, prefix string) ([]Object, error) {
	full, err := s.beginDir(ctx, "storage.list", prefix)
	if err != nil {
		return nil, wrap(ctx, opList, prefix, err)
	}
	files, _, err := s.list(ctx, full, "", false)
	if err != nil {
		return nil, wrap(ctx, opList, prefix, err)
	}
	return files, nil
}

func (s *store) ListDir(ctx context.Context, prefix string) ([]Object, []string, error) {
	full, err := s.beginDir(ctx, "storage.list_dir", prefix)
	if err != nil {
		return nil, nil, wrap(ctx, opListDir, prefix, err)
	}
	files, dirs, err := s.list(ctx, full, "/", false)
	if err != nil {
		return nil, nil, wrap(ctx, opListDir, prefix, err)
	}
	return files, dirs, nil
}

// list returns keys relative to the store root, sorted; temporary files only when withTemp.
func (s *store) list(ctx context.Context, full, delim string, withTemp bool) ([]Object, []string, error) {
	if s.local() {
		return s.listLocal(ctx, full, delim, withTemp)
	}
	files := []Object{}
	dirs := []string{}
	it := s.b.List(&blob.ListOptions{Prefix: full, Delimiter: delim})
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil && len(files) == 0 && len(dirs) == 0 && gcerrors.Code(err) == gcerrors.NotFound {
			// Some S3 servers (gofakes3's filesystem backend among them) answer a listing
			// under a prefix that holds nothing with NoSuchBucket. A bucket that answers is
			// there, and then nothing is under the prefix; a bucket that does not keeps the error.
			exists := s.bucketExists
			if exists == nil {
				exists = s.b.IsAccessible
			}
			if ok, aerr := exists(ctx); aerr == nil && ok {
				break
			}
		}
		if err != nil {
			return nil, nil, err
		}
		key, ok := strings.CutPrefix(o.Key, s.prefix)
		if !ok {
			continue
		}
		if o.IsDir {
			dirs = append(dirs, strings.TrimSuffix(key, "/"))
			continue
		}
		if !withTemp && (isTempName(key) || (s.local() && isFileblobTemp(key))) {
			continue
		}
		files = append(files, Object{Key: key, Size: o.Size, ModTime: o.ModTime})
	}
	slices.SortFunc(files, func(a, b Object) int { return strings.Compare(a.Key, b.Key) })
	slices.Sort(dirs)
	return files, slices.Compact(dirs), nil
}

func (s *store) Delete(ctx context.Context, key string) error {
	full, err := s.begin(ctx, "storage.delete", key)
	if err == nil {
		err = s.delete(ctx, full)
	}
	return wrap(ctx, opDelete, key, err)
}

func (s *store) delete(ctx context.Context, full string) error {
	if s.local() {
		if err := s.localWrite().wait(ctx); err != nil {
			return err
		}
		return localDelete(s.path(full))
	}
	unlock := s.memLock(full)
	err := s.b.Delete(ctx, full)
	unlock()
	if err != nil && isAbsent(err) {
		return nil
	}
	return err
}

func (s *store) DeletePrefix(ctx context.Context, prefix string) error {
	full, err := s.beginDir(ctx, "storage.delete_prefix", prefix)
	if err != nil {
		return wrap(ctx, opDeletePrefix, prefix, err)
	}
	if s.local() {
		if err := s.localWrite().wait(ctx); err != nil {
			return wrap(ctx, opDeletePrefix, prefix, err)
		}
	}
	if full == "" {
		s.spares.drain() // emptying the whole root empties it of spares too
	}
	files, _, err := s.list(ctx, full, "", true)
	if err != nil {
		return wrap(ctx, opDeletePrefix, prefix, err)
	}
	// Deletes are independent requests (two each on S3: s3blob HEADs first), so a table with
	// thousands of files is deleted a batch of requests at a time rather than one by one.
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		sem      = make(chan struct{}, deleteConcurrency)
	)
	for _, o := range files {
		sem <- struct{}{}
		mu.Lock()
		stop := firstErr != nil
		mu.Unlock()
		if stop {
			<-sem
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := s.delete(ctx, s.prefix+o.Key); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("delete %q: %w", o.Key, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return wrap(ctx, opDeletePrefix, prefix, firstErr)
	}
	if s.local() {
		// The opened root directory stays (Open created or found it); a Sub's does not.
		pruneEmptyDirs(s.path(strings.TrimSuffix(full, "/")), full == "")
	}
	return nil
}

// path is the OS path of a bucket key on a local root.
func (s *store) path(full string) string {
	return filepath.Join(s.dir, filepath.FromSlash(full))
}

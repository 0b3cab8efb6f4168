package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// Ranges reads several ranges of one object. On a local root it opens the object's file once,
// on the first read, and reads every range through it: a GetRange opens and closes the file
// each time, and a page-copy compaction reads each input's footer and then every mini-block
// page's chunk table (about six reads an input), so the opens were most of its reads' cost.
// Elsewhere, and after Close, each read is the store's GetRange. Every read behaves as GetRange
// does: the same failpoint, checks, errors and out-of-range answers. Safe for concurrent use.
type Ranges struct {
	st    Store
	key   string
	local *store // nil: each read is st.GetRange

	mu     sync.Mutex
	f      *os.File
	closed bool
}

// OpenRanges prepares reads of ranges of key in st. It opens nothing yet, so it cannot fail:
// a missing object is the first read's ErrNotFound, as GetRange's.
func OpenRanges(st Store, key string) *Ranges {
	r := &Ranges{st: st, key: key}
	if s, ok := st.(*store); ok && s.local() {
		r.local = s
	}
	return r
}

// GetRange is st.GetRange(ctx, key, offset, length).
func (r *Ranges) GetRange(ctx context.Context, offset, length int64) ([]byte, error) {
	s := r.local
	if s == nil || length == 0 || length > 64<<20 || r.isClosed() {
		return r.st.GetRange(ctx, r.key, offset, length)
	}
	full, err := s.beginRange(ctx, r.key, offset, length)
	if err != nil {
		return nil, wrap(ctx, opGetRange, r.key, err)
	}
	f, err := r.file(s.path(full))
	if err != nil {
		return nil, wrap(ctx, opGetRange, r.key, err)
	}
	if f == nil { // closed since the check above
		return r.st.GetRange(ctx, r.key, offset, length)
	}
	b, err := readRangeAt(f, offset, length)
	return b, wrap(ctx, opGetRange, r.key, err)
}

// file is the object's open file, opened on the first call; nil after Close.
func (r *Ranges) file(path string) (*os.File, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
		return nil, nil
	case r.f == nil:
		f, err := openFile(path, os.O_RDONLY, 0)
		if err != nil {
			return nil, localAbsence(err)
		}
		r.f = f
	}
	return r.f, nil
}

func (r *Ranges) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// Close releases the open file, if any; reads after it are GetRanges.
func (r *Ranges) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

// readRangeAt reads exactly length bytes of f at offset; a short file is ErrOutOfRange.
func readRangeAt(f *os.File, offset, length int64) ([]byte, error) {
	buf := make([]byte, length)
	n, err := f.ReadAt(buf, offset)
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: wanted %d bytes at offset %d, got %d", ErrOutOfRange, length, offset, n)
	}
	if err != nil {
		return nil, localAbsence(err)
	}
	return buf, nil
}

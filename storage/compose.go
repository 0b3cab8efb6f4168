package storage

import (
	"context"
	"fmt"
	"io"
	"os"
)

// Part is one piece of an object Compose writes: Data when Source is nil, else Length bytes
// at Offset of the object Key of Source.
type Part struct {
	Data           []byte
	Source         Store
	Key            string
	Offset, Length int64
}

// Size is the bytes the part adds to the object.
func (p Part) Size() int64 {
	if p.Source == nil {
		return int64(len(p.Data))
	}
	return p.Length
}

// ComposesLocally reports whether Compose into dst copies the ranges of objects of srcs in the
// kernel (copy_file_range(2)) rather than through this process: dst and every src are local
// roots, opened without a latency wrapper (which must see each request).
func ComposesLocally(dst Store, srcs ...Store) bool {
	for _, st := range append([]Store{dst}, srcs...) {
		if s, ok := st.(*store); !ok || !s.local() {
			return false
		}
	}
	return true
}

// Compose writes key as Put would (an atomic whole-object replace, durable as the store's
// writes are) with the concatenation of parts. Where ComposesLocally holds, the ranges never
// pass through this process: the kernel copies them from file to file, which on a local
// disk is several times cheaper than reading them and writing them again, and takes no heap.
// Elsewhere each range is read (GetRange) and the object written with one Put. Nothing is
// written when it fails. Errors are *OpError: Op "put" and key for the write (its failpoint is
// storage.put's, as the write is one), Op "get_range" and the part's key for a range that
// cannot be read: ErrNotFound, or ErrOutOfRange when it reaches past its object's end.
func Compose(ctx context.Context, st Store, key string, parts []Part) error {
	if err := ctx.Err(); err != nil {
		return wrap(ctx, opPut, key, err)
	}
	srcs := make([]Store, 0, len(parts))
	for _, p := range parts {
		if p.Source != nil {
			srcs = append(srcs, p.Source)
		}
	}
	if !ComposesLocally(st, srcs...) {
		return composeByReading(ctx, st, key, parts)
	}
	s := st.(*store)
	full, err := s.begin(ctx, "storage.put", key)
	if err == nil {
		err = localPut(ctx, s.localWrite(), s.path(full), func(f *os.File) error { return fillParts(ctx, f, parts) })
	}
	return wrap(ctx, opPut, key, err)
}

// composeByReading is Compose for stores the kernel cannot copy between.
func composeByReading(ctx context.Context, st Store, key string, parts []Part) error {
	var size int64
	for _, p := range parts {
		if p.Offset < 0 || p.Length < 0 {
			return &OpError{Op: opGetRange, Key: p.Key, Err: fmt.Errorf("%w: negative offset %d or length %d", ErrOutOfRange, p.Offset, p.Length)}
		}
		size += p.Size()
	}
	buf := make([]byte, 0, size)
	for _, p := range parts {
		if p.Source == nil {
			buf = append(buf, p.Data...)
			continue
		}
		b, err := p.Source.GetRange(ctx, p.Key, p.Offset, p.Length)
		if err != nil {
			return err
		}
		buf = append(buf, b...)
	}
	return st.Put(ctx, key, buf)
}

// fillParts writes parts into f, ranges by copy_file_range (os.File.ReadFrom takes that path
// for a limited *os.File), falling back to a copy through a buffer where the kernel cannot.
func fillParts(ctx context.Context, f *os.File, parts []Part) error {
	for _, p := range parts {
		if err := ctx.Err(); err != nil {
			return err
		}
		if p.Source == nil {
			if _, err := f.Write(p.Data); err != nil {
				return err
			}
			continue
		}
		if err := copyRange(ctx, f, p); err != nil {
			return err
		}
	}
	return nil
}

// copyRange appends the range p names to f.
func copyRange(ctx context.Context, f *os.File, p Part) error {
	src := p.Source.(*store)
	full, err := src.beginRange(ctx, p.Key, p.Offset, p.Length)
	if err != nil {
		return wrap(ctx, opGetRange, p.Key, err)
	}
	in, err := openFile(src.path(full), os.O_RDONLY, 0)
	if err != nil {
		return wrap(ctx, opGetRange, p.Key, localAbsence(err))
	}
	defer in.Close()
	if _, err := in.Seek(p.Offset, io.SeekStart); err != nil {
		return wrap(ctx, opGetRange, p.Key, err)
	}
	n, err := f.ReadFrom(io.LimitReader(in, p.Length))
	if err == nil && n != p.Length {
		err = fmt.Errorf("%w: wanted %d bytes at offset %d, got %d", ErrOutOfRange, p.Length, p.Offset, n)
	}
	return wrap(ctx, opGetRange, p.Key, localAbsence(err))
}

package file

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/omnigraph/omnigraph-worker/lance/schema"
)

// Source is random access to a file's bytes (an object in storage, or memory). ReadAt returns
// exactly n bytes at off; the reader keeps the returned slice (arrays it decodes may share it),
// so a Source must not reuse it.
type Source interface {
	Size() int64
	ReadAt(ctx context.Context, off, n int64) ([]byte, error)
}

type bytesSource []byte

// BytesSource serves a file held in memory; its reads return sub-slices, without copying.
func BytesSource(b []byte) Source { return bytesSource(b) }

func (b bytesSource) Size() int64 { return int64(len(b)) }

func (b bytesSource) ReadAt(_ context.Context, off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || off > int64(len(b)) || n > int64(len(b))-off {
		return nil, fmt.Errorf("lance file: read of %d bytes at %d outside %d bytes: %w", n, off, len(b), io.ErrUnexpectedEOF)
	}
	return b[off : off+n : off+n], nil
}

// Reader decodes a Lance 2.0, 2.1 or 2.2 data file. Open reads the footer and the metadata; Read then fetches
// only the pages it needs. A Reader is safe for concurrent use.
type Reader struct {
	name    string
	src     Source
	size    int64
	numRows int64
	schema  *schema.Schema
	cols    []columnInfo
	version Version
	globals uint32 // global buffers; only the first (the file descriptor) is read by Open
	gbo     uint64 // where the global buffer offset table starts
}

// tailRead is how much Open reads from the end of the file first: for most files it holds the
// footer and all metadata, so opening costs one read.
const tailRead = 64 << 10

// Open reads the footer, offset tables, file descriptor and column metadata of a data file. name
// identifies the file in errors.
func Open(ctx context.Context, src Source, name string) (*Reader, error) {
	return open(ctx, src, name, tailRead)
}

// metadataRead is the first read of an open that wants the metadata alone (Concat.AppendRange):
// enough for the footer and the metadata of a table of a few dozen columns in one page each.
// More takes a second read.
const metadataRead = 8 << 10

// open is Open reading first bytes from the end.
func open(ctx context.Context, src Source, name string, first int64) (*Reader, error) {
	r := &Reader{name: name, src: src, size: src.Size()}
	if r.size < footerSize {
		return nil, r.fail(0, "file is %d bytes, shorter than the %d-byte footer", r.size, footerSize)
	}
	tailStart := max(0, r.size-first)
	tail, err := r.read(ctx, tailStart, r.size-tailStart)
	if err != nil {
		return nil, err
	}
	fb := tail[len(tail)-footerSize:]
	end := uint64(r.size - footerSize) // where the footer starts: every table ends before it
	if string(fb[36:]) != magic {
		return nil, r.fail(r.size-4, "bad magic %q, not a Lance file", fb[36:])
	}
	ft := parseFooter(fb)
	switch {
	case ft.major == footerMajor && ft.minor == footerMinor, ft.major == 2 && ft.minor == 0:
		r.version = V2_0
	case ft.major == 2 && readable[Version{2, uint32(ft.minor)}]:
		r.version = Version{2, uint32(ft.minor)}
	case ft.major == 0 && ft.minor < 3:
		return nil, &FormatError{File: name, Offset: int64(end) + 32, Reason: fmt.Sprintf("legacy (v1) Lance file %d.%d", ft.major, ft.minor),
			Err: &UnsupportedVersionError{Version: Version{uint32(ft.major), uint32(ft.minor)}, Op: "read"}}
	default:
		v := Version{uint32(ft.major), uint32(ft.minor)}
		return nil, &FormatError{File: name, Offset: int64(end) + 32, Reason: fmt.Sprintf("Lance file version %s", v),
			Err: &UnsupportedVersionError{Version: v, Op: "read"}}
	}
	switch {
	case ft.numGlobalBuffers == 0:
		return nil, r.fail(int64(end)+24, "no global buffers (the file descriptor is global buffer 0)")
	case ft.gboStart > end || uint64(ft.numGlobalBuffers) > (end-ft.gboStart)/16:
		return nil, r.fail(int64(end)+16, "global buffer table at %d with %d entries does not fit before the footer at %d", ft.gboStart, ft.numGlobalBuffers, end)
	case ft.cmoStart > end || uint64(ft.numColumns) > (end-ft.cmoStart)/16:
		return nil, r.fail(int64(end)+8, "column metadata table at %d with %d entries does not fit before the footer at %d", ft.cmoStart, ft.numColumns, end)
	case ft.columnMetaStart > ft.cmoStart:
		return nil, r.fail(int64(end), "column metadata starts at %d, after its offset table at %d", ft.columnMetaStart, ft.cmoStart)
	}
	// at returns file bytes [off, off+n), from the tail when it holds them.
	at := func(off, n uint64) ([]byte, error) {
		if off >= uint64(tailStart) {
			i := off - uint64(tailStart)
			return tail[i : i+n], nil
		}
		return r.read(ctx, int64(off), int64(n))
	}
	gbo, err := at(ft.gboStart, 16)
	if err != nil {
		return nil, err
	}
	gb0Pos, gb0Size := binary.LittleEndian.Uint64(gbo), binary.LittleEndian.Uint64(gbo[8:])
	if gb0Pos > end || gb0Size > end-gb0Pos {
		return nil, r.fail(int64(ft.gboStart), "file descriptor at %d+%d lies outside the file", gb0Pos, gb0Size)
	}
	// Everything from the file descriptor (or the column metadata) to the footer, in one read.
	lo := min(gb0Pos, ft.columnMetaStart)
	meta, err := at(lo, end-lo)
	if err != nil {
		return nil, err
	}
	s, rows, err := parseFileDescriptor(meta[gb0Pos-lo : gb0Pos-lo+gb0Size])
	if err != nil {
		return nil, asFormatError(err, name, int64(gb0Pos), "file descriptor: ")
	}
	if rows > maxPageRows {
		return nil, r.fail(int64(gb0Pos), "file claims %d rows, more than a Lance file can hold", rows)
	}
	r.schema, r.numRows, r.globals, r.gbo = s, int64(rows), ft.numGlobalBuffers, ft.gboStart

	r.cols = make([]columnInfo, ft.numColumns) // bounded: the table's 16 bytes per column fit the file
	cmo := meta[ft.cmoStart-lo:]
	for i := range r.cols {
		pos, size := binary.LittleEndian.Uint64(cmo[16*i:]), binary.LittleEndian.Uint64(cmo[16*i+8:])
		if pos < ft.columnMetaStart || pos > ft.cmoStart || size > ft.cmoStart-pos {
			return nil, r.fail(int64(ft.cmoStart)+16*int64(i), "column %d metadata at %d+%d lies outside the column metadata [%d, %d)",
				i, pos, size, ft.columnMetaStart, ft.cmoStart)
		}
		ci, err := parseColumnMetadata(meta[pos-lo:pos-lo+size], uint64(r.size))
		if err != nil {
			return nil, asFormatError(err, name, int64(pos), fmt.Sprintf("column %d metadata: ", i))
		}
		ci.metaPos = int64(pos)
		for j := range ci.pages {
			if ci.pages[j].layout21 != (r.version != V2_0) {
				return nil, r.fail(int64(pos), "column %d page %d: its encoding is not of a version %s file", i, j, r.version)
			}
		}
		r.cols[i] = ci
	}
	return r, nil
}

// read fetches [off, off+n) from the source, which Open has already bounded by its size.
func (r *Reader) read(ctx context.Context, off, n int64) ([]byte, error) {
	b, err := r.src.ReadAt(ctx, off, n)
	if err != nil {
		return nil, fmt.Errorf("lance file %s: read %d bytes at %d: %w", r.name, n, off, err)
	}
	if int64(len(b)) != n {
		return nil, fmt.Errorf("lance file %s: read %d bytes at %d, got %d: %w", r.name, n, off, len(b), io.ErrUnexpectedEOF)
	}
	return b, nil
}

func (r *Reader) fail(off int64, format string, args ...any) error {
	return &FormatError{File: r.name, Offset: off, Reason: fmt.Sprintf(format, args...)}
}

// NumGlobalBuffers is how many global buffers the file has, the file descriptor (0) included.
func (r *Reader) NumGlobalBuffers() uint32 { return r.globals }

// GlobalBuffer reads global buffer i (0 is the file descriptor; Lance's index files keep, for
// one, an IVF model in another).
func (r *Reader) GlobalBuffer(ctx context.Context, i uint32) ([]byte, error) {
	if i >= r.globals {
		return nil, fmt.Errorf("lance file %s: global buffer %d of %d", r.name, i, r.globals)
	}
	e, err := r.read(ctx, int64(r.gbo)+16*int64(i), 16)
	if err != nil {
		return nil, err
	}
	pos, n := binary.LittleEndian.Uint64(e), binary.LittleEndian.Uint64(e[8:])
	if pos > uint64(r.size) || n > uint64(r.size)-pos {
		return nil, r.fail(int64(r.gbo)+16*int64(i), "global buffer %d at %d+%d lies outside the file", i, pos, n)
	}
	return r.read(ctx, int64(pos), int64(n))
}

// Version is the file's format version (V2_0 for a file whose footer says 0.3).
func (r *Reader) Version() Version { return r.version }

// NumRows is the row count of the file descriptor.
func (r *Reader) NumRows() int64 { return r.numRows }

// Schema is the schema stored in the file (global buffer 0). A dataset's manifest schema is the
// authority on what the columns mean; this one is for inspection and for files read alone.
func (r *Reader) Schema() *schema.Schema { return r.schema }

// NumColumns is the number of columns in the file.
func (r *Reader) NumColumns() int { return len(r.cols) }

// fetchPage reads a page's buffers: in one read when they sit together (as writers put them),
// else one read each.
func (r *Reader) fetchPage(ctx context.Context, p *pageInfo) (*page, error) {
	pg := &page{bufs: make([][]byte, len(p.offsets)), rows: p.rows}
	if len(p.offsets) == 0 {
		return pg, nil
	}
	lo, hi, sum := p.offsets[0], uint64(0), uint64(0)
	for i, off := range p.offsets {
		lo, hi, sum = min(lo, off), max(hi, off+p.sizes[i]), sum+p.sizes[i]
	}
	if hi-lo <= sum+bufferAlign*uint64(len(p.offsets)) {
		all, err := r.read(ctx, int64(lo), int64(hi-lo))
		if err != nil {
			return nil, err
		}
		for i, off := range p.offsets {
			pg.bufs[i] = all[off-lo : off-lo+p.sizes[i] : off-lo+p.sizes[i]]
		}
		return pg, nil
	}
	for i, off := range p.offsets {
		b, err := r.read(ctx, int64(off), int64(p.sizes[i]))
		if err != nil {
			return nil, err
		}
		pg.bufs[i] = b
	}
	return pg, nil
}

package file

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/omnigraph/omnigraph-worker/lance/schema"
)

// Concatenating whole 2.1+ files by copying their pages (Lance's "binary copy" compaction).
//
// A 2.1+ page is self-contained: its buffers hold everything needed to decode it (chunk
// metadata, chunks, dictionary, repetition index), addressed relative to the buffer, and its
// PageLayout names no file position. So the pages of file B can follow those of file A in a
// column of a new file unchanged: only the buffer offsets move, and the page priority (the
// top-level row the page starts at, protos/file2.proto) moves by A's rows. Page lengths
// (top-level rows) stay: readers find a row's page by summing them. A file always begins and
// ends on a row boundary, so no list is cut by the join. 2.0 files are refused: their pages
// are not self-contained in the same way (struct header columns, column-level buffers).

// ErrNotCopyable is matched (errors.Is) by every error Concat.Append returns about an input it
// will not copy: another version or schema, a 2.0 file, something it could not carry over
// verbatim, or a corrupt file. A caller then rewrites the rows by decoding them instead.
var ErrNotCopyable = errors.New("lance file: pages cannot be copied")

// CopyError is why Concat.Append refused an input. Err, when set, is the cause (a
// *FormatError for a file that does not parse).
type CopyError struct {
	File   string
	Reason string
	Err    error
}

func (e *CopyError) Error() string {
	msg := fmt.Sprintf("lance file %s: pages cannot be copied: %s", e.File, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *CopyError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrNotCopyable, e.Err}
	}
	return []error{ErrNotCopyable}
}

// Concat builds one data file out of whole data files of one version (2.1 or later) and one
// schema, by copying their pages' buffers byte for byte: no value is decoded or encoded. The
// file holds the inputs' rows in the order they were appended. The pages keep the inputs'
// sizes and encodings (compression included). Memory: the output being built, plus the input
// being appended. A Concat is not safe for concurrent use.
type Concat struct {
	want    *schema.Schema // the output's schema; nil until the first input when not given
	wantMsg []byte         // want, encoded: what every input's schema must encode to
	version Version
	cols    [][]wpage21
	out     []byte
	rows    uint64
	files   int
	done    bool
	// Inputs appended by AppendRange (concat_ranges.go): the output is then parts, not out.
	ranged bool
	parts  []Part
	size   uint64 // the output's bytes so far, in parts
	srcs   []Source
}

// NewConcat starts a concatenation of files whose schema is s (nil: the first input's). The
// output's file descriptor carries s, as Writer would write it.
func NewConcat(s *schema.Schema) *Concat {
	c := &Concat{want: s}
	if s != nil {
		c.wantMsg = schema.EncodeSchemaMessage(s)
	}
	return c
}

// NumRows is the rows appended so far.
func (c *Concat) NumRows() int64 { return int64(c.rows) }

// Size is the bytes of the pages copied or referenced so far (the output's size, metadata
// aside).
func (c *Concat) Size() int64 {
	if c.ranged {
		return int64(c.size)
	}
	return int64(len(c.out))
}

// Version is the inputs' version (zero before the first Append).
func (c *Concat) Version() Version { return c.version }

// Grow makes room for n more bytes of pages, so that a caller that knows the size of what it
// will append spares the copies of a growing output.
func (c *Concat) Grow(n int) {
	if n > 0 && cap(c.out)-len(c.out) < n {
		grown := make([]byte, len(c.out), len(c.out)+n)
		copy(grown, c.out)
		c.out = grown
	}
}

// Append copies the pages of the data file held in data (name identifies it in errors) after
// those already appended. It refuses, with an error matching ErrNotCopyable and the Concat
// unchanged, a file it cannot copy; other errors (a ctx error) leave it unchanged too.
func (c *Concat) Append(ctx context.Context, data []byte, name string) error {
	if c.done {
		return errors.New("lance file: Append after Finish")
	}
	r, err := Open(ctx, BytesSource(data), name)
	if err != nil {
		var fe *FormatError
		if errors.As(err, &fe) {
			return &CopyError{File: name, Reason: "the file does not parse", Err: err}
		}
		return err
	}
	if c.ranged {
		return errors.New("lance file: Append after AppendRange")
	}
	if err := c.check(r, func(off, n uint64) ([]byte, error) { return data[off : off+n], nil }); err != nil {
		return err
	}
	c.start(r)
	c.copyPages(r, data)
	c.rows += uint64(r.numRows)
	c.files++
	return nil
}

// start takes the output's version, schema and columns from the first input, r.
func (c *Concat) start(r *Reader) {
	if c.files > 0 {
		return
	}
	c.version = r.version
	if c.want == nil {
		c.want, c.wantMsg = r.schema, schema.EncodeSchemaMessage(r.schema)
	}
	c.cols = make([][]wpage21, len(r.cols))
}

// check refuses what a page copy cannot carry into the output, before anything is copied.
// read returns the input's bytes [off, off+n), which r has checked lie inside it.
func (c *Concat) check(r *Reader, read func(off, n uint64) ([]byte, error)) error {
	refuse := func(format string, args ...any) error {
		return &CopyError{File: r.name, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case r.version == V2_0:
		return refuse("version 2.0 pages are not self-contained")
	case c.files > 0 && r.version != c.version:
		return refuse("version %s after files of version %s", r.version, c.version)
	case c.files > 0 && len(r.cols) != len(c.cols):
		return refuse("%d columns after files of %d", len(r.cols), len(c.cols))
	case r.globals != 1:
		return refuse("%d global buffers; only the file descriptor is carried over", r.globals)
	case c.rows+uint64(r.numRows) > maxPageRows:
		return refuse("%d rows in all, more than a Lance file can hold", c.rows+uint64(r.numRows))
	}
	want := c.wantMsg
	if want == nil {
		want = schema.EncodeSchemaMessage(r.schema)
	}
	if !bytes.Equal(schema.EncodeSchemaMessage(r.schema), want) {
		return refuse("its schema differs from the output's")
	}
	s := c.want
	if s == nil {
		s = r.schema
	}
	if n := len(ColumnFields(s, r.version)); n != len(r.cols) {
		return refuse("%d columns, the schema has %d leaves", len(r.cols), n)
	}
	for i := range r.cols {
		if err := checkCopyColumn(&r.cols[i], uint64(r.numRows), read); err != nil {
			if re, ok := err.(readError); ok {
				return re.err // storage's failure, not the input's: no reason to decode it instead
			}
			return &CopyError{File: r.name, Reason: fmt.Sprintf("column %d", i), Err: err}
		}
	}
	return nil
}

// checkCopyColumn refuses a column holding what the output would lose (column buffers, a
// special column encoding, unknown fields) or whose pages do not describe the file's rows.
// Page layouts must parse and mini-block chunks must lie in their buffer: the copy keeps the
// values unread, but not a page this package could not read back.
func checkCopyColumn(ci *columnInfo, rows uint64, read func(off, n uint64) ([]byte, error)) error {
	switch {
	case ci.colBuffers > 0:
		return errf("%d column buffers", ci.colBuffers)
	case !ci.plainEnc || ci.unknown:
		return errf("column metadata this package cannot carry over")
	case ci.rows != rows:
		return errf("pages of %d rows in a file of %d", ci.rows, rows)
	}
	for j := range ci.pages {
		p := &ci.pages[j]
		if p.unknown || p.priority > rows {
			return errf("page %d: fields this package cannot carry over (priority %d)", j, p.priority)
		}
		l, err := parseLayout21(p.encoding)
		if err != nil {
			return errf("page %d: %v", j, err)
		}
		if l.kind != layoutMiniBlock {
			continue
		}
		if len(p.offsets) < 2 {
			return errf("page %d: mini-block page with %d buffers", j, len(p.offsets))
		}
		meta, err := read(p.offsets[0], p.sizes[0])
		if err != nil {
			return readError{err}
		}
		spans, err := chunkSpans(l, meta)
		if err != nil {
			return errf("page %d: %v", j, err)
		}
		if n := len(spans); n > 0 && spans[n-1].pos+spans[n-1].size > p.sizes[1] {
			return errf("page %d: chunks of %d bytes in a buffer of %d", j, spans[n-1].pos+spans[n-1].size, p.sizes[1])
		}
	}
	return nil
}

// readError is a failure to read an input's bytes, which check returns as it is.
type readError struct{ err error }

func (e readError) Error() string { return e.err.Error() }
func (e readError) Unwrap() error { return e.err }

// copyPages appends r's pages, column by column, their buffers padded to 64 bytes as the
// writer pads them, and records them with offsets and priorities moved to the output's.
func (c *Concat) copyPages(r *Reader, data []byte) {
	need := 0
	for i := range r.cols {
		for _, p := range r.cols[i].pages {
			for _, n := range p.sizes {
				need += padded(int(n))
			}
		}
	}
	if cap(c.out)-len(c.out) < need {
		c.Grow(max(need, cap(c.out)/2))
	}
	for i := range r.cols {
		for _, p := range r.cols[i].pages {
			wp := wpage21{rows: p.rows, priority: p.priority + c.rows, layout: p.encoding}
			for k, off := range p.offsets {
				var b []byte
				c.out, b = appendPageBuffer(c.out, &wp.offsets, &wp.sizes, int(p.sizes[k]))
				copy(b, data[off:off+p.sizes[k]])
			}
			c.cols[i] = append(c.cols[i], wp)
		}
	}
}

// Finish lays out the metadata after the copied pages, as Writer does, and returns the file.
// The file's metadata is parsed back before it is returned, so a bug here cannot hand out a
// file the reader would refuse. The Concat cannot be used after.
func (c *Concat) Finish() ([]byte, error) {
	if c.files == 0 || c.done || c.ranged {
		return nil, errors.New("lance file: Finish of no files, of files appended by AppendRange, or twice")
	}
	c.done = true
	gb0 := encodeFileDescriptor(c.want, c.rows)
	out := appendFileTail(c.out, gb0, len(c.cols), func(dst []byte, i int) []byte {
		return appendColumnMetadata21(dst, c.cols[i])
	}, uint16(c.version.Major), uint16(c.version.Minor))
	c.out, c.cols = nil, nil
	r, err := Open(context.Background(), BytesSource(out), "concatenation")
	if err != nil {
		return nil, fmt.Errorf("lance file: concatenated file does not parse: %w", err)
	}
	if err := c.verify(r); err != nil {
		return nil, err
	}
	return out, nil
}

// verify checks that the output, opened as r, holds the rows appended.
func (c *Concat) verify(r *Reader) error {
	if uint64(r.numRows) != c.rows || r.version != c.version {
		return fmt.Errorf("lance file: concatenated file reads as %d rows of version %s, wrote %d of %s", r.numRows, r.version, c.rows, c.version)
	}
	for i := range r.cols {
		if r.cols[i].rows != c.rows {
			return fmt.Errorf("lance file: concatenated file's column %d has %d rows of %d", i, r.cols[i].rows, c.rows)
		}
	}
	return nil
}

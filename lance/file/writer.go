package file

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
)

// DefaultMaxPageBytes is the page size lance's 2.0 writer aims for (it buffers ~8 MiB per column).
const DefaultMaxPageBytes = 8 << 20

// Options tunes page sizes. A column's pending values are flushed as a page when their encoded
// size reaches MaxPageBytes (0 = DefaultMaxPageBytes) or their count reaches MaxPageRows
// (0 = unlimited), and at Finish. For list item columns the count is of items.
type Options struct {
	MaxPageBytes int
	MaxPageRows  int
	// Version is the file format version to write (zero: V2_0). NewWriter refuses a version it
	// cannot write with *UnsupportedVersionError.
	Version Version
	// Compress LZ4-compresses the mini-block values of strings, binaries and scalars in 2.2
	// files (general compression, which every engine reads). Off by default: on a file of
	// 8,192 rows it takes the encoding from 0.28 to 1.0 ms, and made the worker's sustained
	// load throughput 11% lower than at 2.0, for a node table of 400 KB instead of 822 KB (the
	// engines write about 290 KB).
	Compress bool
}

// Writer encodes record batches into one Lance data file (Options.Version: 2.0, 2.1 or 2.2)
// held in memory (data files are put to object storage whole). Write keeps references to the arrays it is given (Retain) until
// their values have been encoded into a page, so values are copied once, straight into the
// output; Finish releases the last of them. (A Writer dropped without Finish leaves them to the
// garbage collector, which is all the Go allocator needs.) A Writer is not safe for concurrent
// use.
type Writer struct {
	schema   *schema.Schema
	opts     Options
	cols     []*column // every column, in file order (schema pre-order)
	top      []*column // the columns of the top-level fields
	out      []byte
	rows     int64
	pending  int64 // estimated bytes of all columns' pending values
	finished bool
	// v21 writes the file when the version is 2.1 or later; the columns above then serve
	// only to check the batches.
	v21 *writer21
	// globals are the global buffers after the file descriptor (AddGlobalBuffer).
	globals [][]byte
}

// column is one file column being written: a field of the schema, parents included.
type column struct {
	name   string // dotted path, for errors
	field  *schema.Field
	dt     arrow.DataType
	lay    layout
	item   *column   // list: the item column
	kids   []*column // struct: the children's columns
	chunks []chunk   // pending values, not yet encoded
	rows   int       // pending rows (values for item columns)
	size   int64     // pending encoded size estimate, in bits
	pages  []pageMeta
}

// chunk is rows [from, to) of a retained array, waiting to be encoded.
type chunk struct {
	arr      arrow.Array
	from, to int
}

// NewWriter prepares a writer for s. It refuses fields whose type it cannot encode, naming them.
func NewWriter(s *schema.Schema, opts Options) (*Writer, error) {
	if s == nil {
		return nil, errors.New("lance file: nil schema")
	}
	if opts.MaxPageBytes <= 0 {
		opts.MaxPageBytes = DefaultMaxPageBytes
	}
	if opts.MaxPageRows < 0 {
		opts.MaxPageRows = 0
	}
	if opts.Version.IsZero() {
		opts.Version = V2_0
	}
	if !Writable(opts.Version) {
		return nil, &UnsupportedVersionError{Version: opts.Version, Op: "write"}
	}
	w := &Writer{schema: s, opts: opts}
	for _, f := range s.Fields {
		c, err := w.newColumn(f, f.Name)
		if err != nil {
			return nil, err
		}
		w.top = append(w.top, c)
	}
	if n := len(s.Flatten()); n != len(w.cols) {
		return nil, fmt.Errorf("lance file: schema has %d fields but %d columns", n, len(w.cols))
	}
	if opts.Version != V2_0 {
		v21, err := newWriter21(s, opts, w.top)
		if err != nil {
			return nil, err
		}
		w.v21 = v21
	}
	return w, nil
}

func (w *Writer) newColumn(f *schema.Field, path string) (*column, error) {
	dt, err := f.ArrowType()
	if err != nil {
		return nil, fmt.Errorf("lance file: column %q: %w", path, err)
	}
	lay, err := layoutOf(dt)
	if err != nil {
		return nil, fmt.Errorf("lance file: column %q: %w", path, err)
	}
	c := &column{name: path, field: f, dt: dt, lay: lay}
	w.cols = append(w.cols, c) // before the children: columns are numbered in pre-order
	switch lay.kind {
	case kindList:
		if len(f.Children) != 1 {
			return nil, fmt.Errorf("lance file: list column %q has %d child fields", path, len(f.Children))
		}
		if c.item, err = w.newColumn(f.Children[0], path+"."+f.Children[0].Name); err != nil {
			return nil, err
		}
	case kindStruct:
		for _, k := range f.Children {
			kc, err := w.newColumn(k, path+"."+k.Name)
			if err != nil {
				return nil, err
			}
			c.kids = append(c.kids, kc)
		}
	default:
		if len(f.Children) != 0 {
			return nil, fmt.Errorf("lance file: column %q of type %s has child fields", path, dt)
		}
	}
	return c, nil
}

// NumRows is the number of rows written so far.
func (w *Writer) NumRows() int64 { return w.rows }

// Size estimates the file's bytes so far: its encoded pages and its pending values, metadata
// aside. A caller that cuts files by size reads it after each Write.
func (w *Writer) Size() int64 {
	if w.v21 != nil {
		return int64(len(w.v21.out)) + w.v21.pending
	}
	return int64(len(w.out)) + w.pending
}

// Write appends the rows of rec. Its schema must match the writer's: same field names, types and
// nullability; a null in a non-nullable column is refused with the column and row. A refused
// batch leaves the writer unchanged.
func (w *Writer) Write(rec arrow.Record) error {
	if w.finished {
		return errors.New("lance file: Write after Finish")
	}
	if int(rec.NumCols()) != len(w.top) {
		return fmt.Errorf("lance file: record has %d columns, schema has %d", rec.NumCols(), len(w.top))
	}
	n := int(rec.NumRows())
	for i, c := range w.top {
		af := rec.Schema().Field(i)
		switch {
		case af.Name != c.field.Name:
			return fmt.Errorf("lance file: record column %d is %q, schema says %q", i, af.Name, c.field.Name)
		case !sameType(af.Type, c.dt):
			return fmt.Errorf("lance file: column %q has type %s, schema says %s", c.name, af.Type, c.dt)
		case af.Nullable != c.field.Nullable:
			return fmt.Errorf("lance file: column %q nullable=%v, schema says nullable=%v", c.name, af.Nullable, c.field.Nullable)
		case rec.Column(i).Len() != n:
			return fmt.Errorf("lance file: column %q has %d values for %d rows", c.name, rec.Column(i).Len(), n)
		}
		if err := c.checkNulls(rec.Column(i), w.v21 == nil, func(i int) int { return i }); err != nil {
			return err
		}
	}
	if w.v21 != nil {
		// Room for the whole batch at once: its pages are encoded as they fill, and growing the
		// output page by page copied it several times (a 4,096-row batch of 2,900-byte strings
		// allocated 40 MB for an 11 MB file); a load writes each table's rows in one batch.
		w.v21.reserve(int(valueBytes(rec) * 17 / 16))
		w.v21.write(rec)
		w.rows += int64(n)
		return nil
	}
	for i, c := range w.top {
		w.appendRows(c, rec.Column(i), 0, n)
	}
	w.rows += int64(n)
	return nil
}

// checkNulls refuses nulls the schema forbids, and (v20: in a 2.0 file) struct nulls that
// cannot be stored. row maps an index of arr to the top-level row it belongs to, for the error
// message.
func (c *column) checkNulls(arr arrow.Array, v20 bool, row func(int) int) error {
	if !c.field.Nullable && arr.NullN() > 0 {
		return fmt.Errorf("lance file: column %q is not nullable but row %d is null", c.name, row(nextNull(arr, 0)))
	}
	switch c.lay.kind {
	case kindList:
		if arr.Len() == 0 {
			return nil
		}
		o := offsetsOf(arr)
		lo, hi := o.at(0), o.at(arr.Len())
		items := array.NewSlice(arr.(array.ListLike).ListValues(), lo, hi)
		defer items.Release()
		return c.item.checkNulls(items, v20, func(j int) int {
			// the list holding item j: the last list starting at or before it
			i, k := 0, arr.Len()
			for i < k {
				m := int(uint(i+k) >> 1)
				if o.at(m+1) <= lo+int64(j) {
					i = m + 1
				} else {
					k = m
				}
			}
			return row(i)
		})
	case kindStruct:
		sa := arr.(*array.Struct)
		for k, kid := range c.kids {
			if v20 && sa.NullN() > 0 && !kid.field.Nullable {
				// Lance 2.0 stores struct nulls as nulls of every child; this child cannot hold one.
				return fmt.Errorf("lance file: struct column %q has a null at row %d but its child %q is not nullable",
					c.name, row(nextNull(arr, 0)), kid.field.Name)
			}
			if err := kid.checkNulls(sa.Field(k), v20, row); err != nil {
				return err
			}
		}
	}
	return nil
}

// AddGlobalBuffer adds b to the file as a global buffer and returns its index: 1 for the first
// (global buffer 0 is the file descriptor), then 2, and so on, as Lance numbers them. Lance's
// index files name theirs in the schema metadata (an IVF model, for one). The Writer keeps b
// until Finish.
func (w *Writer) AddGlobalBuffer(b []byte) uint32 {
	w.globals = append(w.globals, b)
	return uint32(len(w.globals))
}

// Finish flushes every column and returns the complete file. The Writer cannot be used after.
func (w *Writer) Finish() ([]byte, error) {
	if w.finished {
		return nil, errors.New("lance file: Finish called twice")
	}
	w.finished = true
	if w.v21 != nil {
		return w.v21.finish(w.rows, w.globals), nil
	}
	for _, c := range w.cols {
		if c.rows > 0 {
			w.flush(c)
		}
	}
	gb0 := encodeFileDescriptor(w.schema, uint64(w.rows))
	metaSize := len(gb0) + 16*len(w.cols) + 16 + footerSize
	for _, c := range w.cols {
		metaSize += 64 + 96*len(c.pages)
	}
	w.reserve(metaSize)

	w.out = appendFileTailGlobals(w.out, gb0, w.globals, len(w.cols), func(dst []byte, i int) []byte {
		return appendColumnMetadata(dst, w.cols[i].pages)
	}, footerMajor, footerMinor)
	out := w.out
	w.out = nil
	return out, nil
}

// reserve makes room for n more output bytes. It also makes room for everything still pending,
// so that the burst of flushes in Finish grows the output once.
func (w *Writer) reserve(n int) {
	if cap(w.out)-len(w.out) >= n {
		return
	}
	// pending values, plus room for the metadata Finish appends
	want := len(w.out) + n + int(w.pending) + 4096 + 256*len(w.cols)
	if g := cap(w.out) + cap(w.out)/4; want < g {
		want = g
	}
	out := make([]byte, len(w.out), want)
	copy(out, w.out)
	w.out = out
}

// valueBytes estimates the encoded size of rec's values: the bytes of its string and binary
// values and of its fixed-width values, counted over each array's own rows (a slice counts
// its part), with a 4-byte length per variable-width value; nested and other types add
// nothing (the output then grows as its pages come, as before).
func valueBytes(rec arrow.Record) int64 {
	var n int64
	for _, col := range rec.Columns() {
		switch a := col.(type) {
		case *array.String:
			n += spanBytes(a.ValueOffsets())
		case *array.Binary:
			n += spanBytes(a.ValueOffsets())
		case *array.FixedSizeList:
			// A vector column: its items, which without this counted nothing, so that the
			// output grew a quarter at a time and a file of vectors was allocated about five
			// times over.
			t := a.DataType().(*arrow.FixedSizeListType)
			if fw, ok := t.Elem().(arrow.FixedWidthDataType); ok {
				n += int64(a.Len()) * int64(t.Len()) * int64(max(fw.BitWidth()/8, 1))
			}
		default:
			if fw, ok := col.DataType().(arrow.FixedWidthDataType); ok {
				n += int64(col.Len()) * int64(max(fw.BitWidth()/8, 1))
			}
		}
	}
	return n
}

// spanBytes is the value bytes a run of variable-width offsets spans, with 4 bytes of length
// per value.
func spanBytes(offs []int32) int64 {
	if len(offs) < 2 {
		return 0
	}
	return int64(offs[len(offs)-1]-offs[0]) + 4*int64(len(offs)-1)
}

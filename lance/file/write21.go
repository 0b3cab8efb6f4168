package file

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/omnigraph/omnigraph-worker/lance/internal/pb"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
)

// A 2.1/2.2 file stores only leaves: one column per primitive, string/binary or fixed-size-list
// field, in schema pre-order. Struct and list fields have no column; their nulls and list
// boundaries become repetition and definition levels stored with every leaf below them
// (Dremel-style), and the manifest's DataFile lists the leaf field ids only (see ColumnFields).
//
// Each page is encoded in one of three layouts (PageLayout):
//   - mini-block: values cut into chunks of 2^k values (k <= 12, <= 8186 value bytes), each
//     chunk holding its own rep/def levels; the layout the engines use for narrow values;
//   - full-zip: each level's control word (rep/def) zipped with its value; used, as the
//     engines do, when a value is 256 bytes or more (long strings, wide vectors), and when
//     runs of empty or null lists make chunks too large to describe;
//   - all-null: no values at all, with the levels when there are lists or structs above.

// maxNesting bounds the fields on the way from a top-level field to a leaf.
const maxNesting = 1024

// writer21 is the Writer's state for version 2.1 and later.
type writer21 struct {
	schema  *schema.Schema
	opts    Options
	large   bool      // 2.2: u32 chunk words and buffer sizes in mini-blocks
	leaves  []*leaf21 // file columns, in order
	byTop   [][]*leaf21
	out     []byte
	pending int64 // estimated bytes of all pending values and levels
}

// stepKind is what a field on the way from a top-level field down to a leaf is.
type stepKind uint8

const (
	stepStruct stepKind = iota + 1
	stepList
	stepLeaf
)

// step is one field on a leaf's path, with the raw definition codes its nulls (and, for lists,
// empties) are recorded under. Raw codes number the layers innermost first; a page renumbers
// them to the codes of the layers it actually uses (remap).
type step struct {
	kind  stepKind
	child int    // stepStruct: index of the next step's field among the children
	null  uint16 // raw def code of a null here
	empty uint16 // stepList: raw def code of an empty list
	rep   uint16 // stepList: rep level of an item continuing this list
	// nullable is the field's nullability: leaves under a list declare their layers from it
	nullable bool
}

// leaf21 is one file column and its pending page.
type leaf21 struct {
	name   string
	lay    layout
	dt     arrow.DataType
	steps  []step // from the top-level field down to the leaf itself
	maxRep uint16
	codes  int  // raw def codes in use: 1..codes
	lists  bool // a list lies on the path

	// the pending page
	rep, def []uint16 // levels; def is nil while every level so far is 0
	spare    []uint16 // the last page's def levels, for reuse
	used     []bool   // raw codes seen on this page, indexed by code
	segs     []chunk  // visible values, as runs of retained arrays
	values   int      // visible values (items)
	levels   int
	rows     int
	firstRow uint64
	bytes    int64 // value bytes
	vbits    int64 // fixed width: value bits (bytes is their whole bytes, however they came)
	maxLen   int64 // longest binary value
	pages    []wpage21
}

type wpage21 struct {
	offsets, sizes []uint64
	rows, priority uint64
	layout         []byte // PageLayout message
}

// newWriter21 lays out the leaves of the columns NewWriter built (and checked) for the schema.
func newWriter21(s *schema.Schema, opts Options, top []*column) (*writer21, error) {
	w := &writer21{schema: s, opts: opts, large: opts.Version != V2_1}
	for _, c := range top {
		start := len(w.leaves)
		if err := w.addLeaves(c, nil); err != nil {
			return nil, err
		}
		w.byTop = append(w.byTop, w.leaves[start:len(w.leaves):len(w.leaves)])
	}
	return w, nil
}

// addLeaves appends the leaves under column c. path holds the steps above c.
func (w *writer21) addLeaves(c *column, path []step) error {
	f, lay := c.field, c.lay
	if len(path) >= maxNesting {
		// levels are u16 and numbered per layer: a bound far below that keeps them exact
		return fmt.Errorf("lance file: column %q is nested more than %d levels deep", c.name, maxNesting)
	}
	path = append(path[:len(path):len(path)], step{nullable: f.Nullable})
	switch lay.kind {
	case kindStruct:
		if len(c.kids) == 0 {
			return fmt.Errorf("lance file: struct column %q has no fields; a 2.1 file has no column to store it in", c.name)
		}
		for i, k := range c.kids {
			path[len(path)-1] = step{kind: stepStruct, child: i, nullable: f.Nullable}
			if err := w.addLeaves(k, path); err != nil {
				return err
			}
		}
		return nil
	case kindList:
		path[len(path)-1] = step{kind: stepList, nullable: f.Nullable}
		return w.addLeaves(c.item, path)
	}
	if lay.kind == kindFixed && lay.bits == 1 && lay.dim > 0 && lay.dim*2 > maxChunkValueBytes*8 && lay.dim%8 != 0 {
		// too wide for a mini-block chunk, and full-zip stores whole bytes per value
		return fmt.Errorf("lance file: column %q: fixed size list of %d booleans is not supported", c.name, lay.dim)
	}
	name, dt := c.name, c.dt
	path[len(path)-1] = step{kind: stepLeaf, nullable: f.Nullable}
	l := &leaf21{name: name, lay: lay, dt: dt, steps: path}
	// Raw codes, innermost layer first: the leaf's null, then each parent's null (and a list's
	// empty), as RepDefLayer numbers its levels.
	code := uint16(0)
	var maxRep uint16
	for i := len(path) - 1; i >= 0; i-- {
		code++
		path[i].null = code
		if path[i].kind == stepList {
			code++
			path[i].empty = code
			path[i].rep = maxRep // an item continuing this list; a new row is maxRep overall
			maxRep++
			l.lists = true
		}
	}
	l.codes, l.maxRep = int(code), maxRep
	l.used = make([]bool, code+1)

	w.leaves = append(w.leaves, l)
	return nil
}

// ColumnFields returns the field ids a data file of version v written for s holds, in column
// order: what a manifest's DataFile records as fields, with column_indices 0, 1, 2, ... A 2.0
// file has a column for every field; a 2.1+ file only for leaves (a fixed-size list is a leaf;
// structs and lists have none), which is what the official engines record.
func ColumnFields(s *schema.Schema, v Version) []int32 {
	if v.IsZero() || v == V2_0 {
		return s.FieldIDs()
	}
	var ids []int32
	var walk func(fs []*schema.Field)
	walk = func(fs []*schema.Field) {
		for _, f := range fs {
			if len(f.Children) == 0 {
				ids = append(ids, f.ID)
				continue
			}
			walk(f.Children)
		}
	}
	walk(s.Fields)
	return ids
}

// write appends the rows of rec, already checked by Writer.Write.
func (w *writer21) write(rec arrow.Record) {
	n := int(rec.NumRows())
	for i, leaves := range w.byTop {
		col := rec.Column(i)
		for _, l := range leaves {
			w.appendLeaf(l, col, n)
		}
	}
}

// appendLeaf records rows [0, n) of top-level array col for leaf l, flushing full pages.
func (w *writer21) appendLeaf(l *leaf21, col arrow.Array, n int) {
	arrs := make([]arrow.Array, len(l.steps))
	offs := make([]offsets, len(l.steps))
	arrs[0] = col
	for d := 0; d < len(l.steps)-1; d++ {
		switch l.steps[d].kind {
		case stepStruct:
			arrs[d+1] = arrs[d].(*array.Struct).Field(l.steps[d].child)
		case stepList:
			offs[d] = offsetsOf(arrs[d])
			arrs[d+1] = arrs[d].(array.ListLike).ListValues()
		}
	}
	for from := 0; from < n; {
		var k int
		if l.lists {
			k = w.recordNested(l, arrs, offs, from, n)
		} else {
			k = w.recordFlat(l, arrs, from, n)
		}
		from += k
		if l.full(w.opts) {
			w.flush(l)
		}
	}
}

// full reports whether l's pending page has reached the page size or row limit. Its size
// counts 4 bytes of levels per level; fixed-width values are counted in bits, so that where a
// page ends does not depend on how the rows came in batches.
func (l *leaf21) full(o Options) bool {
	return l.sizeBits() >= 8*int64(o.MaxPageBytes) || (o.MaxPageRows > 0 && l.rows >= o.MaxPageRows)
}

func (l *leaf21) sizeBits() int64 {
	if l.lay.kind == kindBinary {
		return 8 * (l.bytes + 4*int64(l.levels))
	}
	return l.vbits + 32*int64(l.levels)
}

// finish flushes every leaf and lays out the metadata after the pages.
func (w *writer21) finish(rows int64, globals [][]byte) []byte {
	for _, l := range w.leaves {
		if l.rows > 0 {
			w.flush(l)
		}
	}
	gb0 := encodeFileDescriptor(w.schema, uint64(rows))
	metaSize := len(gb0) + 16*len(w.leaves) + 16 + footerSize
	for _, l := range w.leaves {
		metaSize += 64
		for _, p := range l.pages {
			metaSize += 48 + len(p.layout) + 20*len(p.offsets)
		}
	}
	w.reserve(metaSize)
	w.out = appendFileTailGlobals(w.out, gb0, globals, len(w.leaves), func(dst []byte, i int) []byte {
		return appendColumnMetadata21(dst, w.leaves[i].pages)
	}, uint16(w.opts.Version.Major), uint16(w.opts.Version.Minor))
	out := w.out
	w.out = nil
	return out
}

func appendColumnMetadata21(dst []byte, pages []wpage21) []byte {
	e := pb.Encoder{B: dst}
	e.BytesAlways(1, columnEncoding)
	for _, p := range pages {
		var pe pb.Encoder
		pe.PackedUints(1, p.offsets)
		pe.PackedUints(2, p.sizes)
		pe.Uint(3, p.rows)
		pe.BytesAlways(4, directEncoding(pageLayout21URL, p.layout))
		pe.Uint(5, p.priority) // the page's first row, as the engines record it
		e.BytesAlways(2, pe.B)
	}
	return e.B
}

// reserve makes room for n more output bytes (and for what is pending, see Writer.reserve).
func (w *writer21) reserve(n int) {
	if cap(w.out)-len(w.out) >= n {
		return
	}
	want := len(w.out) + n + int(w.pending) + 4096 + 256*len(w.leaves)
	if g := cap(w.out) + cap(w.out)/4; want < g {
		want = g
	}
	out := make([]byte, len(w.out), want)
	copy(out, w.out)
	w.out = out
}

// buffer appends a page buffer of n bytes, padded to 64, and returns it for filling in. Room
// must have been reserved for all of a page's buffers first.
func (w *writer21) buffer(p *wpage21, n int) []byte {
	var b []byte
	w.out, b = appendPageBuffer(w.out, &p.offsets, &p.sizes, n)
	return b
}

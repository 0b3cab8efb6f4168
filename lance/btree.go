package lance

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
)

// A BTREE index, as Lance writes it (docs/lance-indices.md): two Lance files under
// _indices/<uuid>/, at the table's data file version.
//
//   - page_data.lance: every indexed row as (values, ids), sorted by value, nulls first, ids
//     the rows' stable row ids (row addresses on a table without them);
//   - page_lookup.lance: one row per page of BTreePageRows rows: (min, max, null_count,
//     page_idx), min and max over the page's non-null values (null when it has none), with
//     schema metadata batch_size and range_partitioned.
//
// Lance's search reads the lookup, picks the pages a predicate can match and reads those.
const (
	btreeDataFile   = "page_data.lance"
	btreeLookupFile = "page_lookup.lance"
	// BTreePageRows is Lance's default BTREE page (batch) size.
	BTreePageRows = 4096
	// BTreeDetailsType is the type URL of a BTREE index's details (an empty message).
	BTreeDetailsType = "/lance.table.BTreeIndexDetails"
)

// IndexOptions say how an index is built.
type IndexOptions struct {
	// Name of the index; "" is Lance's default, "<column>_idx".
	Name string
	// Stage options of the CreateIndex transaction.
	Stage StageOptions
}

// StageBTreeIndex builds a BTREE index on column over every live row of this version and
// returns the CreateIndex transaction that lists it (replacing an index of the same name). Its
// files are written with the transaction, under a new uuid; nothing is visible until Commit.
// The index covers every fragment of this version, as an index the official engine builds
// does. The column must be a top-level integer, float, string, date or timestamp column.
func (d *Dataset) StageBTreeIndex(ctx context.Context, column string, o IndexOptions) (*Staged, error) {
	return d.StageBTreeIndices(ctx, []string{column}, o)
}

// StageBTreeIndices is StageBTreeIndex for several columns at once: one CreateIndex lists them
// all, as the reference OmniGraph combines the indices a table lacks into one commit. With
// several columns o.Name must be empty (each index takes its default name).
func (d *Dataset) StageBTreeIndices(ctx context.Context, columns []string, o IndexOptions) (*Staged, error) {
	if len(columns) == 0 || (len(columns) > 1 && o.Name != "") {
		return nil, fmt.Errorf("lance: a BTREE build names %d columns and index name %q", len(columns), o.Name)
	}
	fo, err := d.fileOptions(o.Stage.FileOptions)
	if err != nil {
		return nil, err
	}
	w := &fileWrites{}
	var xs []Index
	for _, column := range columns {
		x, err := d.buildBTree(ctx, column, o.Name, fo, w)
		if err != nil {
			return nil, err
		}
		xs = append(xs, x)
	}
	return d.newStaged(o.Stage, Operation{Kind: OpCreateIndex, NewIndices: xs}, w), nil
}

// buildBTree encodes one column's BTREE files into w and returns the index's metadata.
func (d *Dataset) buildBTree(ctx context.Context, column, name string, fo file.Options, w *fileWrites) (Index, error) {
	if name == "" {
		name = column + "_idx"
	}
	refuse := func(reason string) (Index, error) {
		return Index{}, &IndexError{Dataset: d.dir.URI(), Index: name, Op: OpCreateIndex, Reason: reason}
	}
	f := d.Schema().Field(column)
	if f == nil {
		return refuse(fmt.Sprintf("no column %q", column))
	}
	af, err := f.ToArrow()
	if err != nil {
		return Index{}, err
	}
	if !btreeType(af.Type) {
		return refuse(fmt.Sprintf("column %q is %s: a BTREE here indexes integers, floats, strings, dates and timestamps", column, af.Type))
	}
	recs, err := d.ReadAll(ctx, ScanOptions{Columns: []string{column}, WithRowID: true})
	if err != nil {
		return Index{}, err
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	vals := make([]arrow.Array, len(recs))
	for i, r := range recs {
		vals[i] = r.Column(0)
	}
	ids := rowIDsOf(recs)
	if len(ids) == 0 {
		return refuse("the table has no rows to index")
	}
	x, err := d.newIndexMeta(f.ID, name, &IndexDetails{TypeURL: BTreeDetailsType}, 0)
	if err != nil {
		return Index{}, err
	}
	data, lookup, err := btreePages(af.Type, vals, ids)
	if err != nil {
		return Index{}, err
	}
	btreeCache.put(x.UUID, data)
	keepBTreeEnd(x.UUID, data, lookup)
	if err := writeNamedRecords(x, column, []namedRecord{{btreeDataFile, data}, {btreeLookupFile, lookup}}, fo, w); err != nil {
		return Index{}, err
	}
	return x, nil
}

// newIndexMeta is the metadata of a new index of one field under a new (version 4) uuid, made
// now at this version, with details and index_version version, covering every fragment of
// this version; one a CreateIndex would list wrongly (checkNewIndex) is refused.
func (d *Dataset) newIndexMeta(field int32, name string, details *IndexDetails, version int32) (Index, error) {
	x := Index{Fields: []int32{field}, Name: name, DatasetVersion: d.Version(), HasFragments: true, Fragments: []uint32{}, Details: details}
	if _, err := rand.Read(x.UUID[:]); err != nil {
		return Index{}, err
	}
	x.UUID[6], x.UUID[8] = x.UUID[6]&0x0f|0x40, x.UUID[8]&0x3f|0x80 // a version 4 uuid
	now := uint64(time.Now().UnixMilli())
	x.IndexVersion, x.CreatedAt = &version, &now
	for i := range d.manifest.Fragments {
		x.Fragments = append(x.Fragments, uint32(d.manifest.Fragments[i].ID))
	}
	slices.Sort(x.Fragments)
	if err := d.checkNewIndex(&x); err != nil {
		return Index{}, err
	}
	return x, nil
}

// HasBTree says whether the version lists a BTREE index on exactly the named column.
func (d *Dataset) HasBTree(column string) bool { return d.BTree(column) != nil }

// BTree is the version's BTREE index on exactly the named column, or nil.
func (d *Dataset) BTree(column string) *Index {
	return d.indexOn(column, func(x *Index) bool { return x.Kind() == "BTree" })
}

// indexOn is the version's first index on exactly the named column that is accepts, or nil.
func (d *Dataset) indexOn(column string, is func(*Index) bool) *Index {
	f := d.Schema().Field(column)
	if f == nil {
		return nil
	}
	for i := range d.manifest.Indices {
		x := &d.manifest.Indices[i]
		if is(x) && len(x.Fields) == 1 && x.Fields[0] == f.ID {
			return x
		}
	}
	return nil
}

func btreeType(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.FLOAT32, arrow.FLOAT64, arrow.STRING, arrow.LARGE_STRING, arrow.DATE32, arrow.DATE64, arrow.TIMESTAMP:
		return true
	}
	return false
}

// encodeIndexFile writes one record as a Lance file of the table's data file version.
func encodeIndexFile(rec arrow.Record, fo file.Options) ([]byte, error) {
	s, err := schema.FromArrow(rec.Schema())
	if err != nil {
		return nil, err
	}
	w, err := file.NewWriter(s, fo)
	if err != nil {
		return nil, err
	}
	if err := w.Write(rec); err != nil {
		return nil, err
	}
	return w.Finish()
}

// rowIDsOf is the row ids of records of (values, _rowid), in one slice sized up front:
// grown by appending, its copies were a sixth of what a fold allocated.
func rowIDsOf(recs []arrow.Record) []uint64 {
	n := 0
	for _, r := range recs {
		n += int(r.NumRows())
	}
	ids := make([]uint64, 0, n)
	for _, r := range recs {
		ids = append(ids, r.Column(1).(*array.Uint64).Uint64Values()...)
	}
	return ids
}

// btreeEntry is one indexed row: where its value is (chunk, row) and its row id. It is 16
// bytes, a null flagged in chunk's entryNull bit, not a field of its own: a sort of a million
// keys holds a million of them, and the string sort orders them in place (sortStringEntries).
type btreeEntry struct {
	chunk, row int32
	id         uint64
}

// entryNull flags a null entry in btreeEntry.chunk; a chunk index never reaches it.
const entryNull = 1 << 30

// newEntry is the entry of the value at chunk c, row r, with row id id.
func newEntry(c, r int, id uint64, null bool) btreeEntry {
	e := btreeEntry{chunk: int32(c), row: int32(r), id: id}
	if null {
		e.chunk |= entryNull
	}
	return e
}

// null says the entry's value is null.
func (e *btreeEntry) null() bool { return e.chunk&entryNull != 0 }

// at is the index of the entry's chunk.
func (e *btreeEntry) at() int { return int(e.chunk &^ entryNull) }

// btreePages sorts the values (chunks of one column) with their row ids and cuts them into
// pages: the page_data and page_lookup records.
func btreePages(t arrow.DataType, chunks []arrow.Array, ids []uint64) (data, lookup arrow.Record, err error) {
	n := 0
	for _, a := range chunks {
		n += a.Len()
	}
	if n != len(ids) {
		return nil, nil, fmt.Errorf("lance: BTREE: %d values for %d row ids", n, len(ids))
	}
	data, lookup = writeBTreePages(t, chunks, sortBTreeEntries(chunks, ids))
	return data, lookup, nil
}

// sortBTreeEntries orders the values of chunks with their row ids as a BTREE holds them.
func sortBTreeEntries(chunks []arrow.Array, ids []uint64) []btreeEntry {
	if strs, ok := chunksAs[stringColumn](chunks); ok {
		return sortStringEntries(strs, ids)
	}
	var es []btreeEntry
	switch chunks[0].(type) {
	case *array.Float32, *array.Float64:
		es = sortKeyed(chunks, ids, func(a arrow.Array, i int) float64 {
			if x, ok := a.(*array.Float32); ok {
				return float64(x.Value(i))
			}
			return a.(*array.Float64).Value(i)
		}, compareFloat)
	case *array.Uint8, *array.Uint16, *array.Uint32, *array.Uint64:
		es = sortKeyed(chunks, ids, unsignedAt, cmp.Compare[uint64])
	default:
		es = sortKeyed(chunks, ids, signedAt, cmp.Compare[int64])
	}
	return es
}

// writeBTreePages cuts entries es (in order, their values in chunks) into pages: the page_data
// and page_lookup records.
func writeBTreePages(t arrow.DataType, chunks []arrow.Array, es []btreeEntry) (data, lookup arrow.Record) {
	mem := memory.DefaultAllocator
	db := array.NewRecordBuilder(mem, btreeDataSchema(t))
	defer db.Release()
	lb := array.NewRecordBuilder(mem, btreeLookupSchema(t))
	defer lb.Release()
	// Sized up front: grown value by value, the builders' copies and zeroing of their doubled
	// buffers were a fifth of a 100k-row build.
	db.Field(0).Reserve(len(es))
	db.Field(1).Reserve(len(es))
	if vb, ok := db.Field(0).(interface{ ReserveData(int) }); ok {
		vb.ReserveData(valueBytes(chunks))
	}
	ids := db.Field(1).(*array.Uint64Builder)
	appendValues := func(p []btreeEntry) {
		for _, e := range p {
			appendValue(db.Field(0), chunks[e.at()], int(e.row))
		}
	}
	if strs, ok := chunksAs[*array.String](chunks); ok {
		sb := db.Field(0).(*array.StringBuilder)
		appendValues = func(p []btreeEntry) {
			for _, e := range p {
				if e.null() {
					sb.AppendNull()
				} else {
					sb.Append(strs[e.at()].Value(int(e.row)))
				}
			}
		}
	}
	for page := 0; page*BTreePageRows < len(es); page++ {
		p := es[page*BTreePageRows : min(len(es), (page+1)*BTreePageRows)]
		appendValues(p)
		nulls := 0
		for _, e := range p {
			ids.UnsafeAppend(e.id)
			if e.null() {
				nulls++
			}
		}
		if nulls == len(p) {
			lb.Field(0).AppendNull()
			lb.Field(1).AppendNull()
		} else {
			first, last := p[nulls], p[len(p)-1]
			appendValue(lb.Field(0), chunks[first.at()], int(first.row))
			appendValue(lb.Field(1), chunks[last.at()], int(last.row))
		}
		lb.Field(2).(*array.Uint32Builder).Append(uint32(nulls))
		lb.Field(3).(*array.Uint32Builder).Append(uint32(page))
	}
	return db.NewRecord(), lb.NewRecord()
}

// btreeDataSchema is the schema of the page data of a BTREE of values of type t.
func btreeDataSchema(t arrow.DataType) *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{{Name: "values", Type: t, Nullable: true}, {Name: "ids", Type: arrow.PrimitiveTypes.Uint64}}, nil)
}

// btreeLookupSchema is the schema of the page lookup of a BTREE of values of type t.
func btreeLookupSchema(t arrow.DataType) *arrow.Schema {
	meta := arrow.NewMetadata([]string{"batch_size", "range_partitioned"}, []string{strconv.Itoa(BTreePageRows), "false"})
	return arrow.NewSchema([]arrow.Field{{Name: "min", Type: t, Nullable: true}, {Name: "max", Type: t, Nullable: true},
		{Name: "null_count", Type: arrow.PrimitiveTypes.Uint32}, {Name: "page_idx", Type: arrow.PrimitiveTypes.Uint32}}, &meta)
}

// chunksAs is chunks as arrays of type T, ok false when one is not.
func chunksAs[T arrow.Array](chunks []arrow.Array) (out []T, ok bool) {
	out = make([]T, len(chunks))
	for i, a := range chunks {
		if out[i], ok = a.(T); !ok {
			return nil, false
		}
	}
	return out, true
}

// valueBytes is the size of the string values of chunks (0 for other types).
func valueBytes(chunks []arrow.Array) int {
	n := 0
	for _, a := range chunks {
		if x, ok := a.(interface{ ValueBytes() []byte }); ok {
			n += len(x.ValueBytes())
		}
	}
	return n
}

// sortKeyed orders the entries of chunks by value (nulls first, then by key), ties by row id,
// reading each value once into a typed key so that comparing costs no Arrow accessor. It
// sorts a permutation of 4-byte positions, not the entries: moving them is what a sort mostly
// does. String keys are sorted by sortStringEntries instead.
func sortKeyed[K any](chunks []arrow.Array, ids []uint64, get func(arrow.Array, int) K, compare func(K, K) int) []btreeEntry {
	keys := make([]K, len(ids))
	es := make([]btreeEntry, 0, len(ids))
	for c, a := range chunks {
		for r := 0; r < a.Len(); r++ {
			e := newEntry(c, r, ids[len(es)], a.IsNull(r))
			if !e.null() {
				keys[len(es)] = get(a, r)
			}
			es = append(es, e)
		}
	}
	perm := make([]int32, len(es))
	for i := range perm {
		perm[i] = int32(i)
	}
	// Row ids are unique, so ordering ties by id makes the order total: no stable sort needed.
	order := func(i, j int32) int {
		a, b := &es[i], &es[j]
		switch {
		case a.null() && b.null():
			return cmp.Compare(a.id, b.id)
		case a.null():
			return -1
		case b.null():
			return 1
		}
		if c := compare(keys[i], keys[j]); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	}
	return orderedEntries(es, parallelSort(perm, order))
}

// orderedEntries is es in the order of perm.
func orderedEntries(es []btreeEntry, perm []int32) []btreeEntry {
	out := make([]btreeEntry, 0, len(es))
	for _, p := range perm {
		out = append(out, es[p])
	}
	return out
}

// parallelSortMin is the size from which parallelSort sorts halves on two goroutines.
const parallelSortMin = 1 << 15

// parallelSort sorts perm by order, its two halves side by side when it is large (an index
// build is maintenance beside the messages, on a machine of a few cores), then merges them.
func parallelSort(perm []int32, order func(i, j int32) int) []int32 {
	if len(perm) < parallelSortMin || runtime.GOMAXPROCS(0) < 2 {
		slices.SortFunc(perm, order)
		return perm
	}
	mid := len(perm) / 2
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		slices.SortFunc(perm[:mid], order)
	}()
	slices.SortFunc(perm[mid:], order)
	wg.Wait()
	out := make([]int32, 0, len(perm))
	a, b := perm[:mid], perm[mid:]
	for len(a) > 0 && len(b) > 0 {
		if order(a[0], b[0]) <= 0 {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// compareFloat orders floats with NaN after every number, as Arrow's total order has it.
func compareFloat(x, y float64) int {
	switch xn, yn := math.IsNaN(x), math.IsNaN(y); {
	case xn && yn:
		return 0
	case xn:
		return 1
	case yn:
		return -1
	}
	return cmp.Compare(x, y)
}

func unsignedAt(a arrow.Array, i int) uint64 {
	switch x := a.(type) {
	case *array.Uint8:
		return uint64(x.Value(i))
	case *array.Uint16:
		return uint64(x.Value(i))
	case *array.Uint32:
		return uint64(x.Value(i))
	default:
		return a.(*array.Uint64).Value(i)
	}
}

func signedAt(a arrow.Array, i int) int64 {
	switch x := a.(type) {
	case *array.Int8:
		return int64(x.Value(i))
	case *array.Int16:
		return int64(x.Value(i))
	case *array.Int32:
		return int64(x.Value(i))
	case *array.Int64:
		return x.Value(i)
	case *array.Date32:
		return int64(x.Value(i))
	case *array.Date64:
		return int64(x.Value(i))
	case *array.Timestamp:
		return int64(x.Value(i))
	}
	panic(fmt.Sprintf("lance: BTREE: no order for %s", a.DataType()))
}

// appendValue appends a[i] to b, which has a's type.
func appendValue(b array.Builder, a arrow.Array, i int) {
	if a.IsNull(i) {
		b.AppendNull()
		return
	}
	switch x := a.(type) {
	case *array.String:
		b.(*array.StringBuilder).Append(x.Value(i))
	case *array.LargeString:
		b.(*array.LargeStringBuilder).Append(x.Value(i))
	case *array.Float32:
		b.(*array.Float32Builder).Append(x.Value(i))
	case *array.Float64:
		b.(*array.Float64Builder).Append(x.Value(i))
	case *array.Int8:
		b.(*array.Int8Builder).Append(x.Value(i))
	case *array.Int16:
		b.(*array.Int16Builder).Append(x.Value(i))
	case *array.Int32:
		b.(*array.Int32Builder).Append(x.Value(i))
	case *array.Int64:
		b.(*array.Int64Builder).Append(x.Value(i))
	case *array.Uint8:
		b.(*array.Uint8Builder).Append(x.Value(i))
	case *array.Uint16:
		b.(*array.Uint16Builder).Append(x.Value(i))
	case *array.Uint32:
		b.(*array.Uint32Builder).Append(x.Value(i))
	case *array.Uint64:
		b.(*array.Uint64Builder).Append(x.Value(i))
	case *array.Date32:
		b.(*array.Date32Builder).Append(x.Value(i))
	case *array.Date64:
		b.(*array.Date64Builder).Append(x.Value(i))
	case *array.Timestamp:
		b.(*array.TimestampBuilder).Append(x.Value(i))
	default:
		panic(fmt.Sprintf("lance: BTREE: no builder for %s", a.DataType()))
	}
}

package lance

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/omnigraph/omnigraph-worker/lance/file"
)

// Reading a BTREE index (btree.go lays out its two files): the lookup (page_lookup.lance, one
// row per page: min, max, null_count, page_idx) is read whole; the pages whose [min, max]
// meets the range asked for are read from page_data.lance, BTreePageRows rows each (the
// lookup's batch_size), and their row ids mapped to the addresses of this version's rows.

// BTreeRange is the range of values a BTREE lookup selects. Lo and Hi bound it (nil: no bound),
// each inclusive unless LoExcl or HiExcl. A bound is a Go value of the column's kind: string
// for strings, int64 for signed integers, dates and timestamps (their stored numbers), uint64
// for unsigned integers, float64 for floats, bool for booleans (which only a scan tests: a
// BTREE holds none). Nulls are never selected.
type BTreeRange struct {
	Lo, Hi         any
	LoExcl, HiExcl bool
}

// Equal is the range of the one value v.
func Equal(v any) BTreeRange { return BTreeRange{Lo: v, Hi: v} }

// BTreeSearch is what a BTREE lookup read.
type BTreeSearch struct {
	Index     string // the index's name
	Pages     int    // pages the index holds
	PagesRead int    // pages of page_data read: those whose min..max meets the range
	RowIDs    int    // row ids those pages hold within the range
	// Uncovered are the fragments of this version the index does not cover (appended after it
	// was built): their rows are not in it, so a caller scans them.
	Uncovered []uint64
}

// SearchBTree looks up the rows whose column value lies in r through the version's BTREE index
// on column: the addresses of those rows in the fragments the index covers, ascending, and
// what it read. An address may name a row deleted since (Take skips it). Rows in fragments
// the index does not cover are not looked at: BTreeSearch.Uncovered lists those fragments.
// It fails when the column has no BTREE, or r's bounds are not of the column's kind.
func (d *Dataset) SearchBTree(ctx context.Context, column string, r BTreeRange) ([]RowAddress, *BTreeSearch, error) {
	x := d.BTree(column)
	if x == nil {
		return nil, nil, fmt.Errorf("lance: no BTREE index on column %q", column)
	}
	if err := d.checkReadable(); err != nil {
		return nil, nil, err
	}
	st, _, err := d.resolveBase(x.BaseID)
	if err != nil {
		return nil, nil, err
	}
	s := &BTreeSearch{Index: x.Name}
	for i := range d.manifest.Fragments {
		if id := d.manifest.Fragments[i].ID; !x.Covers(id) {
			s.Uncovered = append(s.Uncovered, id)
		}
	}
	f := d.Schema().Field(column)
	af, err := f.ToArrow()
	if err != nil {
		return nil, nil, err
	}
	if err := r.check(af.Type); err != nil {
		return nil, nil, fmt.Errorf("lance: BTREE %s on %q: %w", x.Name, column, err)
	}
	lookupKey, dataKey := x.Dir()+btreeLookupFile, x.Dir()+btreeDataFile
	b, err := st.Get(ctx, lookupKey)
	if err != nil {
		return nil, nil, fmt.Errorf("lance: BTREE %s: %w", x.Name, err)
	}
	openData := func() (*file.Reader, error) {
		size, err := st.Size(ctx, dataKey)
		if err != nil {
			return nil, fmt.Errorf("lance: BTREE %s: %w", x.Name, err)
		}
		return file.Open(ctx, &storeSource{st: st, key: dataKey, size: size}, st.Location(dataKey))
	}
	wanted, err := searchBTreeFiles(ctx, file.BytesSource(b), st.Location(lookupKey), openData, st.Location(dataKey), af.Type, r, s)
	if err != nil {
		return nil, nil, err
	}
	if s.PagesRead == 0 {
		return nil, s, nil
	}
	s.RowIDs = len(wanted)
	addrs, err := d.addressesOf(x, wanted)
	if err != nil {
		return nil, nil, err
	}
	return addrs, s, nil
}

// searchBTreeFiles reads a BTREE's lookup (from lookup, at lookupLoc) and the pages of its
// page data (openData, at dataLoc) whose values may lie in r, r checked against the column
// type t (else a plain error: the caller's), and returns the row ids of the values in r; s
// gets the page counts. Whatever of the
// files does not make sense (a missing column, a column of another kind, a page past the data)
// is a *FormatError or a *file.FormatError.
func searchBTreeFiles(ctx context.Context, lookup file.Source, lookupLoc string, openData func() (*file.Reader, error), dataLoc string,
	t arrow.DataType, r BTreeRange, s *BTreeSearch) (map[uint64]bool, error) {
	bad := func(loc, format string, args ...any) error {
		return &FormatError{File: loc, Offset: -1, Reason: "BTREE " + fmt.Sprintf(format, args...)}
	}
	if err := r.check(t); err != nil {
		return nil, fmt.Errorf("lance: BTREE search: %w", err)
	}
	want := btreeKind(t)
	sameKind := func(loc, what string, a arrow.Array) error {
		if k := btreeKind(a.DataType()); k != want {
			return bad(loc, "%s are %s, the column is %s", what, a.DataType(), t)
		}
		return nil
	}
	lr, err := file.Open(ctx, lookup, lookupLoc)
	if err != nil {
		return nil, err
	}
	lookupRec, err := readIndexRows(ctx, lr, lookupLoc, 0, lr.NumRows())
	if err != nil {
		return nil, err
	}
	defer lookupRec.Release()
	if lookupRec.NumCols() < 4 {
		return nil, bad(lookupLoc, "lookup has %d columns, want 4", lookupRec.NumCols())
	}
	pageRows := int64(BTreePageRows)
	if v, ok := lr.Schema().Metadata["batch_size"]; ok {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || n <= 0 {
			return nil, bad(lookupLoc, "batch_size %q", v)
		}
		pageRows = n
	}
	mins, maxs := lookupRec.Column(0), lookupRec.Column(1)
	if err := sameKind(lookupLoc, "minima", mins); err != nil {
		return nil, err
	}
	if err := sameKind(lookupLoc, "maxima", maxs); err != nil {
		return nil, err
	}
	pageIdx, ok := lookupRec.Column(3).(*array.Uint32)
	if !ok {
		return nil, bad(lookupLoc, "page_idx is not UInt32")
	}
	s.Pages = int(lookupRec.NumRows())
	var pages []int64
	for i := 0; i < s.Pages; i++ {
		if mins.IsNull(i) || maxs.IsNull(i) {
			continue // a page of nulls only
		}
		below, err := r.below(maxs, i) // the whole page lies below the range
		if err != nil {
			return nil, bad(lookupLoc, "%v", err)
		}
		above, err := r.above(mins, i) // or above it
		if err != nil {
			return nil, bad(lookupLoc, "%v", err)
		}
		if !below && !above {
			pages = append(pages, int64(pageIdx.Value(i)))
		}
	}
	s.PagesRead = len(pages)
	if len(pages) == 0 {
		return nil, nil
	}
	dr, err := openData()
	if err != nil {
		return nil, err
	}
	wanted := map[uint64]bool{}
	for _, p := range pages {
		if dr.NumRows() <= 0 || p > (dr.NumRows()-1)/pageRows {
			return nil, bad(dataLoc, "page %d starts past the file's %d rows", p, dr.NumRows())
		}
		off := p * pageRows
		rec, err := readIndexRows(ctx, dr, dataLoc, off, min(pageRows, dr.NumRows()-off))
		if err != nil {
			return nil, err
		}
		err = btreePageIDs(rec, dataLoc, r, wanted, sameKind)
		rec.Release()
		if err != nil {
			return nil, err
		}
	}
	return wanted, nil
}

// readIndexRows reads rows [off, off+n) of every column of an index file, whose own schema says
// what they are: a type in it this package cannot read is the file's fault, a *FormatError.
func readIndexRows(ctx context.Context, r *file.Reader, loc string, off, n int64) (arrow.Record, error) {
	for _, f := range r.Schema().Fields {
		if _, err := f.ToArrow(); err != nil {
			return nil, &FormatError{File: loc, Offset: -1, Reason: fmt.Sprintf("index file column %q: %v", f.Name, err)}
		}
	}
	return r.Read(ctx, r.Schema().Fields, nil, off, n, memory.DefaultAllocator)
}

// btreePageIDs adds to wanted the row ids of the values of one page of page data that lie in r.
func btreePageIDs(rec arrow.Record, loc string, r BTreeRange, wanted map[uint64]bool, sameKind func(loc, what string, a arrow.Array) error) error {
	if rec.NumCols() < 2 {
		return &FormatError{File: loc, Offset: -1, Reason: fmt.Sprintf("BTREE page data has %d columns, want 2", rec.NumCols())}
	}
	ids, ok := rec.Column(1).(*array.Uint64)
	if !ok {
		return &FormatError{File: loc, Offset: -1, Reason: "BTREE ids are not UInt64"}
	}
	vals := rec.Column(0)
	if err := sameKind(loc, "values", vals); err != nil {
		return err
	}
	for i := 0; i < vals.Len(); i++ {
		if vals.IsNull(i) {
			continue
		}
		in, err := r.contains(vals, i)
		if err != nil {
			return &FormatError{File: loc, Offset: -1, Reason: "BTREE " + err.Error()}
		}
		if in {
			wanted[ids.Value(i)] = true
		}
	}
	return nil
}

// btreeKind is the kind of Go value a BTreeRange bound on a column of type t is (BTreeRange):
// "string", "float64", "uint64", "int64" or "bool"; "" for a type no BTREE orders.
func btreeKind(t arrow.DataType) string {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING:
		return "string"
	case arrow.FLOAT32, arrow.FLOAT64:
		return "float64"
	case arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return "uint64"
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.DATE32, arrow.DATE64, arrow.TIMESTAMP:
		return "int64"
	case arrow.BOOL:
		return "bool"
	}
	return ""
}

// check says whether r's bounds are Go values of the kind a column of type t compares with.
func (r BTreeRange) check(t arrow.DataType) error {
	k := btreeKind(t)
	if k == "" {
		return fmt.Errorf("no order for %s values", t)
	}
	for _, v := range []any{r.Lo, r.Hi} {
		if v == nil {
			continue
		}
		if got := fmt.Sprintf("%T", v); got != k {
			return fmt.Errorf("a %s value is compared with %s, not %s", t, got, k)
		}
	}
	return nil
}

// addressesOf maps row ids an index holds to the addresses of this version's rows in the
// fragments it covers: through each fragment's stable row id sequence, or, on a dataset
// without stable row ids, the ids being addresses already.
func (d *Dataset) addressesOf(x *Index, ids map[uint64]bool) ([]RowAddress, error) {
	var out []RowAddress
	if len(ids) == 0 {
		return nil, nil
	}
	stable := d.manifest.StableRowIDs()
	for i := range d.manifest.Fragments {
		f := &d.manifest.Fragments[i]
		if !x.Covers(f.ID) {
			continue
		}
		if !stable {
			for id := range ids {
				if a := RowAddress(id); a.Fragment() == f.ID && uint64(a.Offset()) < f.PhysicalRows {
					out = append(out, a)
				}
			}
			continue
		}
		seq, err := f.stableRowIDs()
		if err != nil {
			return nil, err
		}
		for off, id := range seq {
			if ids[id] {
				out = append(out, RowAddress(f.ID<<32|uint64(off)))
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// Take reads the live rows at addrs, in address order, each address once; an address of a
// deleted row, or of no row of this version, is skipped. Only the pages holding those rows are
// decoded, in runs of adjacent rows. Of opts it honours Columns (nil: every column), Filter and
// the extra columns (WithRowAddress, WithRowID, WithRowVersions); Fragments and Rows are
// addrs' to say.
func (d *Dataset) Take(ctx context.Context, addrs []RowAddress, opts ScanOptions) ([]arrow.Record, error) {
	opts.Fragments, opts.Rows = nil, nil
	sc, err := d.Scan(ctx, opts) // the projection, filter columns and output schema of a scan
	if err != nil {
		return nil, err
	}
	addrs = slices.Clone(addrs)
	slices.Sort(addrs)
	addrs = slices.Compact(addrs)
	var out []arrow.Record
	fail := func(err error) ([]arrow.Record, error) {
		for _, r := range out {
			r.Release()
		}
		return nil, err
	}
	for len(addrs) > 0 {
		frag := addrs[0].Fragment()
		n := 0
		for n < len(addrs) && addrs[n].Fragment() == frag {
			n++
		}
		offs := addrs[:n]
		addrs = addrs[n:]
		i := slices.IndexFunc(d.manifest.Fragments, func(f Fragment) bool { return f.ID == frag })
		if i < 0 {
			continue
		}
		f := &d.manifest.Fragments[i]
		fr, err := d.openFragment(ctx, f, sc.read)
		if err == nil {
			err = fr.withExtra(&sc.opts, d.manifest.StableRowIDs())
		}
		if err != nil {
			return fail(err)
		}
		var live []int64
		for _, a := range offs {
			off := a.Offset()
			if uint64(off) >= f.PhysicalRows {
				continue
			}
			if _, dead := slices.BinarySearch(fr.deleted, off); !dead {
				live = append(live, int64(off))
			}
		}
		sc.cur = fr
		for j := 0; j < len(live); {
			k := j + 1
			for k < len(live) && live[k] == live[k-1]+1 {
				k++
			}
			fr.pos = live[j]
			rec, err := fr.next(ctx, k-j, sc.mem)
			if err == nil {
				rec, err = sc.apply(ctx, rec) // the filter, and the filter-only columns dropped
			}
			if err != nil {
				return fail(err)
			}
			if rec.NumRows() == 0 {
				rec.Release()
			} else {
				out = append(out, rec)
			}
			j = k
		}
		sc.cur = nil
	}
	return out, nil
}

// Contains says whether row i of a lies in the range (a null never does); a is of the
// column's type, as a scan returns it. It is the range as a scan's filter tests it.
func (r BTreeRange) Contains(a arrow.Array, i int) (bool, error) {
	if a.IsNull(i) {
		return false, nil
	}
	return r.contains(a, i)
}

// contains says whether row i of a (not null) lies in the range.
func (r BTreeRange) contains(a arrow.Array, i int) (bool, error) {
	lo, err := r.below(a, i)
	if err != nil || lo {
		return false, err
	}
	hi, err := r.above(a, i)
	return !hi, err
}

// below says whether row i of a lies below the range's lower bound.
func (r BTreeRange) below(a arrow.Array, i int) (bool, error) {
	if r.Lo == nil {
		return false, nil
	}
	c, err := compareAt(a, i, r.Lo)
	return c < 0 || c == 0 && r.LoExcl, err
}

// above says whether row i of a lies above the range's upper bound.
func (r BTreeRange) above(a arrow.Array, i int) (bool, error) {
	if r.Hi == nil {
		return false, nil
	}
	c, err := compareAt(a, i, r.Hi)
	return c > 0 || c == 0 && r.HiExcl, err
}

// compareAt orders row i of a against v, a Go value of a's kind (BTreeRange), in the order a
// BTREE sorts its values.
func compareAt(a arrow.Array, i int, v any) (int, error) {
	kindErr := func(want string) (int, error) {
		return 0, fmt.Errorf("a %s value is compared with %T, not %s", a.DataType(), v, want)
	}
	switch x := a.(type) {
	case *array.Boolean:
		b, ok := v.(bool)
		if !ok {
			return kindErr("bool")
		}
		switch got := x.Value(i); {
		case got == b:
			return 0, nil
		case got:
			return 1, nil
		}
		return -1, nil
	case *array.String, *array.LargeString:
		s, ok := v.(string)
		if !ok {
			return kindErr("string")
		}
		var got string
		if xs, ok := x.(*array.String); ok {
			got = xs.Value(i)
		} else {
			got = x.(*array.LargeString).Value(i)
		}
		switch {
		case got < s:
			return -1, nil
		case got > s:
			return 1, nil
		}
		return 0, nil
	case *array.Float32, *array.Float64:
		f, ok := v.(float64)
		if !ok {
			return kindErr("float64")
		}
		var got float64
		if x32, ok := x.(*array.Float32); ok {
			got = float64(x32.Value(i))
		} else {
			got = x.(*array.Float64).Value(i)
		}
		return compareFloat(got, f), nil
	case *array.Uint8, *array.Uint16, *array.Uint32, *array.Uint64:
		u, ok := v.(uint64)
		if !ok {
			return kindErr("uint64")
		}
		got := unsignedAt(a, i)
		switch {
		case got < u:
			return -1, nil
		case got > u:
			return 1, nil
		}
		return 0, nil
	case *array.Int8, *array.Int16, *array.Int32, *array.Int64, *array.Date32, *array.Date64, *array.Timestamp:
		n, ok := v.(int64)
		if !ok {
			return kindErr("int64")
		}
		got := signedAt(a, i)
		switch {
		case got < n:
			return -1, nil
		case got > n:
			return 1, nil
		}
		return 0, nil
	}
	return 0, fmt.Errorf("no order for %s values", a.DataType())
}

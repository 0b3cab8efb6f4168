package lance

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// ScanOptions choose what a scan returns.
type ScanOptions struct {
	Columns   []string // nil: every column
	Filter    *Filter  // nil: every live row
	BatchRows int      // rows read per step from a fragment; default 65,536
	// WithRowAddress adds a column "_rowaddr" (UInt64) after the requested ones: fragment id
	// << 32 | row offset, the address StageRewriteRows takes.
	WithRowAddress bool
	// WithRowID adds a column "_rowid" (UInt64) after those: the row's stable row id (its
	// address on a dataset without stable row ids), as lance's with_row_id.
	WithRowID bool
	// WithRowVersions adds "_row_created_at_version" and "_row_last_updated_at_version"
	// (UInt64) after those: the versions that created and last wrote each row, read as lance
	// reads them (version 1 where a fragment records none).
	WithRowVersions bool
	// Fragments, when set, limits the scan to these fragment ids (in manifest order).
	Fragments []uint64
	// Rows, when set, limits the scan to the live rows at these addresses (and, with no
	// Fragments, to their fragments).
	Rows []RowAddress
}

// Names of the columns a scan adds on request (ScanOptions), in the order it adds them.
const (
	RowAddressColumn       = "_rowaddr"
	RowIDColumn            = "_rowid"
	RowCreatedAtColumn     = "_row_created_at_version"
	RowLastUpdatedAtColumn = "_row_last_updated_at_version"
)

// extraFields are the columns a scan appends after the requested ones.
func (o *ScanOptions) extraFields() []arrow.Field {
	var fs []arrow.Field
	add := func(name string) { fs = append(fs, arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Uint64}) }
	if o.WithRowAddress {
		add(RowAddressColumn)
	}
	if o.WithRowID {
		add(RowIDColumn)
	}
	if o.WithRowVersions {
		add(RowCreatedAtColumn)
		add(RowLastUpdatedAtColumn)
	}
	return fs
}

// RowAddress is a row's physical address: fragment id << 32 | offset within the fragment.
type RowAddress uint64

// Fragment is the fragment id of the address.
func (a RowAddress) Fragment() uint64 { return uint64(a) >> 32 }

// Offset is the row offset within the fragment.
func (a RowAddress) Offset() uint32 { return uint32(a) }

// Scanner streams the live rows of one version, fragment by fragment, reading only the
// columns asked for (plus the filter's).
type Scanner struct {
	d       *Dataset
	opts    ScanOptions
	out     *schema.Schema // projected schema returned to the caller
	read    *schema.Schema // projected + filter columns
	outIdx  []int          // positions of out's columns within read
	frag    int
	cur     *fragmentReader
	ahead   []chan openedFragment // fragments being opened, in scan order (see scanAhead)
	mem     memory.Allocator
	arrowSc *arrow.Schema
	rows    map[RowAddress]bool // opts.Rows as a set; nil: every row
}

// Scan starts a scan of this version.
func (d *Dataset) Scan(ctx context.Context, opts ScanOptions) (*Scanner, error) {
	if opts.BatchRows <= 0 {
		opts.BatchRows = 1 << 16
	}
	cols := opts.Columns
	if cols == nil {
		for _, f := range d.Schema().Fields {
			cols = append(cols, f.Name)
		}
	}
	out, err := d.Schema().Project(cols)
	if err != nil {
		return nil, err
	}
	readCols := append([]string(nil), cols...)
	if opts.Filter != nil {
		for _, c := range opts.Filter.Columns {
			if out.Field(c) == nil {
				readCols = append(readCols, c)
			}
		}
	}
	read, err := d.Schema().Project(readCols)
	if err != nil {
		return nil, err
	}
	as, err := out.ToArrow()
	if err != nil {
		return nil, err
	}
	if extra := opts.extraFields(); len(extra) > 0 {
		fs := append(as.Fields(), extra...)
		md := as.Metadata()
		as = arrow.NewSchema(fs, &md)
	}
	idx := make([]int, len(cols))
	for i := range cols {
		idx[i] = i
	}
	var rows map[RowAddress]bool
	if opts.Rows != nil {
		rows = make(map[RowAddress]bool, len(opts.Rows))
		frags := opts.Fragments == nil
		for _, a := range opts.Rows {
			rows[a] = true
			if frags && !slices.Contains(opts.Fragments, a.Fragment()) {
				opts.Fragments = append(opts.Fragments, a.Fragment())
			}
		}
		if opts.Fragments == nil {
			opts.Fragments = []uint64{} // no rows: no fragment
		}
	}
	return &Scanner{d: d, opts: opts, out: out, read: read, outIdx: idx, mem: memory.DefaultAllocator, arrowSc: as, rows: rows}, nil
}

func (s *Scanner) wanted(id uint64) bool {
	if s.opts.Fragments == nil {
		return true
	}
	for _, f := range s.opts.Fragments {
		if f == id {
			return true
		}
	}
	return false
}

// Schema is the Arrow schema of the records Next returns.
func (s *Scanner) Schema() *arrow.Schema { return s.arrowSc }

// Next returns the next non-empty batch of live rows, or io.EOF. The caller releases it.
func (s *Scanner) Next(ctx context.Context) (arrow.Record, error) {
	for {
		if s.cur == nil {
			s.openAhead(ctx)
			if len(s.ahead) == 0 {
				return nil, io.EOF
			}
			o := <-s.ahead[0]
			s.ahead = s.ahead[1:]
			if o.err != nil {
				return nil, o.err
			}
			s.cur = o.fr
		}
		rec, err := s.cur.next(ctx, s.opts.BatchRows, s.mem)
		if err == io.EOF {
			s.cur = nil
			continue
		}
		if err != nil {
			return nil, err
		}
		rec, err = s.apply(ctx, rec)
		if err != nil {
			return nil, err
		}
		if rec.NumRows() == 0 {
			rec.Release()
			continue
		}
		return rec, nil
	}
}

// scanAhead is how many fragments a scan opens ahead of the one it reads. Opening reads a
// fragment's small data files whole, the footers of large ones and its deletion file: on an
// object store each is a round trip, which a scan of many small fragments (a compaction, an
// index build) would otherwise wait for one fragment after another. The cost is at most
// scanAhead small files (wholeReadBytes each) held before they are read.
const scanAhead = 8

// openedFragment is a fragment opened ahead, or why it could not be.
type openedFragment struct {
	fr  *fragmentReader
	err error
}

// openAhead starts opening the next wanted fragments until scanAhead are under way. An error
// is reported when the scan reaches that fragment, as a scan opening one at a time would.
func (s *Scanner) openAhead(ctx context.Context) {
	frags := s.d.manifest.Fragments
	for len(s.ahead) < scanAhead {
		for s.frag < len(frags) && !s.wanted(frags[s.frag].ID) {
			s.frag++
		}
		if s.frag >= len(frags) {
			return
		}
		f := &frags[s.frag]
		s.frag++
		ch := make(chan openedFragment, 1) // buffered: an abandoned scan leaves no goroutine blocked
		s.ahead = append(s.ahead, ch)
		go func() {
			fr, err := s.d.openFragment(ctx, f, s.read)
			if err == nil {
				err = fr.withExtra(&s.opts, s.d.manifest.StableRowIDs())
			}
			ch <- openedFragment{fr: fr, err: err}
		}()
	}
}

// apply drops deleted and unselected rows and the filter-only columns.
func (s *Scanner) apply(ctx context.Context, rec arrow.Record) (arrow.Record, error) {
	keep := s.cur.liveMask(rec.NumRows())
	if s.rows != nil {
		n := rec.NumRows()
		if keep == nil {
			keep = make([]bool, n)
			for i := range keep {
				keep[i] = true
			}
		}
		base, start := s.cur.frag.ID<<32, uint64(s.cur.pos-n)
		for i := range keep {
			keep[i] = keep[i] && s.rows[RowAddress(base|(start+uint64(i)))]
		}
	}
	if s.opts.Filter != nil {
		m, err := s.opts.Filter.Match(rec)
		if err != nil {
			rec.Release()
			return nil, err
		}
		if keep == nil {
			keep = m
		} else {
			for i := range keep {
				keep[i] = keep[i] && m[i]
			}
		}
	}
	if len(s.read.Fields) != len(s.out.Fields) {
		cols := make([]arrow.Array, 0, len(s.outIdx)+1)
		for _, j := range s.outIdx {
			cols = append(cols, rec.Column(j))
		}
		for j := len(s.read.Fields); j < int(rec.NumCols()); j++ {
			cols = append(cols, rec.Column(j))
		}
		trimmed := array.NewRecord(s.arrowSc, cols, rec.NumRows())
		rec.Release()
		rec = trimmed
	}
	if keep == nil {
		return rec, nil
	}
	all := true
	for _, k := range keep {
		all = all && k
	}
	if all {
		return rec, nil
	}
	defer rec.Release()
	return filterRecord(rec, keep, s.mem)
}

// filterRecord keeps the rows marked in keep, copying each run of kept rows once.
func filterRecord(rec arrow.Record, keep []bool, mem memory.Allocator) (arrow.Record, error) {
	type run struct{ lo, hi int64 }
	var runs []run
	var kept int64
	for i := 0; i < len(keep); {
		if !keep[i] {
			i++
			continue
		}
		j := i
		for j < len(keep) && keep[j] {
			j++
		}
		runs = append(runs, run{int64(i), int64(j)})
		kept += int64(j - i)
		i = j
	}
	cols := make([]arrow.Array, rec.NumCols())
	for c := range cols {
		if len(runs) == 0 {
			cols[c] = array.MakeArrayOfNull(mem, rec.Column(c).DataType(), 0)
			continue
		}
		parts := make([]arrow.Array, len(runs))
		for k, r := range runs {
			parts[k] = array.NewSlice(rec.Column(c), r.lo, r.hi)
		}
		out, err := array.Concatenate(parts, mem)
		for _, p := range parts {
			p.Release()
		}
		if err != nil {
			for _, done := range cols[:c] {
				done.Release()
			}
			return nil, err
		}
		cols[c] = out
	}
	out := array.NewRecord(rec.Schema(), cols, kept)
	for _, c := range cols {
		c.Release()
	}
	return out, nil
}

// Each streams a scan's records to fn, releasing each after fn returns; the first error
// (the scan's or fn's) stops it.
func (d *Dataset) Each(ctx context.Context, opts ScanOptions, fn func(arrow.Record) error) error {
	sc, err := d.Scan(ctx, opts)
	if err != nil {
		return err
	}
	for {
		rec, err := sc.Next(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		err = fn(rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
}

// ReadAll scans into memory; convenient for tests and small tables.
func (d *Dataset) ReadAll(ctx context.Context, opts ScanOptions) ([]arrow.Record, error) {
	sc, err := d.Scan(ctx, opts)
	if err != nil {
		return nil, err
	}
	var out []arrow.Record
	for {
		rec, err := sc.Next(ctx)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			for _, r := range out {
				r.Release()
			}
			return nil, err
		}
		out = append(out, rec)
	}
}

// fragmentReader reads one fragment's rows in steps, across its data files.
type fragmentReader struct {
	frag     *Fragment
	fields   []*schema.Field
	readers  []*file.Reader // per field: the file holding it (nil: the column is absent, all null)
	colOf    []func(int32) (int, bool)
	deleted  []uint32 // sorted offsets
	pos      int64
	sc       *arrow.Schema
	extra    []arrow.Field // columns appended after the fields (ScanOptions.extraFields)
	withAddr bool          // append a _rowaddr column
	rowIDs   []uint64      // per physical row, when _rowid is asked for
	created  []uint64      // per physical row, when the version columns are asked for
	updated  []uint64
}

func (d *Dataset) openFragment(ctx context.Context, fr *Fragment, read *schema.Schema) (*fragmentReader, error) {
	if err := d.checkReadable(); err != nil {
		return nil, err
	}
	as, err := read.ToArrow()
	if err != nil {
		return nil, err
	}
	r := &fragmentReader{frag: fr, fields: read.Fields, sc: as}
	// The deletion file is read while the data files are opened: independent requests.
	type deletions struct {
		offsets []uint32
		err     error
	}
	deleted := make(chan deletions, 1)
	go func() {
		offsets, err := d.deletedOffsets(ctx, fr)
		deleted <- deletions{offsets, err}
	}()
	opened := map[int]*file.Reader{}
	for _, f := range read.Fields {
		fi := fileHolding(fr, f)
		if fi < 0 {
			r.readers = append(r.readers, nil)
			r.colOf = append(r.colOf, nil)
			continue
		}
		fileReader, ok := opened[fi]
		if !ok {
			df := &fr.Files[fi]
			st, key, err := d.dataFileKey(df)
			if err != nil {
				return nil, err
			}
			var src file.Source = &storeSource{st: st, key: key, size: int64(df.FileSizeBytes)}
			if df.FileSizeBytes == 0 {
				size, err := st.Size(ctx, key)
				if err != nil {
					return nil, fmt.Errorf("lance: data file %s: %w", st.Location(key), err)
				}
				src = &storeSource{st: st, key: key, size: size}
			}
			if b, ok := writtenBytes(st.Location(key), src.Size()); ok {
				src = memSource(b)
			} else if src.Size() <= wholeReadBytes {
				// A small file costs one request read whole, instead of one per page.
				b, err := st.GetRange(ctx, key, 0, src.Size())
				if err != nil {
					return nil, fmt.Errorf("lance: data file %s: %w", st.Location(key), err)
				}
				src = memSource(b)
			}
			if fileReader, err = file.Open(ctx, src, st.Location(key)); err != nil {
				return nil, err
			}
			if uint64(fileReader.NumRows()) != fr.PhysicalRows {
				return nil, &FormatError{File: st.Location(key), Offset: -1, Reason: fmt.Sprintf("file has %d rows, fragment %d says %d", fileReader.NumRows(), fr.ID, fr.PhysicalRows)}
			}
			opened[fi] = fileReader
		}
		r.readers = append(r.readers, fileReader)
		r.colOf = append(r.colOf, columnMap(&fr.Files[fi]))
	}
	del := <-deleted
	if del.err != nil {
		return nil, del.err
	}
	r.deleted = del.offsets
	return r, nil
}

// fileHolding is the index of the data file of fr that holds field f, or -1. A 2.0 file lists
// every field, struct and list parents included; a 2.1+ file gives parents no column and lists
// only leaf ids, so a nested field is found through any of its descendants.
func fileHolding(fr *Fragment, f *schema.Field) int {
	fi := -1
	var walk func(*schema.Field)
	walk = func(x *schema.Field) {
		for i := range fr.Files {
			for _, id := range fr.Files[i].Fields {
				if id == x.ID {
					fi = i
				}
			}
		}
		for _, k := range x.Children {
			walk(k)
		}
	}
	walk(f)
	return fi
}

func columnMap(df *DataFile) func(int32) (int, bool) {
	m := make(map[int32]int, len(df.Fields))
	for i, id := range df.Fields {
		if i < len(df.ColumnIndices) && df.ColumnIndices[i] >= 0 {
			m[id] = int(df.ColumnIndices[i])
		}
	}
	return func(id int32) (int, bool) { c, ok := m[id]; return c, ok }
}

func (r *fragmentReader) next(ctx context.Context, batch int, mem memory.Allocator) (arrow.Record, error) {
	total := int64(r.frag.PhysicalRows)
	if r.pos >= total {
		return nil, io.EOF
	}
	n := min(int64(batch), total-r.pos)
	cols := make([]arrow.Array, len(r.fields))
	release := func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}
	for i, f := range r.fields {
		if r.readers[i] == nil {
			dt, err := f.ArrowType()
			if err != nil {
				release()
				return nil, err
			}
			cols[i] = array.MakeArrayOfNull(mem, dt, int(n))
			continue
		}
		rec, err := r.readers[i].Read(ctx, []*schema.Field{f}, r.colOf[i], r.pos, n, mem)
		if err != nil {
			release()
			return nil, err
		}
		cols[i] = rec.Column(0)
		cols[i].Retain()
		rec.Release()
	}
	sc := r.sc
	if len(r.extra) > 0 {
		// The extra columns are views of the reader's slices, which it made for itself and
		// never changes, or of one made for the batch: a fold reads back a table's new keys
		// with their row ids, and copying the ids through a builder was a fifth of that read.
		// A batch kept alone keeps its fragment's whole slices (8 bytes a row each) alive.
		window := func(all []uint64) []uint64 { return all[r.pos : r.pos+n : r.pos+n] }
		if r.withAddr {
			addrs := make([]uint64, n)
			base := r.frag.ID<<32 | uint64(r.pos)
			for i := range addrs {
				addrs[i] = base + uint64(i)
			}
			cols = append(cols, uint64View(addrs))
		}
		if r.rowIDs != nil {
			cols = append(cols, uint64View(window(r.rowIDs)))
		}
		if r.created != nil {
			cols = append(cols, uint64View(window(r.created)), uint64View(window(r.updated)))
		}
		sc = arrow.NewSchema(append(sc.Fields(), r.extra...), nil)
	}
	rec := array.NewRecord(sc, cols, n)
	release()
	r.pos += n
	return rec, nil
}

// uint64View is a UInt64 array over vals, which it shares (no copy): vals must not change
// afterwards.
func uint64View(vals []uint64) arrow.Array {
	buf := memory.NewBufferBytes(arrow.Uint64Traits.CastToBytes(vals))
	data := array.NewData(arrow.PrimitiveTypes.Uint64, len(vals), []*memory.Buffer{nil, buf}, nil, 0, 0)
	defer data.Release()
	return array.NewUint64Data(data)
}

// withExtra prepares the extra columns opts asks for.
func (r *fragmentReader) withExtra(opts *ScanOptions, stable bool) error {
	r.extra, r.withAddr = opts.extraFields(), opts.WithRowAddress
	f := r.frag
	if opts.WithRowID {
		if stable {
			ids, err := f.stableRowIDs()
			if err != nil {
				return err
			}
			r.rowIDs = ids
		} else {
			r.rowIDs = make([]uint64, f.PhysicalRows)
			for i := range r.rowIDs {
				r.rowIDs[i] = f.ID<<32 | uint64(i)
			}
		}
	}
	if opts.WithRowVersions {
		cr, err := f.createdRuns()
		if err != nil {
			return err
		}
		up, ok, err := f.versionRuns(f.LastUpdatedAt, 8, "last-updated-at")
		if err != nil {
			return err
		}
		if !ok && f.PhysicalRows > 0 {
			up = []versionRun{{n: f.PhysicalRows, version: 1}}
		}
		r.created, r.updated = expandRuns(cr), expandRuns(up)
		if r.created == nil {
			r.created, r.updated = []uint64{}, []uint64{}
		}
	}
	return nil
}

// liveMask marks the rows of the batch just read that are not deleted; nil when all are live.
func (r *fragmentReader) liveMask(n int64) []bool {
	start := r.pos - n
	lo := sort.Search(len(r.deleted), func(i int) bool { return int64(r.deleted[i]) >= start })
	if lo == len(r.deleted) || int64(r.deleted[lo]) >= r.pos {
		return nil
	}
	keep := make([]bool, n)
	for i := range keep {
		keep[i] = true
	}
	for _, off := range r.deleted[lo:] {
		if int64(off) >= r.pos {
			break
		}
		keep[int64(off)-start] = false
	}
	return keep
}

// wholeReadBytes is the size up to which a data file is read in one request.
const wholeReadBytes = 1 << 20

// memSource is a data file already read whole.
type memSource []byte

func (m memSource) Size() int64 { return int64(len(m)) }

func (m memSource) ReadAt(_ context.Context, off, n int64) ([]byte, error) {
	if !within(off, n, int64(len(m))) {
		return nil, fmt.Errorf("lance: read [%d, %d) beyond the %d-byte file", off, off+n, len(m))
	}
	return m[off : off+n], nil
}

// storeSource adapts a stored object to file.Source with range reads.
type storeSource struct {
	st     storage.Store
	key    string
	size   int64
	ranges *storage.Ranges // when set, the reads go through it (one open file on a local root)
}

func (s *storeSource) Size() int64 { return s.size }

func (s *storeSource) ReadAt(ctx context.Context, off, n int64) ([]byte, error) {
	if s.ranges != nil {
		return s.ranges.GetRange(ctx, off, n)
	}
	return s.st.GetRange(ctx, s.key, off, n)
}

// deleteAddresses marks the given rows deleted: new cumulative deletion files for the touched
// fragments (to be written with the transaction, w), and the ids of fragments left with no
// live row.
func (d *Dataset) deleteAddresses(ctx context.Context, addrs []RowAddress, w *fileWrites) (updated []Fragment, removed []uint64, err error) {
	byFrag := map[uint64][]uint32{}
	for _, a := range addrs {
		byFrag[a.Fragment()] = append(byFrag[a.Fragment()], a.Offset())
	}
	for i := range d.manifest.Fragments {
		fr := &d.manifest.Fragments[i]
		offs, ok := byFrag[fr.ID]
		if !ok {
			continue
		}
		delete(byFrag, fr.ID)
		old, err := d.deletedOffsets(ctx, fr)
		if err != nil {
			return nil, nil, err
		}
		dead := map[uint32]bool{}
		for _, o := range old {
			dead[o] = true
		}
		for _, o := range offs {
			if uint64(o) >= fr.PhysicalRows {
				return nil, nil, fmt.Errorf("lance: row address %d:%d is past fragment %d's %d rows", fr.ID, o, fr.ID, fr.PhysicalRows)
			}
			dead[o] = true
		}
		nf, gone, err := d.writeDeletion(fr, dead, w)
		if err != nil {
			return nil, nil, err
		}
		if gone {
			removed = append(removed, fr.ID)
		} else {
			updated = append(updated, nf)
		}
	}
	for id := range byFrag {
		return nil, nil, fmt.Errorf("lance: row address names fragment %d, which version %d does not have", id, d.Version())
	}
	return updated, removed, nil
}

// writeDeletion writes the cumulative deletion file of fr holding dead, or reports that no
// row is left (the fragment is then removed rather than given a full deletion vector).
func (d *Dataset) writeDeletion(fr *Fragment, dead map[uint32]bool, w *fileWrites) (Fragment, bool, error) {
	if uint64(len(dead)) == fr.PhysicalRows {
		return Fragment{}, true, nil
	}
	offs := make([]uint32, 0, len(dead))
	for o := range dead {
		offs = append(offs, o)
	}
	sort.Slice(offs, func(a, b int) bool { return offs[a] < offs[b] })
	body, err := encodeDeletionArrow(offs)
	if err != nil {
		return Fragment{}, false, err
	}
	nf := fr.clone()
	nf.Deletion = &DeletionFile{FileType: DeletionArrow, ReadVersion: d.Version(), ID: randomUint64(), NumDeletedRows: uint64(len(offs))}
	w.add(deletionKey(nf.ID, nf.Deletion), body, "lance.write_deletion_file", "deletion file")
	return nf, false, nil
}

// deleteMatching computes the fragments a delete by f changes: new cumulative deletion files,
// to be written with the transaction (w), and the ids of fragments left with no live row.
func (d *Dataset) deleteMatching(ctx context.Context, f Filter, w *fileWrites) (updated []Fragment, removed []uint64, err error) {
	read, err := d.Schema().Project(f.Columns)
	if err != nil {
		return nil, nil, err
	}
	for i := range d.manifest.Fragments {
		fr := &d.manifest.Fragments[i]
		r, err := d.openFragment(ctx, fr, read)
		if err != nil {
			return nil, nil, err
		}
		dead := map[uint32]bool{}
		for _, o := range r.deleted {
			dead[o] = true
		}
		before := len(dead)
		for {
			start := r.pos
			rec, err := r.next(ctx, 1<<16, memory.DefaultAllocator)
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, nil, err
			}
			m, err := f.Match(rec)
			rec.Release()
			if err != nil {
				return nil, nil, err
			}
			for j, hit := range m {
				if hit {
					dead[uint32(start)+uint32(j)] = true
				}
			}
		}
		if len(dead) == before {
			continue
		}
		nf, gone, err := d.writeDeletion(fr, dead, w)
		if err != nil {
			return nil, nil, err
		}
		if gone {
			removed = append(removed, fr.ID)
		} else {
			updated = append(updated, nf)
		}
	}
	return updated, removed, nil
}

package lance

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// CompactionOptions mirror lance's compaction defaults.
type CompactionOptions struct {
	// TargetRowsPerFragment: fragments with fewer physical rows are candidates, and rewritten
	// fragments hold at most this many rows. 0 means 1<<20 (lance's target_rows_per_fragment).
	TargetRowsPerFragment uint64
	// MaterializeDeletionsThreshold: a fragment with more than this fraction of its rows
	// deleted is a candidate on its own. 0 means 0.1 (lance's default); negative disables.
	MaterializeDeletionsThreshold float64
	// Fragments, when not nil, replaces the planner: exactly these fragments, which must be
	// adjacent in the manifest and given in its order, are rewritten as one group (its output
	// cut at the target rows), whatever their size or deletions. One fragment without
	// deletions, or none, is nothing to do.
	Fragments []uint64
	// MaxBytesPerFile: a rewritten fragment's data file is also cut once it holds this many
	// bytes, and a fragment whose files hold half as many is no size candidate. 0 means
	// DefaultMaxBytesPerFile. (Lance cuts at max_bytes_per_file, 90 GB; the cut here is lower
	// because compaction holds one output file in memory, so it bounds compaction's memory.)
	MaxBytesPerFile uint64
	// NoPageCopy rewrites every group by decoding and encoding its rows, even where its
	// fragments' encoded pages could be copied into the new files (see StageCompaction).
	NoPageCopy bool
}

// DefaultMaxBytesPerFile is the data file size at which compaction starts a new fragment.
// Compacting a 1 GB table of 2 KB rows peaked at 400 MiB RSS with it (3.5 GiB without a cut,
// 1.2 GiB at 256 MiB): the file being built, its growth and the collector's slack.
const DefaultMaxBytesPerFile = 64 << 20

const (
	defaultCompactionTarget    = 1 << 20
	defaultMaterializeFraction = 0.1
)

// FullBySize says whether f's data files hold at least half of maxBytes (0: the default), so
// that compaction would rewrite it into a file of its own anyway; unrecorded sizes say no.
func (f *Fragment) FullBySize(maxBytes uint64) bool {
	if maxBytes == 0 {
		maxBytes = DefaultMaxBytesPerFile
	}
	n, ok := f.FileBytes()
	return ok && n >= maxBytes/2
}

// Compaction describes a staged rewrite (StageCompaction).
type Compaction struct {
	readVersion uint64
	groups      []compactGroup
	removed     int
	added       int
	copied      int
	rows        uint64
}

// compactGroup is one rewrite group: where each live row of its old fragments went.
type compactGroup struct {
	old   []compactOld
	paths []string // the data file of each new fragment, in order (file names are unique)
	ends  []uint64 // rows of the group up to and including each new fragment
}

// compactOld is one rewritten fragment of the read version.
type compactOld struct {
	id       uint64
	physical uint64
	deleted  []uint32 // sorted deleted offsets
	base     uint64   // live rows of the group before this fragment
}

// Span is the lowest and highest id of the fragments the rewrite replaces: the Remap of its
// commit moves rows of those fragments only.
func (c *Compaction) Span() (lo, hi uint64) {
	lo = math.MaxUint64
	for gi := range c.groups {
		for _, o := range c.groups[gi].old {
			lo, hi = min(lo, o.id), max(hi, o.id)
		}
	}
	return lo, hi
}

// FragmentsRemoved is how many fragments the rewrite replaces.
func (c *Compaction) FragmentsRemoved() int { return c.removed }

// FragmentsAdded is how many fragments the rewrite writes.
func (c *Compaction) FragmentsAdded() int { return c.added }

// FragmentsCopied is how many of the fragments the rewrite writes were built by copying
// encoded pages rather than by decoding and encoding rows.
func (c *Compaction) FragmentsCopied() int { return c.copied }

// RowsRewritten is how many live rows the rewrite moves.
func (c *Compaction) RowsRewritten() uint64 { return c.rows }

// NumFragments is the number of fragments of this version (a cheap compaction trigger).
func (d *Dataset) NumFragments() int { return len(d.manifest.Fragments) }

// candidacy of a fragment in lance's planner.
const (
	notCandidate = iota
	withNeighbors
	itself
)

type compactCandidate struct {
	frag      *Fragment
	candidacy int
	live      uint64
}

// StageCompaction plans and stages one Rewrite transaction that folds small fragments (and
// fragments with many deletions) into fewer, as lance's compact_files does on a dataset with
// stable row ids:
//
//   - a fragment is a candidate when it has more than MaterializeDeletionsThreshold of its rows
//     deleted (it is then rewritten even alone), or fewer physical rows than the target (it is
//     then rewritten only with neighbours);
//   - runs of adjacent candidates form groups, split into bins of at least the target's live
//     rows (the remainder joining the last bin); a group of one fragment that is only a
//     candidate for its size is left alone;
//   - each group's live rows are read in order and written as new fragments of at most the
//     target's rows and about MaxBytesPerFile bytes (ids unassigned), whose row id sequences
//     carry the rows' stable row ids and whose created-at / last-updated-at sequences carry
//     each row's versions (deleted rows dropped from all three).
//
// A group whose fragments are each one data file of the declared version, 2.1 or later,
// holding every column and no deletions, is rewritten without decoding: its files' encoded
// pages are copied into the new files (file.Concat), each new fragment ending before the input
// that would take it past the target rows or MaxBytesPerFile. Rows, order, row ids and versions
// are those a decoding rewrite gives; the pages keep their sizes and compression. An input
// that turns out not to be copyable sends its group back to decoding (NoPageCopy forces that).
//
// Unlike lance, a fragment whose files already hold half of MaxBytesPerFile is no candidate for
// its size: a table of wide rows would otherwise rewrite its size-cut fragments on every run.
//
// CompactionOptions.Fragments replaces the first two steps with the caller's own group.
//
// It returns (nil, nil, nil) when nothing needs compacting, and an error wrapping
// ErrUnsupported on a dataset without stable row ids. The rewritten data files are written while
// staging, each as soon as it is finished, so compaction holds about one file and one read batch
// in memory whatever the group's size; until Commit they are unreferenced, and a staging that
// fails or is never committed leaves them to cleanup's orphan sweep. Compaction.Remap then maps
// old row addresses.
func (d *Dataset) StageCompaction(ctx context.Context, co CompactionOptions, o StageOptions) (*Staged, *Compaction, error) {
	m := d.manifest
	if !m.StableRowIDs() {
		return nil, nil, fmt.Errorf("%w: compaction of %s: the dataset has no stable row ids", ErrUnsupported, d.dir.URI())
	}
	// Compaction rewrites files: of the declared version, or not at all.
	fo, err := d.fileOptions(o.FileOptions)
	if err != nil {
		return nil, nil, err
	}
	target := co.TargetRowsPerFragment
	if target == 0 {
		target = defaultCompactionTarget
	}
	threshold := co.MaterializeDeletionsThreshold
	if threshold == 0 {
		threshold = defaultMaterializeFraction
	}
	var bins [][]compactCandidate
	if co.Fragments != nil {
		bins, err = d.chosenBin(co.Fragments)
	} else {
		bins, err = d.planCompaction(ctx, target, co.MaxBytesPerFile, threshold)
	}
	if err != nil || len(bins) == 0 {
		return nil, nil, err
	}

	maxBytes := co.MaxBytesPerFile
	if maxBytes == 0 {
		maxBytes = DefaultMaxBytesPerFile
	}
	out := fragmentSink{s: d.Schema(), fo: fo, maxRows: int64(min(target, math.MaxUint32)), maxBytes: int64(min(maxBytes, math.MaxInt64)),
		put: func(key string, data []byte) error {
			if err := inject("lance.write_data_file"); err != nil {
				return err
			}
			if err := d.dir.Put(ctx, key, data); err != nil {
				return fmt.Errorf("lance: write data file: %w", err)
			}
			return nil
		},
		compose: func(key string, parts []storage.Part) error {
			if err := inject("lance.write_data_file"); err != nil {
				return err
			}
			if err := storage.Compose(ctx, d.dir, key, parts); err != nil {
				return fmt.Errorf("lance: write data file: %w", err)
			}
			return nil
		}}
	c := &Compaction{readVersion: m.Version}
	op := Operation{Kind: OpRewrite}
	for _, bin := range bins {
		sink := out
		g, cg, copied, err := d.rewriteBin(ctx, bin, &sink, !co.NoPageCopy)
		if err != nil {
			return nil, nil, err
		}
		if copied {
			c.copied += len(g.NewFragments)
		}
		op.Groups = append(op.Groups, g)
		c.groups = append(c.groups, cg)
		c.removed += len(g.OldFragments)
		c.added += len(g.NewFragments)
		if n := len(cg.ends); n > 0 {
			c.rows += cg.ends[n-1]
		}
	}
	return d.newStaged(o, op, &fileWrites{}), c, nil
}

// planCompaction is lance's plan_compaction: the bins of fragments to rewrite. As in lance, a
// bin holds only fragments the same indices cover, so that each index covers a rewritten
// group whole or not at all; fragments no rewrite may move (indexCoverage) are no candidates.
func (d *Dataset) planCompaction(ctx context.Context, target, maxBytes uint64, threshold float64) ([][]compactCandidate, error) {
	var bins [][]compactCandidate
	var cur []compactCandidate
	cover, blocked := d.manifest.indexCoverage()
	curCover := ""
	end := func() {
		// A bin of one fragment that is only a candidate for its size changes nothing.
		if len(cur) > 1 || (len(cur) == 1 && cur[0].candidacy == itself) {
			bins = append(bins, splitForSize(cur, target)...)
		}
		cur = nil
	}
	for i := range d.manifest.Fragments {
		f := &d.manifest.Fragments[i]
		deleted := uint64(0)
		if f.Deletion != nil {
			deleted = f.Deletion.NumDeletedRows
			if deleted == 0 { // unknown: count the file
				offs, err := d.deletedOffsets(ctx, f)
				if err != nil {
					return nil, err
				}
				deleted = uint64(len(offs))
			}
		}
		if deleted > f.PhysicalRows {
			return nil, fmt.Errorf("lance: fragment %d has %d deleted rows of %d", f.ID, deleted, f.PhysicalRows)
		}
		c := compactCandidate{frag: f, live: f.PhysicalRows - deleted}
		switch {
		case threshold >= 0 && f.PhysicalRows > 0 && float64(deleted)/float64(f.PhysicalRows) > threshold:
			c.candidacy = itself
		case f.PhysicalRows < target && !f.FullBySize(maxBytes):
			c.candidacy = withNeighbors
		}
		if c.candidacy == notCandidate || blocked(f.ID) {
			end()
			continue
		}
		if k := cover(f.ID); len(cur) == 0 || k != curCover {
			end()
			curCover = k
		}
		cur = append(cur, c)
	}
	end()
	return bins, nil
}

// chosenBin is the one bin of the fragments a caller chose (CompactionOptions.Fragments).
func (d *Dataset) chosenBin(ids []uint64) ([][]compactCandidate, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	frags := d.manifest.Fragments
	start := slices.IndexFunc(frags, func(f Fragment) bool { return f.ID == ids[0] })
	if start < 0 || start+len(ids) > len(frags) {
		return nil, fmt.Errorf("lance: compaction of fragments %v: version %d does not hold them in a row", ids, d.Version())
	}
	var bin []compactCandidate
	for i, id := range ids {
		f := &frags[start+i]
		if f.ID != id {
			return nil, fmt.Errorf("lance: compaction of fragments %v: version %d does not hold them in a row", ids, d.Version())
		}
		bin = append(bin, compactCandidate{frag: f, candidacy: itself, live: f.NumRows()})
	}
	// The chosen run is cut where the indices covering it change, and leaves out fragments no
	// rewrite may move, as the planner does: every index covers a group whole or not at all.
	cover, blocked := d.manifest.indexCoverage()
	var bins [][]compactCandidate
	var run []compactCandidate
	runCover := ""
	flush := func() {
		if len(run) > 1 || (len(run) == 1 && run[0].frag.Deletion != nil) {
			bins = append(bins, run)
		}
		run = nil
	}
	for _, c := range bin {
		if blocked(c.frag.ID) {
			flush()
			continue
		}
		if k := cover(c.frag.ID); len(run) == 0 || k != runCover {
			flush()
			runCover = k
		}
		run = append(run, c)
	}
	flush()
	return bins, nil
}

// splitForSize cuts a run of candidates into bins of at least min live rows each, the
// remainder joining the last bin (lance's CandidateBin::split_for_size).
func splitForSize(run []compactCandidate, min uint64) [][]compactCandidate {
	var out [][]compactCandidate
	for {
		n, rows := 0, uint64(0)
		for rows < min && n < len(run) {
			rows += run[n].live
			n++
		}
		var rest uint64
		for _, c := range run[n:] {
			rest += c.live
		}
		if rest < min {
			return append(out, run)
		}
		out = append(out, run[:n])
		run = run[n:]
	}
}

// rowSequences are a fragment's stable row ids and the created-at and last-updated-at version
// of each of its physical rows.
func (f *Fragment) rowSequences() (ids, created, updated []uint64, err error) {
	if ids, err = f.stableRowIDs(); err != nil {
		return nil, nil, nil, err
	}
	cr, err := f.createdRuns()
	if err != nil {
		return nil, nil, nil, err
	}
	up, err := f.lastUpdatedRuns()
	if err != nil {
		return nil, nil, nil, err
	}
	return ids, expandRuns(cr), expandRuns(up), nil
}

// seal gives a finished rewritten fragment the row ids and versions of its rows and records it
// in the group, at rows the group's finished fragments hold with it.
func (cg *compactGroup) seal(nf *Fragment, ids, created, updated []uint64, at uint64) {
	cg.sealEncoded(nf, encodeRowIDSequence(ids), encodeVersionRuns(created), encodeVersionRuns(updated), at)
}

// sealEncoded is seal with the sequences already serialized.
func (cg *compactGroup) sealEncoded(nf *Fragment, rowIDs, created, updated []byte, at uint64) {
	nf.RowIDs, nf.CreatedAt, nf.LastUpdatedAt = rowIDs, created, updated
	cg.paths = append(cg.paths, nf.Files[0].Path)
	cg.ends = append(cg.ends, at)
}

// rewriteGroup reads the live rows of one bin in order and writes them through sink as new
// fragments, carrying their row ids and versions.
func (d *Dataset) rewriteGroup(ctx context.Context, bin []compactCandidate, sink *fragmentSink) (RewriteGroup, compactGroup, error) {
	var g RewriteGroup
	var cg compactGroup
	// The row ids and versions of the rows read but not yet in a finished fragment: at most
	// one input fragment's and one output file's worth.
	var ids, created, updated []uint64
	var at uint64 // rows of the group in finished fragments
	sealed := 0
	seal := func() error {
		for ; sealed < len(sink.frags); sealed++ {
			nf := &sink.frags[sealed]
			n := nf.PhysicalRows
			if n > uint64(len(ids)) {
				return fmt.Errorf("lance: compaction wrote more rows than it read row ids for")
			}
			at += n
			cg.seal(nf, ids[:n], created[:n], updated[:n], at)
			ids, created, updated = slices.Clone(ids[n:]), slices.Clone(created[n:]), slices.Clone(updated[n:])
		}
		return nil
	}
	var before uint64 // live rows of the group before the current input fragment
	for _, c := range bin {
		f := c.frag
		r, err := d.openFragment(ctx, f, d.Schema())
		if err != nil {
			return g, cg, err
		}
		fids, fcreated, fupdated, err := f.rowSequences()
		if err != nil {
			return g, cg, err
		}
		cg.old = append(cg.old, compactOld{id: f.ID, physical: f.PhysicalRows, deleted: r.deleted, base: before})
		ids = appendLive(ids, fids, r.deleted)
		created = appendLive(created, fcreated, r.deleted)
		updated = appendLive(updated, fupdated, r.deleted)
		batch := readBatchRows(f.PhysicalRows, d.fragmentBytes(ctx, f))
		var read uint64
		for {
			rec, err := r.next(ctx, batch, memory.DefaultAllocator)
			if err == io.EOF {
				break
			}
			if err != nil {
				return g, cg, err
			}
			if keep := r.liveMask(rec.NumRows()); keep != nil {
				live, err := filterRecord(rec, keep, memory.DefaultAllocator)
				rec.Release()
				if err != nil {
					return g, cg, err
				}
				rec = live
			}
			read += uint64(rec.NumRows())
			err = sink.write(rec)
			rec.Release()
			if err == nil {
				err = seal()
			}
			if err != nil {
				return g, cg, err
			}
		}
		if read != f.PhysicalRows-uint64(len(r.deleted)) {
			return g, cg, fmt.Errorf("lance: compaction read %d live rows of fragment %d, which has %d", read, f.ID, f.PhysicalRows-uint64(len(r.deleted)))
		}
		before += read
		g.OldFragments = append(g.OldFragments, f.clone())
	}
	if err := sink.flush(); err != nil {
		return g, cg, err
	}
	if err := seal(); err != nil {
		return g, cg, err
	}
	if len(ids) != 0 {
		return g, cg, fmt.Errorf("lance: compaction wrote %d rows for %d live row ids", at, at+uint64(len(ids)))
	}
	g.NewFragments = sink.frags
	return g, cg, nil
}

// compactReadBytes is about how much of a fragment compaction decodes at once.
const compactReadBytes = 8 << 20

// readBatchRows is how many of a fragment's rows compaction reads at once: about
// compactReadBytes by the fragment's size in bytes, between 256 rows and 64 Ki.
func readBatchRows(rows, bytes uint64) int {
	if rows == 0 || bytes == 0 {
		return 1 << 16
	}
	per := max(bytes/rows, 1)
	return int(min(max(compactReadBytes/per, 256), 1<<16))
}

// fragmentBytes is the size of f's data files: as the manifest records it, else as storage
// reports it (writers may leave the size out); 0 when neither tells.
func (d *Dataset) fragmentBytes(ctx context.Context, f *Fragment) uint64 {
	if n, ok := f.FileBytes(); ok {
		return n
	}
	var n uint64
	for i := range f.Files {
		st, key, err := d.dataFileKey(&f.Files[i])
		if err != nil {
			return 0
		}
		sz, err := st.Size(ctx, key)
		if err != nil {
			return 0
		}
		n += uint64(sz)
	}
	return n
}

// appendLive appends the values of vals (one per physical row) at offsets not in deleted.
func appendLive(out, vals []uint64, deleted []uint32) []uint64 {
	prev := 0
	for _, off := range deleted {
		out = append(out, vals[prev:off]...)
		prev = int(off) + 1
	}
	return append(out, vals[prev:]...)
}

// Remap, given the dataset version the staged rewrite committed as (the *Dataset Commit
// returned, or a later version that still holds the rewritten fragments), returns a function
// that maps a row address LIVE in a rewritten fragment of the read version to the address the
// row has now, with moved=true. Addresses outside the rewritten fragments are returned
// unchanged with moved=false; an address of a rewritten fragment that was not live there
// (deleted, or past its rows) yields (0, false). The function is safe for concurrent use.
func (c *Compaction) Remap(committed *Dataset) (func(old RowAddress) (addr RowAddress, moved bool), error) {
	if committed.Version() <= c.readVersion {
		return nil, fmt.Errorf("lance: remap: version %d is not after the compaction's read version %d", committed.Version(), c.readVersion)
	}
	byPath := make(map[string]uint64, len(committed.manifest.Fragments))
	for i := range committed.manifest.Fragments {
		f := &committed.manifest.Fragments[i]
		if len(f.Files) > 0 {
			byPath[f.Files[0].Path] = f.ID
		}
	}
	newIDs := make([][]uint64, len(c.groups))
	for gi := range c.groups {
		for _, p := range c.groups[gi].paths {
			id, ok := byPath[p]
			if !ok {
				return nil, fmt.Errorf("lance: remap: version %d does not hold the compaction's fragment with data file %s", committed.Version(), p)
			}
			newIDs[gi] = append(newIDs[gi], id)
		}
	}
	// A commit maps every id of a table's id index through this, on the commit path, so the
	// common case is one slice index and one add: an old fragment with no deletions whose rows
	// all went to one new fragment moves by a constant (BenchmarkCompactionRemap: 10.5 ns a
	// row through a map and two searches, before).
	lo, hi := c.Span()
	var dense []oldMove
	olds := map[uint64]*oldMove{}
	n := 0
	for gi := range c.groups {
		n += len(c.groups[gi].old)
	}
	if lo <= hi && hi-lo < uint64(max(64, 8*n)) { // ids close together: a table
		dense = make([]oldMove, hi-lo+1)
	}
	for gi := range c.groups {
		g := &c.groups[gi]
		for i := range g.old {
			o := &g.old[i]
			m := oldMove{group: gi, frag: o}
			if j := sort.Search(len(g.ends), func(j int) bool { return g.ends[j] > o.base }); len(o.deleted) == 0 && j < len(g.ends) && o.base+o.physical <= g.ends[j] {
				start := uint64(0)
				if j > 0 {
					start = g.ends[j-1]
				}
				m.shift, m.to = true, newIDs[gi][j]<<32|(o.base-start)
			}
			if dense != nil {
				dense[o.id-lo] = m
			} else {
				olds[o.id] = &m
			}
		}
	}
	return func(a RowAddress) (RowAddress, bool) {
		var m *oldMove
		if f := a.Fragment(); dense != nil {
			if f-lo >= uint64(len(dense)) || dense[f-lo].frag == nil {
				return a, false
			}
			m = &dense[f-lo]
		} else if m = olds[f]; m == nil {
			return a, false
		}
		o, off := m.frag, a.Offset()
		if uint64(off) >= o.physical {
			return 0, false
		}
		if m.shift {
			return RowAddress(m.to + uint64(off)), true
		}
		k, dead := slices.BinarySearch(o.deleted, off)
		if dead {
			return 0, false
		}
		rank := o.base + uint64(off) - uint64(k)
		g := &c.groups[m.group]
		j := sort.Search(len(g.ends), func(i int) bool { return g.ends[i] > rank })
		if j == len(g.ends) {
			return 0, false
		}
		start := uint64(0)
		if j > 0 {
			start = g.ends[j-1]
		}
		return RowAddress(newIDs[m.group][j]<<32 | (rank - start)), true
	}, nil
}

// oldMove is where Remap sends the rows of one rewritten fragment: with shift, every row at
// offset off to to+off; otherwise through its group's deletions and new fragments.
type oldMove struct {
	frag  *compactOld // nil: not a rewritten fragment
	group int
	shift bool
	to    uint64
}

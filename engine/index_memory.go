package engine

import (
	"cmp"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/omnigraph/omnigraph-worker/lance"
)

// What an index build or fold holds at its peak, per row it covers: the live heap measured by
// lance's BenchmarkIndexBuildPeakHeap and BenchmarkBTreeFoldPeakHeap (sampled at GOGC 5),
// rounded up. The string figures are for the bench's shapes (keys of about 10 bytes, texts of
// 4 to 19 words); longer values hold more.
const (
	// btreePeakPerRow: a BTREE build or fold over every row of its table (a fold merges the
	// old entries or appends at twice the rate per new row): 104–127 measured building 200k
	// keys, 79–104 folding a table of a million.
	btreePeakPerRow = 128
	// invertedPeakPerRow: an INVERTED build, or the partition a fold adds for the rows the
	// index misses: 297–303 measured building 200k texts.
	invertedPeakPerRow = 320
	// ivfPeakPerElement: an IVF_FLAT build, per vector element: 14.3 to 15.4 measured
	// building 20k vectors of 384 float32s (5.5 to 5.9 KB a row).
	ivfPeakPerElement = 16
)

// IndexWorkBytes is about how much memory the index work due on the main tables holds while a
// maintenance pass stages it (StageCompaction, Optimize with Indices at fold), from what this
// writer already holds (no I/O): stageConcurrency builds run at once, so the largest of them
// together. The worker reports it (omnigraph_index_work_bytes) so that operators can size for
// it; it is an estimate from measured peaks per row, not a bound.
func (g *Graph) IndexWorkBytes(fold int) int64 {
	g.writeMu.Lock()
	defer g.writeMu.Unlock()
	fold = fanoutOrDefault(fold)
	var peaks []uint64
	for ref, ts := range g.tables {
		if ref.branch != "" {
			continue
		}
		for _, s := range g.missingIndices(ref.path, ts.ds, fold) {
			peaks = append(peaks, indexPeak(ts.ds, s))
		}
	}
	slices.SortFunc(peaks, func(a, b uint64) int { return cmp.Compare(b, a) })
	var peak uint64
	for _, p := range peaks[:min(len(peaks), stageConcurrency)] {
		peak += p
	}
	return int64(min(peak, math.MaxInt64))
}

// indexPeak is what building or folding s on ds holds at its peak (the constants above).
func indexPeak(ds *lance.Dataset, s lance.IndexSpec) uint64 {
	rows := ds.CountRows()
	switch s.Kind {
	case lance.IndexInverted:
		if x := ds.Find(s); x != nil { // a fold adds a partition of the rows it misses
			if missed, _ := ds.Uncovered(x); missed > 0 {
				rows = missed
			}
		}
		return rows * invertedPeakPerRow
	case lance.IndexIVFFlat:
		elems := uint64(1)
		if f := ds.Schema().Field(s.Column); f != nil {
			if t, err := f.ArrowType(); err == nil {
				if l, ok := t.(*arrow.FixedSizeListType); ok {
					elems = uint64(l.Len())
				}
			}
		}
		return rows * elems * ivfPeakPerElement
	default:
		return rows * btreePeakPerRow
	}
}

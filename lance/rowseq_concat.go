package lance

import "github.com/omnigraph/omnigraph-worker/lance/internal/pb"

// seqConcat gathers the row ids and versions of whole fragments concatenated in order, for the
// fragment a page-copy compaction builds from them. It keeps them as runs while it can: the
// worker's appends give each fragment one range of row ids, following on from the previous
// fragment's, and one version, so sixteen fragments of 8,192 rows come to one range and sixteen
// version runs instead of three arrays of 131,072 values expanded and then scanned again to
// encode them (a third of a compaction's staging CPU, BenchmarkStageCompaction). The bytes
// encode produces are exactly encodeRowIDSequence's and encodeVersionRuns' of the expanded
// values (TestSeqConcatEncodesAsTheExpandedValues).
type seqConcat struct {
	n uint64 // rows
	// The row ids: [lo, hi) while every fragment's is one range following on from the last;
	// otherwise (expanded) ids.
	lo, hi           uint64
	expanded         bool
	ids              []uint64
	created, updated []versionRun
}

// add appends fragment f's row ids and versions, one per physical row.
func (s *seqConcat) add(f *Fragment) error {
	created, err := f.createdRuns()
	if err != nil {
		return err
	}
	updated, err := f.lastUpdatedRuns()
	if err != nil {
		return err
	}
	if lo, hi, ok := f.rowIDRange(); ok && !s.expanded && (s.n == 0 || lo == s.hi) {
		if s.n == 0 {
			s.lo = lo
		}
		s.hi = hi
	} else {
		ids, err := f.stableRowIDs()
		if err != nil {
			return err
		}
		s.expand(len(ids))
		s.ids = append(s.ids, ids...)
	}
	s.n += f.PhysicalRows
	s.created = append(s.created, created...)
	s.updated = append(s.updated, updated...)
	return nil
}

// encode is the serialized row id sequence and created-at and last-updated-at version
// sequences of the rows added.
func (s *seqConcat) encode() (rowIDs, created, updated []byte) {
	if !s.expanded && s.n >= minCluster { // one cluster of consecutive ids: encodeSortedCluster's range
		var e pb.Encoder
		e.Message(1, func(seg *pb.Encoder) { encodeRangeSegment(seg, s.lo, s.hi) })
		rowIDs = e.B
	} else {
		s.expand(0)
		rowIDs = encodeRowIDSequence(s.ids)
	}
	return rowIDs, encodeVersionRunList(s.created), encodeVersionRunList(s.updated)
}

// expand turns the ids held as the range [lo, hi) into values, with room for more; a no-op
// once expanded.
func (s *seqConcat) expand(more int) {
	if s.expanded {
		return
	}
	s.expanded = true
	s.ids = make([]uint64, 0, s.n+uint64(more))
	for id := s.lo; id < s.hi; id++ {
		s.ids = append(s.ids, id)
	}
}

// rowIDRange is the fragment's row ids when they are the one range [lo, hi) of its physical
// rows; ok=false for any other sequence (which stableRowIDs decodes, or refuses).
func (f *Fragment) rowIDRange() (lo, hi uint64, ok bool) {
	segs := 0
	var s segment
	err := pb.Walk(f.RowIDs, func(fl pb.Field) error {
		if fl.Num != 1 {
			return nil
		}
		if segs++; segs > 1 {
			return errNotOneRange
		}
		if err := fl.Want(2); err != nil {
			return err
		}
		var err error
		s, err = decodeSegment(fl.Bytes)
		return err
	})
	if err != nil || segs != 1 || s.kind != segRange || s.n != f.PhysicalRows {
		return 0, 0, false
	}
	return s.start, s.end, true
}

var errNotOneRange = malformed("more than one segment")

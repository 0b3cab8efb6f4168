package lance

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// A page-copy compaction's run-form sequences serialize to exactly the bytes the expanded
// values do, for fragments of every shape: one range following on from the previous
// fragment's, a range that does not, ids in other segment forms, empty fragments, and version
// sequences present, absent, or with runs of equal versions meeting across fragments.
func TestSeqConcatEncodesAsTheExpandedValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	fastPaths := 0
	for trial := range 2000 {
		var s seqConcat
		var ids, created, updated []uint64
		appends := trial%2 == 0 // as the worker's appends make them: ranges following on
		next := uint64(rng.IntN(1000))
		for range 1 + rng.IntN(6) {
			n := uint64(rng.IntN(40))
			if appends {
				n += minCluster // each fragment's ids a range segment
			} else if rng.IntN(3) == 0 {
				n = uint64(rng.IntN(3)) // under minCluster, or empty
			}
			f := &Fragment{ID: uint64(trial), PhysicalRows: n}
			var fids []uint64
			if !appends && rng.IntN(3) == 0 { // a range elsewhere
				next += uint64(1 + rng.IntN(300))
			}
			for i := range n {
				fids = append(fids, next+i)
			}
			if !appends && rng.IntN(3) == 0 && n > 1 { // not a range: a gap, or out of order
				fids[rng.IntN(int(n))] += 1000
			}
			next += n
			f.RowIDs = encodeRowIDSequence(fids)
			if f.RowIDs == nil {
				f.RowIDs = []byte{}
			}
			versions := func() []uint64 {
				var vs []uint64
				v := uint64(1 + rng.IntN(3))
				for range n {
					if rng.IntN(8) == 0 {
						v = uint64(1 + rng.IntN(3))
					}
					vs = append(vs, v)
				}
				return vs
			}
			if rng.IntN(5) > 0 {
				f.CreatedAt = encodeVersionRuns(versions())
			}
			if rng.IntN(5) > 0 {
				f.LastUpdatedAt = encodeVersionRuns(versions())
			}
			fi, fc, fu, err := f.rowSequences()
			if err != nil {
				t.Fatalf("trial %d: %v", trial, err)
			}
			ids, created, updated = append(ids, fi...), append(created, fc...), append(updated, fu...)
			if err := s.add(f); err != nil {
				t.Fatalf("trial %d: add: %v", trial, err)
			}
		}
		if !s.expanded && s.n >= minCluster {
			fastPaths++
		}
		gi, gc, gu := s.encode()
		for _, c := range []struct {
			what      string
			got, want []byte
		}{{"row ids", gi, encodeRowIDSequence(ids)}, {"created", gc, encodeVersionRuns(created)}, {"updated", gu, encodeVersionRuns(updated)}} {
			if !bytes.Equal(c.got, c.want) {
				t.Fatalf("trial %d: %s encode as %x, the expanded values as %x", trial, c.what, c.got, c.want)
			}
		}
	}
	if fastPaths < 500 {
		t.Fatalf("only %d of the trials kept the row ids as one range", fastPaths)
	}
}

// A fragment whose row id sequence is not what its rows need is refused, as stableRowIDs
// refuses it, not taken as a range.
func TestSeqConcatRefusesARangeOfTheWrongLength(t *testing.T) {
	f := &Fragment{ID: 3, PhysicalRows: 20, RowIDs: encodeRowIDSequence(func() []uint64 {
		var ids []uint64
		for i := range uint64(19) {
			ids = append(ids, 100+i)
		}
		return ids
	}())}
	if _, _, ok := f.rowIDRange(); ok {
		t.Fatal("a range of 19 ids taken for 20 rows")
	}
	var s seqConcat
	if err := s.add(f); err == nil {
		t.Fatal("19 row ids for 20 rows accepted")
	}
}

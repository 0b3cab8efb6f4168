package lance

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/omnigraph/omnigraph-worker/lance/internal/pb"
)

func hexBytes(t *testing.T, s string) []byte {
	t.Helper()
	var out []byte
	for i := 0; i < len(s); {
		if s[i] == ' ' {
			i++
			continue
		}
		var b byte
		if _, err := fmt.Sscanf(s[i:i+2], "%02x", &b); err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
		i += 2
	}
	return out
}

// seqOf builds a RowIdSequence from pre-encoded segment bodies.
func seqOf(segs ...func(*pb.Encoder)) []byte {
	var e pb.Encoder
	for _, s := range segs {
		e.Message(1, s)
	}
	return e.B
}

func u16Array(base uint64, offs ...uint16) func(*pb.Encoder) {
	return func(a *pb.Encoder) {
		var raw []byte
		for _, o := range offs {
			raw = binary.LittleEndian.AppendUint16(raw, o)
		}
		a.Message(1, func(x *pb.Encoder) { x.Uint(1, base); x.Bytes(2, raw) })
	}
}

func u32Array(base uint64, offs ...uint32) func(*pb.Encoder) {
	return func(a *pb.Encoder) {
		var raw []byte
		for _, o := range offs {
			raw = binary.LittleEndian.AppendUint32(raw, o)
		}
		a.Message(2, func(x *pb.Encoder) { x.Uint(1, base); x.Bytes(2, raw) })
	}
}

func u64Array(vals ...uint64) func(*pb.Encoder) {
	return func(a *pb.Encoder) {
		var raw []byte
		for _, v := range vals {
			raw = binary.LittleEndian.AppendUint64(raw, v)
		}
		a.Message(3, func(x *pb.Encoder) { x.Bytes(2, raw) })
	}
}

func rangeSeg(kind pb.Number, start, end uint64, extra func(*pb.Encoder)) func(*pb.Encoder) {
	return func(s *pb.Encoder) {
		s.Message(kind, func(r *pb.Encoder) {
			r.Uint(1, start)
			r.Uint(2, end)
			if extra != nil {
				extra(r)
			}
		})
	}
}

func arraySeg(kind pb.Number, arr func(*pb.Encoder)) func(*pb.Encoder) {
	return func(s *pb.Encoder) { s.Message(kind, arr) }
}

// Every U64Segment and EncodedU64Array variant decodes to the values lance means by it.
func TestDecodeRowIDSequenceVariants(t *testing.T) {
	// Bytes the official engine wrote (reference §3.4): 5 rows from 0; rows 5..8.
	for _, c := range []struct {
		hex  string
		want []uint64
	}{
		{"0a 04 0a 02 10 05", []uint64{0, 1, 2, 3, 4}},
		{"0a 06 0a 04 08 05 10 08", []uint64{5, 6, 7}},
	} {
		got, err := decodeRowIDSequence(hexBytes(t, c.hex), 10)
		if err != nil || !slices.Equal(got, c.want) {
			t.Fatalf("%s: %v %v", c.hex, got, err)
		}
	}
	holes := func(arr func(*pb.Encoder)) func(*pb.Encoder) {
		return func(r *pb.Encoder) { r.Message(3, arr) }
	}
	bitmap := func(b ...byte) func(*pb.Encoder) { return func(r *pb.Encoder) { r.BytesAlways(3, b) } }
	b := seqOf(
		rangeSeg(segRange, 100, 103, nil),
		rangeSeg(segRangeHoles, 10, 16, holes(u16Array(11, 0, 3))), // 10..15 without 11, 14
		rangeSeg(segRangeHoles, 1<<40, 1<<40+3, holes(u64Array(1<<40+1))),
		// bit i (least significant first) marks start+i: 0b1000_0101, 0b01 -> 20, 22, 27, 28
		rangeSeg(segRangeBitmap, 20, 30, bitmap(0x85, 0x01)),
		arraySeg(segSortedArray, u32Array(1000, 0, 70000, 1<<31)),
		arraySeg(segArray, u64Array(9, 3, 1<<50)),
		arraySeg(segArray, u16Array(7)), // empty
	)
	want := []uint64{100, 101, 102, 10, 12, 13, 15, 1 << 40, 1<<40 + 2, 20, 22, 27, 28, 1000, 71000, 1000 + 1<<31, 9, 3, 1 << 50}
	got, err := decodeRowIDSequence(b, 100)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("variants: %v, %v\nwant %v", got, err, want)
	}
	if _, err := decodeRowIDSequence(b, uint64(len(want)-1)); err == nil {
		t.Fatal("a sequence longer than the limit accepted")
	}
	// The deprecated-looking but valid empty sequence.
	if got, err := decodeRowIDSequence(nil, 0); err != nil || len(got) != 0 {
		t.Fatalf("empty: %v %v", got, err)
	}
}

func TestDecodeRowIDSequenceRefusesMalformed(t *testing.T) {
	bad := map[string][]byte{
		"no segment":          seqOf(func(*pb.Encoder) {}),
		"end before start":    seqOf(rangeSeg(segRange, 5, 4, nil)),
		"huge range":          seqOf(rangeSeg(segRange, 0, 1<<62, nil)),
		"huge range 2":        seqOf(rangeSeg(segRange, 0, 60, nil), rangeSeg(segRange, 0, 1<<64-1, nil)),
		"holes missing":       seqOf(rangeSeg(segRangeHoles, 0, 5, nil)),
		"hole outside":        seqOf(rangeSeg(segRangeHoles, 0, 5, func(r *pb.Encoder) { r.Message(3, u16Array(0, 7)) })),
		"holes unsorted":      seqOf(rangeSeg(segRangeHoles, 0, 5, func(r *pb.Encoder) { r.Message(3, u16Array(0, 3, 1)) })),
		"holes repeated":      seqOf(rangeSeg(segRangeHoles, 0, 5, func(r *pb.Encoder) { r.Message(3, u16Array(0, 1, 1)) })),
		"bitmap short":        seqOf(rangeSeg(segRangeBitmap, 0, 20, func(r *pb.Encoder) { r.BytesAlways(3, []byte{1, 2}) })),
		"bitmap long":         seqOf(rangeSeg(segRangeBitmap, 0, 8, func(r *pb.Encoder) { r.BytesAlways(3, []byte{1, 2}) })),
		"bitmap stray bit":    seqOf(rangeSeg(segRangeBitmap, 0, 4, func(r *pb.Encoder) { r.BytesAlways(3, []byte{0x10}) })),
		"array no kind":       seqOf(arraySeg(segArray, func(*pb.Encoder) {})),
		"u16 odd bytes":       seqOf(arraySeg(segArray, func(a *pb.Encoder) { a.Message(1, func(x *pb.Encoder) { x.Bytes(2, []byte{1, 2, 3}) }) })),
		"u32 odd bytes":       seqOf(arraySeg(segArray, func(a *pb.Encoder) { a.Message(2, func(x *pb.Encoder) { x.Bytes(2, []byte{1, 2, 3}) }) })),
		"u64 odd bytes":       seqOf(arraySeg(segArray, func(a *pb.Encoder) { a.Message(3, func(x *pb.Encoder) { x.Bytes(2, []byte{1}) }) })),
		"u16 base overflow":   seqOf(arraySeg(segArray, u16Array(1<<64-1, 1))),
		"segment not a msg":   {0x08, 0x01},
		"truncated":           {0x0a, 0x05, 0x0a},
		"segment kind varint": seqOf(func(s *pb.Encoder) { s.Uint(1, 3) }),
	}
	for name, b := range bad {
		if got, err := decodeRowIDSequence(b, 100); err == nil {
			t.Errorf("%s: accepted as %v", name, got)
		} else if !errors.Is(err, pb.ErrMalformed) {
			t.Errorf("%s: untyped error %v", name, err)
		}
	}
}

func TestVersionSequenceCodec(t *testing.T) {
	// 5 rows at version 1, as the official engine writes them (reference §3.4).
	got, err := decodeVersionSequence(hexBytes(t, "0a 08 0a 04 0a 02 10 05 10 01"), 5)
	if err != nil || !slices.Equal(got, []uint64{1, 1, 1, 1, 1}) {
		t.Fatalf("%v %v", got, err)
	}
	if !slices.Equal(encodeVersionSequence(5, 1), encodeVersionRuns([]uint64{1, 1, 1, 1, 1})) {
		t.Fatal("a uniform run encodes differently from the fresh-fragment sequence")
	}
	// Only a span's length counts: lance's rechunked spans hold arbitrary offsets.
	var e pb.Encoder
	run := func(span func(*pb.Encoder), v uint64) {
		e.Message(1, func(r *pb.Encoder) { r.Message(1, span); r.Uint(2, v) })
	}
	run(rangeSeg(segRange, 7, 9, nil), 3)
	run(arraySeg(segSortedArray, u16Array(100, 0, 5, 9)), 4)
	run(rangeSeg(segRange, 0, 0, nil), 9) // empty run
	run(rangeSeg(segRangeBitmap, 0, 3, func(r *pb.Encoder) { r.BytesAlways(3, []byte{0b101}) }), 2)
	got, err = decodeVersionSequence(e.B, 100)
	if err != nil || !slices.Equal(got, []uint64{3, 3, 4, 4, 4, 2, 2}) {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := decodeVersionSequence(e.B, 6); err == nil {
		t.Fatal("more rows than the limit accepted")
	}
	var noSpan pb.Encoder
	noSpan.Message(1, func(r *pb.Encoder) { r.Uint(2, 1) })
	if _, err := decodeVersionSequence(noSpan.B, 10); err == nil {
		t.Fatal("a run without span accepted")
	}
	// Round trip, and runs stay runs.
	vs := []uint64{1, 1, 4, 4, 4, 2, 9, 9}
	enc := encodeVersionRuns(vs)
	runs, err := decodeVersionRuns(enc, 8)
	if err != nil || len(runs) != 4 || !slices.Equal(expandRuns(runs), vs) {
		t.Fatalf("round trip %v %v", runs, err)
	}
	if encodeVersionRuns(nil) != nil {
		t.Fatal("no rows should encode as nothing")
	}
}

// Sequences of the shapes compaction produces (ranges with deleted rows, updated rows moved
// to the end, ids from far apart, unsorted runs) encode compactly and decode to themselves.
func TestRowIDSequenceRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	rangeMinus := func(lo, hi uint64, keep func(uint64) bool) []uint64 {
		var out []uint64
		for v := lo; v < hi; v++ {
			if keep(v) {
				out = append(out, v)
			}
		}
		return out
	}
	cases := map[string][]uint64{
		"range":       rangeMinus(0, 5000, func(uint64) bool { return true }),
		"few holes":   rangeMinus(10, 5000, func(v uint64) bool { return v%500 != 7 }),
		"many holes":  rangeMinus(0, 5000, func(v uint64) bool { return v%3 != 0 }),
		"sparse":      rangeMinus(0, 500000, func(v uint64) bool { return v%1000 == 0 }),
		"random":      rangeMinus(0, 3000, func(uint64) bool { return rng.IntN(2) == 0 }),
		"moved":       append(rangeMinus(0, 1000, func(v uint64) bool { return v%100 != 5 }), 5, 105, 205, 1000, 1001, 1002),
		"far apart":   append(rangeMinus(0, 100, func(uint64) bool { return true }), rangeMinus(1<<40, 1<<40+100, func(uint64) bool { return true })...),
		"descending":  {9, 8, 7, 6, 5, 4, 3, 2, 1, 0},
		"single":      {42},
		"huge values": {1<<64 - 1, 0, 1 << 63},
	}
	for i := 0; i < 20; i++ {
		var ids []uint64
		for len(ids) < 300 {
			start, n := rng.Uint64N(1<<20), rng.IntN(40)
			for k := 0; k < n; k++ {
				if rng.IntN(10) > 0 {
					ids = append(ids, start+uint64(k))
				}
			}
		}
		cases[fmt.Sprint("mixed", i)] = ids
	}
	for name, ids := range cases {
		enc := encodeRowIDSequence(ids)
		got, err := decodeRowIDSequence(enc, uint64(len(ids)))
		if err != nil || !slices.Equal(got, ids) {
			t.Fatalf("%s: %v (%d ids, %d back)", name, err, len(ids), len(got))
		}
		if len(enc) > 10*len(ids)+32 {
			t.Errorf("%s: %d ids take %d bytes", name, len(ids), len(enc))
		}
	}
	// Compactness of the common shapes.
	for name, limit := range map[string]int{"range": 12, "few holes": 64, "many holes": 700, "sparse": 2100, "far apart": 40} {
		if n := len(encodeRowIDSequence(cases[name])); n > limit {
			t.Errorf("%s: %d bytes, want at most %d", name, n, limit)
		}
	}
	// Truncations never panic.
	enc := encodeRowIDSequence(cases["moved"])
	for n := range enc {
		_, _ = decodeRowIDSequence(enc[:n], 10000)
	}
}

func FuzzRowIDSequence(f *testing.F) {
	f.Add(encodeRangeSequence(0, 5), uint16(5))
	f.Add(encodeRowIDSequence([]uint64{1, 2, 3, 7, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 50, 4}), uint16(100))
	ids := make([]uint64, 0, 200)
	for v := uint64(1000); v < 1300; v++ {
		if v%3 != 0 {
			ids = append(ids, v)
		}
	}
	f.Add(encodeRowIDSequence(ids), uint16(300))
	f.Add(seqOf(rangeSeg(segRangeHoles, 10, 16, func(r *pb.Encoder) { r.Message(3, u32Array(11, 0, 3)) })), uint16(10))
	f.Add(seqOf(rangeSeg(segRangeBitmap, 20, 30, func(r *pb.Encoder) { r.BytesAlways(3, []byte{0x85, 1}) })), uint16(10))
	f.Add(seqOf(arraySeg(segArray, u64Array(5, 1, 1<<60))), uint16(3))
	f.Fuzz(func(t *testing.T, b []byte, limit uint16) {
		ids, err := decodeRowIDSequence(b, uint64(limit))
		if err != nil {
			if !errors.Is(err, pb.ErrMalformed) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if len(ids) > int(limit) {
			t.Fatalf("%d ids past the limit %d", len(ids), limit)
		}
		again, err := decodeRowIDSequence(encodeRowIDSequence(ids), uint64(len(ids)))
		if err != nil || !slices.Equal(again, ids) {
			t.Fatalf("re-encoded sequence differs: %v", err)
		}
	})
}

func FuzzVersionSequence(f *testing.F) {
	f.Add(encodeVersionSequence(5, 1), uint16(5))
	f.Add(encodeVersionRuns([]uint64{1, 1, 3, 3, 3, 2, 7}), uint16(7))
	var e pb.Encoder
	e.Message(1, func(r *pb.Encoder) {
		r.Message(1, arraySeg(segSortedArray, u16Array(100, 0, 5, 9)))
		r.Uint(2, 4)
	})
	f.Add(e.B, uint16(10))
	f.Fuzz(func(t *testing.T, b []byte, limit uint16) {
		runs, err := decodeVersionRuns(b, uint64(limit))
		if err != nil {
			if !errors.Is(err, pb.ErrMalformed) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		vs := expandRuns(runs)
		if len(vs) > int(limit) {
			t.Fatalf("%d rows past the limit %d", len(vs), limit)
		}
		again, err := decodeVersionSequence(encodeVersionRuns(vs), uint64(len(vs)))
		if err != nil || !slices.Equal(again, vs) {
			t.Fatalf("re-encoded sequence differs: %v", err)
		}
	})
}

func TestRewriteTransactionCodec(t *testing.T) {
	frag := func(id uint64, rows uint64) Fragment {
		return Fragment{ID: id, PhysicalRows: rows, Files: []DataFile{{Path: fmt.Sprintf("f%d.lance", id), Fields: []int32{0, 1}, ColumnIndices: []int32{0, 1}, FileMajor: 2}},
			RowIDs: encodeRangeSequence(id*10, id*10+rows)}
	}
	tx := &Transaction{ReadVersion: 7, UUID: "u", Op: Operation{Kind: OpRewrite, Groups: []RewriteGroup{
		{OldFragments: []Fragment{frag(1, 2), frag(2, 3)}, NewFragments: []Fragment{frag(0, 5)}},
		{OldFragments: []Fragment{frag(5, 1)}, NewFragments: []Fragment{frag(0, 1)}},
	}}}
	back, err := DecodeTransaction(encodeTransaction(tx))
	if err != nil || back.Op.Kind != OpRewrite || len(back.Op.Groups) != 2 {
		t.Fatalf("%+v %v", back, err)
	}
	if fmt.Sprint(back.Op.Groups) != fmt.Sprint(tx.Op.Groups) {
		t.Fatalf("groups %v\nwant %v", back.Op.Groups, tx.Op.Groups)
	}
	// The deprecated form: old_fragments=1, new_fragments=2 directly in Rewrite, one group.
	var body pb.Encoder
	encodeFragments(&body, 1, []Fragment{frag(1, 2)})
	encodeFragments(&body, 2, []Fragment{frag(0, 2)})
	var e pb.Encoder
	e.Uint(1, 3)
	e.String(2, "x")
	e.BytesAlways(pb.Number(OpRewrite), body.B)
	old, err := DecodeTransaction(e.B)
	if err != nil || len(old.Op.Groups) != 1 || old.Op.Groups[0].OldFragments[0].ID != 1 || old.Op.Groups[0].NewFragments[0].PhysicalRows != 2 {
		t.Fatalf("deprecated form: %+v %v", old, err)
	}
}

// rewriteFragments splices contiguous groups in place, moves non-contiguous ones to the end,
// keeps pre-assigned ids, and buildManifest reports every untouched fragment as carried.
func TestRewriteApply(t *testing.T) {
	mk := func(ids ...uint64) []Fragment {
		var out []Fragment
		for _, id := range ids {
			out = append(out, Fragment{ID: id, PhysicalRows: 1, RowIDs: encodeRangeSequence(id, id+1), Files: []DataFile{{Path: fmt.Sprint(id), FileMajor: 2}}})
		}
		return out
	}
	mx := uint32(9)
	d := &Dataset{dir: memStore(t), manifest: &Manifest{Version: 4, Fragments: mk(2, 3, 5, 7, 9), MaxFragmentID: &mx, ReaderFlags: FlagStableRowIDs, Schema: testSchema(t),
		DataFormat: DataFormat, DataVersion: "2.0"}}
	txn := &Transaction{ReadVersion: 4, Op: Operation{Kind: OpRewrite, Groups: []RewriteGroup{
		{OldFragments: mk(3, 5), NewFragments: mk(0, 0)}, // contiguous: in place, ids 10, 11
		{OldFragments: mk(2, 9), NewFragments: mk(20)},   // not contiguous: appended, id kept
	}}}
	m, carried, err := d.buildManifest(t.Context(), txn)
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for _, f := range m.Fragments {
		ids = append(ids, f.ID)
	}
	if fmt.Sprint(ids) != "[10 11 7 20]" || *m.MaxFragmentID != 20 || fmt.Sprint(carried) != "[-1 -1 3 -1]" {
		t.Fatalf("fragments %v, max %d, carried %v", ids, *m.MaxFragmentID, carried)
	}
	bad := []struct {
		name   string
		groups []RewriteGroup
	}{
		{"missing fragment", []RewriteGroup{{OldFragments: mk(4), NewFragments: mk(0)}}},
		{"empty group", []RewriteGroup{{NewFragments: mk(0)}}},
		{"no row ids", []RewriteGroup{{OldFragments: mk(3), NewFragments: []Fragment{{PhysicalRows: 1}}}}},
		{"duplicate id", []RewriteGroup{{OldFragments: mk(3), NewFragments: mk(7)}}},
	}
	for _, b := range bad {
		if _, _, err := d.buildManifest(t.Context(), &Transaction{Op: Operation{Kind: OpRewrite, Groups: b.groups}}); err == nil {
			t.Errorf("%s: accepted", b.name)
		}
	}
}

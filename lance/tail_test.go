package lance

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
)

// TailRun names the newest fragments a fragment of the given rows would complete into a tier
// of fanout, and nothing before it does; StageRewriteRowsMerging then writes one fragment: the
// live rows of the tier (less the ones it removes there) followed by the new rows, deletes the
// removed rows elsewhere, and says which rows precede the new ones.
func TestPublishMergesTheTierItCompletes(t *testing.T) {
	ctx := context.Background()
	const fanout = 4
	d, err := Create(ctx, memStore(t), testSchema(t), rows(seq(0, 100)...), CreateOptions{}) // tier 1 at fanout 4: not in the run
	if err != nil {
		t.Fatal(err)
	}
	for lo := int64(100); lo < 106; lo += 2 {
		if got := d.TailRun(fanout, 2); got != nil {
			t.Fatalf("with %d small fragments TailRun names %v", d.NumFragments()-1, got)
		}
		s, err := d.StageAppend(ctx, rows(lo, lo+1), StageOptions{})
		d = commit(t, d, s, err)
	}
	run := d.TailRun(fanout, 2)
	frags := d.Manifest().Fragments
	if want := []uint64{frags[1].ID, frags[2].ID, frags[3].ID}; !slices.Equal(run, want) {
		t.Fatalf("TailRun names %v, want the three small fragments %v", run, want)
	}
	if d.TailRun(fanout, 50) != nil {
		t.Fatal("a fragment of another tier completes nothing")
	}
	// Remove a row of the run (102, offset 0 of the second small fragment) and one outside it (7).
	remove := []RowAddress{RowAddress(frags[2].ID << 32), RowAddress(frags[0].ID<<32 | 7)}
	s, tail, err := d.StageRewriteRowsMerging(ctx, remove, rows(200, 201), run, StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var before []int64
	for _, r := range tail {
		before = append(before, r.Column(0).(*array.Int64).Int64Values()...)
		r.Release()
	}
	if want := []int64{100, 101, 103, 104, 105}; !slices.Equal(before, want) {
		t.Fatalf("the rows ahead of the new ones: %v, want %v", before, want)
	}
	prev := d.Manifest()
	d = commit(t, d, s, nil)
	if n := d.NumFragments(); n != 2 {
		t.Fatalf("%d fragments after the merging commit, want the big one and the merged one", n)
	}
	added := d.AddedFragments(prev)
	if len(added) != 1 || added[0].PhysicalRows != 7 {
		t.Fatalf("added %+v, want one fragment of the 5 merged rows and the 2 new", added)
	}
	want := slices.DeleteFunc(seq(0, 100), func(id int64) bool { return id == 7 })
	want = append(want, 100, 101, 103, 104, 105, 200, 201)
	if got := scanIDs(t, d); !slices.Equal(got, want) {
		t.Fatalf("scan %v, want %v", got, want)
	}

	for _, c := range []struct {
		name   string
		remove []RowAddress
		merge  []uint64
		want   string
	}{
		{"a fragment the version lacks", nil, []uint64{99}, "does not have"},
		{"an address past a merged fragment", []RowAddress{RowAddress(added[0].ID<<32 | 7)}, []uint64{added[0].ID}, "past fragment"},
	} {
		if _, _, err := d.StageRewriteRowsMerging(ctx, c.remove, rows(300), c.merge, StageOptions{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// SmallTailHolding names the shortest run of the newest fragments of the smallest tier that
// holds every row to remove, and nothing when a row lies in a larger fragment or there is none.
func TestSmallTailHolding(t *testing.T) {
	ctx := context.Background()
	const fanout = 4
	d, err := Create(ctx, memStore(t), testSchema(t), rows(seq(0, 100)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for lo := int64(100); lo < 106; lo += 2 {
		s, err := d.StageAppend(ctx, rows(lo, lo+1), StageOptions{})
		d = commit(t, d, s, err)
	}
	f := d.Manifest().Fragments
	at := func(i int, off uint32) RowAddress { return RowAddress(f[i].ID<<32 | uint64(off)) }
	for _, c := range []struct {
		name   string
		remove []RowAddress
		want   []uint64
	}{
		{"nothing to remove", nil, nil},
		{"a row of the newest", []RowAddress{at(3, 1)}, []uint64{f[3].ID}},
		{"rows of the last two", []RowAddress{at(3, 0), at(2, 1)}, []uint64{f[2].ID, f[3].ID}},
		{"a row of the oldest small one", []RowAddress{at(1, 0)}, []uint64{f[1].ID, f[2].ID, f[3].ID}},
		{"a row of the big one", []RowAddress{at(3, 0), at(0, 5)}, nil},
	} {
		if got := d.SmallTailHolding(c.remove, fanout); !slices.Equal(got, c.want) {
			t.Fatalf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

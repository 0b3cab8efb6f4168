package lance

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/omnigraph/omnigraph-worker/internal/parallel"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// An index build staged side by side (StageOptions.Slots) is the build staged in turn: the
// same indices, in the order of the specs, with the same files byte for byte (only the uuid
// in their paths differs), for builds and folds alike.
func TestStageIndicesSideBySideEqualsInTurn(t *testing.T) {
	ctx := context.Background()
	d, err := Create(ctx, memStore(t), testSchema(t), rows(seq(0, 6000)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	specs := []IndexSpec{{Column: "id", Kind: IndexBTree}, {Column: "name", Kind: IndexInverted}, {Column: "name", Kind: IndexBTree}}
	same := func(what string, d *Dataset) *Staged {
		t.Helper()
		// Both stagings start from the same page-data cache and BTREE ends: a fold forgets
		// its index's.
		cached := map[[16]byte]arrow.Record{}
		ends := map[[16]byte]*btreeEnd{}
		for _, x := range d.Indices() {
			if rec := btreeCache.get(x.UUID); rec != nil {
				cached[x.UUID] = rec
				defer rec.Release()
			}
			if e := btreeEnds.get(x.UUID); e != nil {
				ends[x.UUID] = e
			}
		}
		inTurn, err := d.StageIndices(ctx, specs, StageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for uuid, rec := range cached {
			btreeCache.put(uuid, rec)
		}
		for uuid, e := range ends {
			btreeEnds.put(uuid, e)
		}
		sideBySide, err := d.StageIndices(ctx, specs, StageOptions{Slots: parallel.NewSlots(2)})
		if err != nil {
			t.Fatal(err)
		}
		a, b := inTurn.Txn.Op.NewIndices, sideBySide.Txn.Op.NewIndices
		if len(a) != len(specs) || len(b) != len(a) {
			t.Fatalf("%s: %d and %d indices for %d specs", what, len(a), len(b), len(specs))
		}
		for i := range a {
			if a[i].Name != b[i].Name || !slices.Equal(a[i].Fields, b[i].Fields) || !slices.Equal(a[i].Fragments, b[i].Fragments) {
				t.Fatalf("%s: index %d is %s %v %v in turn, %s %v %v side by side", what, i,
					a[i].Name, a[i].Fields, a[i].Fragments, b[i].Name, b[i].Fields, b[i].Fragments)
			}
		}
		if len(inTurn.files) != len(sideBySide.files) || len(inTurn.files) == 0 {
			t.Fatalf("%s: %d and %d files", what, len(inTurn.files), len(sideBySide.files))
		}
		for i, f := range inTurn.files {
			g := sideBySide.files[i]
			base := func(key string) string { return key[strings.LastIndex(key, "/")+1:] }
			if base(f.key) != base(g.key) || !bytes.Equal(f.data, g.data) || !sameParts(f.parts, g.parts) {
				t.Fatalf("%s: file %d is %s (%d bytes, %d parts) in turn, %s (%d bytes, %d parts) side by side",
					what, i, f.key, len(f.data), len(f.parts), g.key, len(g.data), len(g.parts))
			}
		}
		return inTurn
	}
	s := same("build", d)
	d = commit(t, d, s, nil)
	s, err = d.StageAppend(ctx, rows(seq(6000, 9000)...), StageOptions{})
	d = commit(t, d, s, err)
	same("fold", d)
}

// sameParts says two files composed of parts are made alike: the same bytes and ranges.
func sameParts(a, b []storage.Part) bool {
	return slices.EqualFunc(a, b, func(p, q storage.Part) bool {
		return bytes.Equal(p.Data, q.Data) && p.Key == q.Key && p.Offset == q.Offset && p.Length == q.Length
	})
}

package lance

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/omnigraph/omnigraph-worker/storage"
)

// The folds of one StageIndices call read the rows their indices lack in one scan: folding
// three indices of a table makes no more requests of its data files than folding one, and the
// folded indices answer as a scan does.
func TestFoldsOfATableShareOneReadOfTheNewRows(t *testing.T) {
	withoutWrittenCache(t) // the test counts the reads storage serves
	ctx := context.Background()
	l := storage.NewLatency(0)
	var mu sync.Mutex
	dataReads := 0
	l.Trace(func(r storage.Request) {
		if strings.Contains(r.Location, "/data/") && strings.HasPrefix(r.Op, "get") {
			mu.Lock()
			dataReads++
			mu.Unlock()
		}
	})
	st, err := storage.Open(ctx, t.TempDir(), storage.WithLatency(l))
	if err != nil {
		t.Fatal(err)
	}
	d, err := Create(ctx, st, testSchema(t), rows(seq(0, 3000)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	all := []IndexSpec{{Column: "id", Kind: IndexBTree}, {Column: "name", Kind: IndexBTree}, {Column: "name", Kind: IndexInverted}}
	s, err := d.StageIndices(ctx, all, StageOptions{})
	d = commit(t, d, s, err)
	for _, lo := range []int64{3000, 4000, 5000} {
		s, err = d.StageAppend(ctx, rows(seq(lo, lo+1000)...), StageOptions{})
		d = commit(t, d, s, err)
	}
	s, err = d.StageDelete(ctx, In("id", int64(3501)), StageOptions{})
	d = commit(t, d, s, err)

	readsOf := func(specs []IndexSpec) (int, *Staged) {
		t.Helper()
		mu.Lock()
		before := dataReads
		mu.Unlock()
		s, err := d.StageIndices(ctx, specs, StageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return dataReads - before, s
	}
	one, _ := readsOf(all[:1])
	three, s := readsOf(all)
	if one == 0 || three != one {
		t.Fatalf("folding one index read the new data files %d times, folding three %d times: want the same, above 0", one, three)
	}
	d = commit(t, d, s, err)
	for _, x := range d.Indices() {
		if rows, _ := d.Uncovered(&x); rows != 0 {
			t.Fatalf("%s leaves %d rows uncovered", x.Name, rows)
		}
	}
	for _, r := range []BTreeRange{Equal(int64(3501)), Equal(int64(4999)), {Lo: int64(2990), Hi: int64(3010)}, {Lo: int64(5990)}} {
		if got, want := mustSearch(t, d, "id", r), scanRange(t, d, "id", r); !slices.Equal(got, want) {
			t.Fatalf("id %+v: index %v, scan %v", r, got, want)
		}
	}
	for _, r := range []BTreeRange{Equal("n3501"), Equal("n4501"), {Lo: "n599", Hi: "n6"}} {
		if got, want := mustSearch(t, d, "name", r), scanRange(t, d, "name", r); !slices.Equal(got, want) {
			t.Fatalf("name %+v: index %v, scan %v", r, got, want)
		}
	}
	for _, id := range []int64{11, 3500, 3501, 4501, 5999} {
		want := []int64{id}
		if id == 3500 || id == 3501 {
			want = nil // null, deleted
		}
		if got := matching(t, d, d.Inverted("name"), fmt.Sprintf("n%d", id)); !slices.Equal(got, want) {
			t.Fatalf("full-text n%d: %v, want %v", id, got, want)
		}
	}
}

package lance

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/storage"
)

// A scan opens fragments ahead of the one it reads, each fragment's data file and deletion file
// side by side: on an object store a scan of many small fragments (a compaction, an index
// build) waits for a round trip per scanAhead fragments rather than one or two per fragment.
// The delay only makes concurrent requests overlap for certain; the count is of requests.
func TestScanOpensFragmentsAhead(t *testing.T) {
	withoutWrittenCache(t) // the test counts the reads storage serves
	ctx := context.Background()
	st := memStore(t)
	const frags = 2 * scanAhead
	d, err := Create(ctx, st, testSchema(t), rows(seq(0, 10)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i < frags; i++ {
		s, err := d.StageAppend(ctx, rows(seq(10*i, 10*i+10)...), StageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d, err = d.Commit(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// Every other fragment loses a row: half the fragments have a deletion file to read.
	var remove []RowAddress
	for _, f := range d.Manifest().Fragments {
		if f.ID%2 == 0 {
			remove = append(remove, RowAddress(f.ID<<32|3))
		}
	}
	s, err := d.StageRewriteRows(ctx, remove, nil, StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d, err = d.Commit(ctx, s); err != nil {
		t.Fatal(err)
	}
	if n := len(d.Manifest().Fragments); n != frags {
		t.Fatalf("%d fragments, want %d", n, frags)
	}
	// The count is by time (storage.Latency): a scan whose goroutine was not scheduled for a
	// whole delay would show a round trip more than it waits for. 100 ms leaves a loaded
	// race-detector run room; the engine's round-trip tests were beaten at 25 and 50.
	l := storage.NewLatency(100 * time.Millisecond)
	slow, err := storage.Open(ctx, st.URI(), storage.WithLatency(l))
	if err != nil {
		t.Fatal(err)
	}
	dl, err := Open(ctx, slow)
	if err != nil {
		t.Fatal(err)
	}
	rt0 := l.RoundTrips()
	got := scanIDs(t, dl)
	if rt, want := l.RoundTrips()-rt0, int64(frags/scanAhead); rt > want {
		t.Fatalf("a scan of %d fragments waited for %d sequential round trips, want at most %d", frags, rt, want)
	}
	var want []int64
	for id := int64(0); id < 10*frags; id++ {
		if !(id/10%2 == 0 && id%10 == 3) {
			want = append(want, id)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("scan read %v, want %v", got, want)
	}
}

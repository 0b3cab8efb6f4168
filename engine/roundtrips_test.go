package engine

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/internal/benchdata"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// loadRoundTrips is the most sequential storage round trips a load of a warm graph (its tables
// and manifest cached) waits for: heal listing; manifest probe; the tables' probes; the
// revalidation (barrier, manifest, tables at once); the sidecar beside the data files; the
// table commits; the confirmation beside the publish's files; the publish; the retirement.
const loadRoundTrips = 9

var latencySeq atomic.Int64

// On an object store every sequential request costs a round trip: a load's independent
// requests go out together, so it waits for loadRoundTrips of them however many tables it
// writes. The delay only makes concurrent requests overlap for certain; the count is of
// requests, not of time.
func TestLoadRoundTrips(t *testing.T) {
	ctx := context.Background()
	l := storage.NewLatency(25 * time.Millisecond)
	root, err := storage.Open(ctx, fmt.Sprintf("mem://load-round-trips-%d", latencySeq.Add(1)), storage.WithLatency(l))
	if err != nil {
		t.Fatal(err)
	}
	g, err := Init(ctx, root, benchdata.Schema)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		var trace []string
		l.Trace(func(r storage.Request) { trace = append(trace, fmt.Sprintf("%d %s %s", r.Depth, r.Op, r.Location)) })
		rt0 := l.RoundTrips()
		if _, err := g.Load(ctx, LoadRequest{Mode: ModeAppend, Records: benchdata.GraphBatch(i, 100)}); err != nil {
			t.Fatal(err)
		}
		if rt := l.RoundTrips() - rt0; i > 0 && rt > loadRoundTrips {
			t.Fatalf("load %d waited for %d sequential round trips, want at most %d:\n%s", i, rt, loadRoundTrips, strings.Join(trace, "\n"))
		}
	}
}

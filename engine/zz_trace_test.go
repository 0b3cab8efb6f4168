package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/internal/benchdata"
	"github.com/omnigraph/omnigraph-worker/storage"
)

func TestZZTraceLoad(t *testing.T) {
	ctx := context.Background()
	l := storage.NewLatency(5 * time.Millisecond)
	root, err := storage.Open(ctx, "mem://zztrace", storage.WithLatency(l))
	if err != nil {
		t.Fatal(err)
	}
	g, err := Init(ctx, root, benchdata.Schema)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		var log []storage.Request
		if i == 3 {
			l.Trace(func(r storage.Request) { log = append(log, r) })
		}
		w0 := l.Waves(); d0 := l.RoundTrips()
		if _, err := g.Load(ctx, LoadRequest{Mode: ModeAppend, Records: benchdata.GraphBatch(i, 4096)}); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("load %d: waves %d rt %d\n", i, l.Waves()-w0, l.RoundTrips()-d0)
		for _, r := range log {
			fmt.Printf("  %d %s %s\n", r.Depth-d0, r.Op, r.Location)
		}
	}
}

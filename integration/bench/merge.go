package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/framing"
)

// people builds n new Person records keyed from offset.
func personRecords(offset, n int) []framing.Record {
	var b strings.Builder
	for i := offset; i < offset+n; i++ {
		fmt.Fprintf(&b, `{"type":"Person","data":{"handle":"m%d","name":"name-%d","age":%d,"score":%g}}`+"\n", i, i, i%90, float64(i)*0.5)
	}
	recs, err := framing.ParseBytes([]byte(b.String()), framing.DefaultLimits())
	if err != nil {
		panic(err)
	}
	return recs
}

// mergeOnce builds a graph whose branch "s" holds rows all-new Person rows (strict-insert
// loads of at most 8,192 rows, as a pipeline writes them) and times merging it into main.
func mergeOnce(ctx context.Context, dir string, rows int, noProof bool) (float64, string, error) {
	g, err := newBenchGraph(ctx, dir)
	if err != nil {
		return 0, "", err
	}
	if _, err := g.Load(ctx, engine.LoadRequest{Mode: engine.ModeAppend, Records: personRecords(-1, 1)}); err != nil {
		return 0, "", err
	}
	for off := 0; off < rows; off += engine.MergeChunkRows {
		n := min(engine.MergeChunkRows, rows-off)
		if _, err := g.Load(ctx, engine.LoadRequest{Branch: "s", From: "main", Mode: engine.ModeAppend, Records: personRecords(off, n)}); err != nil {
			return 0, "", err
		}
	}
	t0 := time.Now()
	res, err := g.Merge(ctx, engine.MergeRequest{Source: "s", Target: "main", NoCertifiedRoute: noProof})
	if err != nil {
		return 0, "", err
	}
	took := ms(time.Since(t0))
	route := ""
	for _, t := range res.Tables {
		if t.TableKey == "node:Person" {
			route = t.Route
			if t.Inserted != rows {
				return 0, "", fmt.Errorf("merged %d rows, want %d", t.Inserted, rows)
			}
		}
	}
	return took, route, nil
}

// mergeBench: merging 10,000 and 100,000 all-new rows from a branch into main, by the certified
// route and by the ordinary diff, against one official-Lance append of the same number of rows
// in the same run.
func mergeBench(ctx context.Context, script, tmp string) error {
	const iters = 3
	for _, rows := range []int{10_000, 100_000} {
		node, err := nodeRun(ctx, script, filepath.Join(tmp, fmt.Sprintf("node-merge-%d", rows)), rows, iters)
		if err != nil {
			return err
		}
		for _, noProof := range []bool{false, true} {
			var times []float64
			route := ""
			for i := 0; i < iters; i++ {
				t, r, err := mergeOnce(ctx, filepath.Join(tmp, fmt.Sprintf("merge-%d-%v-%d", rows, noProof, i)), rows, noProof)
				if err != nil {
					return err
				}
				times, route = append(times, t), r
			}
			fmt.Printf("bench: merge-%dk durability=%s route=%s go_p50_ms=%.1f lance_append_p50_ms=%.1f ratio=%.2f peak_rss_mib=%.0f\n",
				rows/1000, durability, route, median(times), node.AppendP50, median(times)/node.AppendP50, peakRSSMiB())
		}
	}
	return nil
}

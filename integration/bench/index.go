package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/omnigraph/omnigraph-worker/lance"
)

// indexBench prints, for 10k and 100k rows, the median time of a BTREE build on the id column
// of the bench table by the Go package and by the official engine's createIndex (compat.mjs
// bench-index), each build replacing the last:
//
//	bench: index-build kind=btree rows=N go_ms=… official_ms=… ratio=…  (goal ≤ 1.0)
func indexBench(ctx context.Context, script, tmp string, iters int) error {
	for _, rows := range []int{10_000, 100_000} {
		goMs, err := goIndexBuild(ctx, filepath.Join(tmp, fmt.Sprintf("go-index-%d", rows)), rows, iters)
		if err != nil {
			return err
		}
		out, err := exec.CommandContext(ctx, "node", script, "bench-index", filepath.Join(tmp, fmt.Sprintf("node-index-%d", rows)),
			"--rows", fmt.Sprint(rows), "--iters", fmt.Sprint(iters)).Output()
		if err != nil {
			return fmt.Errorf("node bench-index: %v", err)
		}
		var r struct {
			P50 float64 `json:"btree_p50_ms"`
		}
		if err := json.Unmarshal(out, &r); err != nil {
			return fmt.Errorf("node bench-index: %v: %s", err, out)
		}
		fmt.Printf("bench: index-build kind=btree rows=%d go_ms=%.1f official_ms=%.1f ratio=%.2f\n", rows, goMs, r.P50, goMs/r.P50)
	}
	return nil
}

// goIndexBuild creates the bench table of rows rows and times iters BTREE builds (stage and
// commit) on its id column; the median in milliseconds.
func goIndexBuild(ctx context.Context, dir string, rows, iters int) (float64, error) {
	st, d, err := createPeople(ctx, dir, rows)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	var times []float64
	for k := 0; k < iters; k++ {
		t0 := time.Now()
		staged, err := d.StageBTreeIndex(ctx, "id", lance.IndexOptions{})
		if err != nil {
			return 0, err
		}
		if d, err = d.Commit(ctx, staged); err != nil {
			return 0, err
		}
		times = append(times, ms(time.Since(t0)))
	}
	return median(times), nil
}

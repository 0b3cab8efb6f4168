package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/internal/benchdata"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// mergeSample is what one merge child process reports.
type mergeSample struct {
	Ms      float64 `json:"ms"`
	Route   string  `json:"route"`
	PeakRSS float64 `json:"peak_rss_mib"`
}

// runMergeChild is the merge bench's child process. "setup" builds a graph whose branch "s"
// holds rows all-new Person rows (strict-insert loads of at most 8,192 rows, as a pipeline
// writes them); "run" opens that graph in a fresh process, reads both branches' manifests (as
// a running worker has), then times merging s into main and reports the time and the
// process's peak RSS, so the figure is the merge's own.
func runMergeChild(ctx context.Context, step, dir string, rows int, noProof bool) error {
	if step == "setup" {
		g, err := newBenchGraph(ctx, dir)
		if err != nil {
			return err
		}
		if _, err := g.Load(ctx, engine.LoadRequest{Mode: engine.ModeAppend, Records: benchdata.People(-1, 1)}); err != nil {
			return err
		}
		for off := 0; off < rows; off += engine.MergeChunkRows {
			n := min(engine.MergeChunkRows, rows-off)
			if _, err := g.Load(ctx, engine.LoadRequest{Branch: "s", From: "main", Mode: engine.ModeAppend, Records: benchdata.People(off, n)}); err != nil {
				return err
			}
		}
		return nil
	}
	root, err := storage.Open(ctx, dir, storage.WithLocalFsync(localFsync))
	if err != nil {
		return err
	}
	g, err := engine.Open(ctx, root)
	if err != nil {
		return err
	}
	// A running worker has both branches' manifest state folded already; the official side
	// likewise appends through an open table handle.
	for _, b := range []string{"main", "s"} {
		if _, err := g.Snapshot(ctx, b); err != nil {
			return err
		}
	}
	t0 := time.Now()
	res, err := g.Merge(ctx, engine.MergeRequest{Source: "s", Target: "main", NoCertifiedRoute: noProof})
	if err != nil {
		return err
	}
	out := mergeSample{Ms: ms(time.Since(t0)), PeakRSS: peakRSSMiB()}
	for _, t := range res.Tables {
		if t.TableKey == "node:Person" {
			out.Route = t.Route
			if t.Inserted != rows {
				return fmt.Errorf("merged %d rows, want %d", t.Inserted, rows)
			}
		}
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// childProcess runs this binary again with args (after the file version and durability of this
// one) and returns what it printed on stdout; its stderr passes through.
func childProcess(ctx context.Context, args ...string) ([]byte, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	fsync := map[bool]string{true: "on", false: "off"}[localFsync]
	cmd := exec.CommandContext(ctx, self, append([]string{"-lance-version", fileVersion.String(), "-fsync", fsync}, args...)...)
	cmd.Stderr = os.Stderr
	cmd.Env = os.Environ()
	return cmd.Output()
}

// mergeBench: merging 10,000 and 100,000 all-new rows from a branch into main, by the certified
// route and by the ordinary diff, in rounds alternating with one official-Lance append of the
// same number of rows; each merge runs in a fresh child process for its peak RSS.
func mergeBench(ctx context.Context, script, tmp string) error {
	for _, rows := range []int{10_000, 100_000} {
		var nodeP50, nodeRSS []float64
		samples := map[bool][]mergeSample{}
		for r := 0; r < benchRounds; r++ {
			for _, noProof := range []bool{false, true} {
				dir := filepath.Join(tmp, fmt.Sprintf("merge-%d-%v-%d", rows, noProof, r))
				if _, err := childProcess(ctx, "-merge-child", "setup", "-merge-dir", dir, "-merge-rows", fmt.Sprint(rows)); err != nil {
					return err
				}
				out, err := childProcess(ctx, "-merge-child", "run", "-merge-dir", dir, "-merge-rows", fmt.Sprint(rows), fmt.Sprintf("-merge-no-proof=%v", noProof))
				if err != nil {
					return err
				}
				var s mergeSample
				if err := json.Unmarshal(out, &s); err != nil {
					return fmt.Errorf("merge child output %q: %w", out, err)
				}
				samples[noProof] = append(samples[noProof], s)
				_ = os.RemoveAll(dir)
			}
			node, err := nodeRun(ctx, script, filepath.Join(tmp, fmt.Sprintf("node-merge-%d-%d", rows, r)), rows, 3)
			if err != nil {
				return err
			}
			nodeP50, nodeRSS = append(nodeP50, node.AppendP50), append(nodeRSS, node.PeakRSS)
		}
		for _, noProof := range []bool{false, true} {
			var t, rss []float64
			for _, s := range samples[noProof] {
				t, rss = append(t, s.Ms), append(rss, s.PeakRSS)
			}
			fmt.Printf("bench: merge-%dk durability=%s route=%s go_p50_ms=%.1f lance_append_p50_ms=%.1f ratio=%.2f go_peak_rss_mib=%.0f lance_peak_rss_mib=%.0f\n",
				rows/1000, durability, samples[noProof][0].Route, median(t), median(nodeP50), median(t)/median(nodeP50), median(rss), median(nodeRSS))
		}
	}
	return nil
}

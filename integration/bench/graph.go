package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/internal/benchdata"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// newBenchGraph makes a graph the way the worker's run command holds one: a local root that
// keeps spare files.
func newBenchGraph(ctx context.Context, dir string) (*engine.Graph, error) {
	root, err := storage.Open(ctx, dir, storage.WithLocalFsync(localFsync))
	if err != nil {
		return nil, err
	}
	storage.KeepSpares(root)
	return engine.Init(ctx, root, benchdata.Schema, engine.InitOptions{FileVersion: fileVersion})
}

// timeLoads times iters strict-insert loads of n nodes + n edges, batches keyed from base.
func timeLoads(ctx context.Context, g *engine.Graph, base, iters, n int) ([]float64, error) {
	var out []float64
	for k := 0; k < iters; k++ {
		recs := benchdata.GraphBatch(base+k, n)
		t0 := time.Now()
		if _, err := g.Load(ctx, engine.LoadRequest{Mode: engine.ModeAppend, Records: recs}); err != nil {
			return nil, err
		}
		out = append(out, ms(time.Since(t0)))
	}
	return out, nil
}

// age loads rows (as 8,192-row loads) and then one-row loads up to commits in all. The one-row
// loads go to the Event table, or with sameTable to Person, the table the aged loads then
// measure: every load adds a fragment, so that measures what fragment growth costs a table
// that takes every commit. With fanout > 0 the graph is compacted before each load, the runs
// `worker run` compacts beside its messages, done here in line (the aging measures the graph
// the compaction leaves, not its timing); 0 shows the growth unchecked.
func age(ctx context.Context, g *engine.Graph, rows, commits int, sameTable bool, fanout int) (compactions int, compacting time.Duration, err error) {
	// compact merges what `worker run`'s compactor would.
	compact := func() error {
		for round := 0; fanout > 0 && round < 4 && g.CompactionDue(fanout); round++ {
			t0 := time.Now()
			res, err := g.Optimize(ctx, engine.OptimizeOptions{Fanout: fanout})
			if err != nil {
				return err
			}
			if res.Commit == nil {
				break
			}
			compactions++
			compacting += time.Since(t0)
		}
		return nil
	}
	done := 0
	for k := 0; done*2 < rows; k++ {
		n := min(4096, rows/2-done) // n nodes + n edges per load: 8,192 rows
		if err := compact(); err != nil {
			return compactions, compacting, err
		}
		if _, err := g.Load(ctx, engine.LoadRequest{Mode: engine.ModeAppend, Records: benchdata.GraphBatch(1_000_000+k, n)}); err != nil {
			return compactions, compacting, err
		}
		done += n
		commits--
	}
	for i := 0; i < commits; i++ {
		line := fmt.Sprintf(`{"type":"Event","data":{"code":"e%d"}}`, i)
		if sameTable {
			line = fmt.Sprintf(`{"type":"Person","data":{"handle":"aging-%d","name":"n","age":1,"score":0.5}}`, i)
		}
		recs, err := framing.ParseBytes([]byte(line), framing.DefaultLimits())
		if err != nil {
			return compactions, compacting, err
		}
		if err := compact(); err != nil {
			return compactions, compacting, err
		}
		if _, err := g.Load(ctx, engine.LoadRequest{Mode: engine.ModeAppend, Records: recs}); err != nil {
			return compactions, compacting, err
		}
	}
	return compactions, compacting, compact()
}

func peakRSSMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			var kb float64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(line, "VmHWM:"), "kB")), &kb)
			return kb / 1024
		}
	}
	return 0
}

func graphBench(ctx context.Context, script, tmp string, iters int) error {
	const n = 1000
	g, err := newBenchGraph(ctx, filepath.Join(tmp, "graph-fresh"))
	if err != nil {
		return err
	}
	defer g.Root().Close() // ends its spare-file refill
	o, err := startOfficial(ctx, script, filepath.Join(tmp, "node-2k"), 2*n, 1)
	if err != nil {
		return err
	}
	defer o.close()
	base := 0
	goMS, offMS, ratios, err := paired(o, func(k int) ([]float64, error) {
		base += k
		return timeLoads(ctx, g, base-k, k, n)
	})
	if err != nil {
		return err
	}
	fmt.Printf("bench: engine-load-1k+1k durability=%s go_p50_ms=%.3f lance_append_2k_p50_ms=%.3f ratio=%.2f rounds=%dx%d round_ratios=%s\n",
		durability, median(goMS), median(offMS), median(ratios), pairedRounds, pairedBlock, list(ratios))
	return nil
}

// list prints ratios as "a,b,c".
func list(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, ",")
}

// agedBench compares loads on a graph aged to rows existing rows and commits prior commits
// with loads on a fresh graph measured just before, in the default durability. It runs last:
// minutes of aging leave the machine busy writing back, which would skew what follows it.
func agedBench(ctx context.Context, tmp string, iters, agedRows, agedCommits int, sameTable bool, fanout int) error {
	const n = 1000
	g, err := newBenchGraph(ctx, filepath.Join(tmp, "graph-fresh-for-aged"))
	if err != nil {
		return err
	}
	defer g.Root().Close()
	fresh, err := timeLoads(ctx, g, 0, iters, n)
	if err != nil {
		return err
	}
	ga, err := newBenchGraph(ctx, filepath.Join(tmp, "graph-aged"))
	if err != nil {
		return err
	}
	defer ga.Root().Close()
	t0 := time.Now()
	compactions, compacting, err := age(ctx, ga, agedRows, agedCommits, sameTable, fanout)
	if err != nil {
		return err
	}
	fmt.Printf("bench: engine-aging rows=%d commits=%d compaction_fanout=%d compactions=%d compaction_s=%.1f took_s=%.1f\n",
		agedRows, agedCommits, fanout, compactions, compacting.Seconds(), time.Since(t0).Seconds())
	aged, err := timeLoads(ctx, ga, 0, iters, n)
	if err != nil {
		return err
	}
	fmt.Printf("bench: engine-load-aged durability=%s rows=%d commits=%d commits_on=%s compaction_fanout=%d go_p50_ms=%.3f fresh_p50_ms=%.3f ratio=%.2f peak_rss_mib=%.0f\n",
		durability, agedRows, agedCommits, map[bool]string{false: "other_table", true: "measured_table"}[sameTable], fanout, median(aged), median(fresh), median(aged)/median(fresh), peakRSSMiB())
	// What `worker cleanup --keep 10 --confirm` reclaims from that history.
	dir := filepath.Join(tmp, "graph-aged")
	before := diskUsage(dir)
	t1 := time.Now()
	res, err := ga.Cleanup(ctx, engine.CleanupOptions{Keep: 10})
	if err != nil {
		return err
	}
	versions, files := 0, 0
	for _, d := range res.Datasets {
		versions, files = versions+d.OldVersionsRemoved, files+d.FilesRemoved
	}
	fmt.Printf("bench: engine-cleanup keep=10 versions_removed=%d files_removed=%d disk_mib_before=%.0f disk_mib_after=%.0f took_s=%.1f\n",
		versions, files, before, diskUsage(dir), time.Since(t1).Seconds())
	return nil
}

// diskUsage is the size in MiB of the files under dir.
func diskUsage(dir string) float64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return float64(n) / (1 << 20)
}

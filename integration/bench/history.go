package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/internal/benchdata"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// historyBatch is how many synthetic messages one __manifest commit of the history build
// holds.
const historyBatch = 10_000

// historyLoads is how many loads each open child times.
const historyLoads = 30

// historySample is what one history open child reports.
type historySample struct {
	OpenMs     float64 `json:"open_ms"`
	RSSMiB     float64 `json:"rss_after_open_mib"`
	LoadP50    float64 `json:"load_p50_ms"`
	FilterMiB  float64 `json:"filter_mib"`
	Checkpoint string  `json:"checkpoint"`
}

// runHistoryChild is the history bench's child process. "build" makes a graph and appends n
// applied messages' __manifest rows through the publisher (publisher.PublishSynthetic, in
// commits of historyBatch); "open" opens that graph as `worker run` does (engine.Open: the
// manifest state, then recovery), measures the time and, after a collection, the resident
// memory, then times historyLoads small loads, each a new message with its receipt.
func runHistoryChild(ctx context.Context, step, dir string, n int) error {
	if step == "build" {
		if _, err := newBenchGraph(ctx, dir); err != nil {
			return err
		}
		root, err := storage.Open(ctx, dir, storage.WithLocalFsync(localFsync))
		if err != nil {
			return err
		}
		p := publisher.Open(root, "")
		for first := 1; first <= n; first += historyBatch {
			if err := p.PublishSynthetic(ctx, first, min(historyBatch, n-first+1)); err != nil {
				return err
			}
		}
		return nil
	}
	t0 := time.Now()
	root, err := storage.Open(ctx, dir, storage.WithLocalFsync(localFsync))
	if err != nil {
		return err
	}
	storage.KeepSpares(root)
	g, err := engine.Open(ctx, root)
	if err != nil {
		return err
	}
	st, err := g.Snapshot(ctx, "")
	if err != nil {
		return err
	}
	out := historySample{OpenMs: ms(time.Since(t0)), Checkpoint: st.CheckpointStatus, FilterMiB: float64(st.FilterBytes()) / (1 << 20)}
	runtime.GC()
	debug.FreeOSMemory()
	out.RSSMiB = rssMiB()
	var loads []float64
	for k := 0; k < historyLoads; k++ {
		rc := &publisher.Receipt{Stream: "BENCH", Sequence: uint64(n + 1 + k), MsgID: fmt.Sprintf("hist-new-%d", n+1+k)}
		recs := benchdata.GraphBatch(n+k, 100)
		t := time.Now()
		res, err := g.Load(ctx, engine.LoadRequest{Mode: engine.ModeAppend, Records: recs, Receipt: rc})
		if err != nil {
			return err
		}
		if res.AlreadyApplied {
			return fmt.Errorf("load %d reported already applied", k)
		}
		loads = append(loads, ms(time.Since(t)))
	}
	out.LoadP50 = median(loads)
	return json.NewEncoder(os.Stdout).Encode(out)
}

// rssMiB is the process's resident memory now (VmRSS).
func rssMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			var kb float64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(line, "VmRSS:"), "kB")), &kb)
			return kb / 1024
		}
	}
	return 0
}

// historyBench: a graph with 10,000 and one with 1,000,000 applied messages in its history,
// each opened in fresh child processes (benchRounds of them) that report the open time, the
// resident memory after it and the p50 of small loads; then how the larger history compares.
func historyBench(ctx context.Context, tmp string, sizes []int) error {
	type figures struct{ open, rss, load float64 }
	var got []figures
	for _, n := range sizes {
		dir := filepath.Join(tmp, fmt.Sprintf("history-%d", n))
		t0 := time.Now()
		if _, err := childProcess(ctx, "-history-child", "build", "-history-dir", dir, "-history-n", fmt.Sprint(n)); err != nil {
			return fmt.Errorf("build %d: %w", n, err)
		}
		build := time.Since(t0)
		var open, rss, load []float64
		var last historySample
		for r := 0; r < benchRounds; r++ {
			// Each round opens a copy-free fresh process on the graph the previous round
			// loaded into: the history grows by historyLoads messages a round, which is noise
			// against n.
			b, err := childProcess(ctx, "-history-child", "open", "-history-dir", dir, "-history-n", fmt.Sprint(n+r*historyLoads))
			if err != nil {
				return fmt.Errorf("open %d: %w", n, err)
			}
			if err := json.Unmarshal(b, &last); err != nil {
				return fmt.Errorf("history child output %q: %w", b, err)
			}
			open, rss, load = append(open, last.OpenMs), append(rss, last.RSSMiB), append(load, last.LoadP50)
		}
		f := figures{median(open), median(rss), median(load)}
		got = append(got, f)
		fmt.Printf("bench: history messages=%d rss_after_open_mib=%.1f open_ms=%.1f load_p50_ms=%.2f filter_mib=%.2f build_s=%.0f opened_by=%q\n",
			n, f.rss, f.open, f.load, last.FilterMiB, build.Seconds(), last.Checkpoint)
		_ = os.RemoveAll(dir)
	}
	a, b := got[0], got[len(got)-1]
	fmt.Printf("bench: history-growth rss_delta_mib=%.1f open_ratio=%.2f load_ratio=%.2f\n", b.rss-a.rss, b.open/a.open, b.load/a.load)
	return nil
}

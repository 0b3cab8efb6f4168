// Command bench measures the Go lance package against the official Lance engine on the same
// machine in the same run, and prints each figure as a ratio:
//
//	bench: lance-append-1k go_p50_ms=… lance_p50_ms=… ratio=…
//
// Ratios below 1 mean the Go path is faster. The paired sections run -rounds times (rounds.go),
// each line's ratios are then printed as their median, min, max and per-round values, and the
// goals table (goals.go) as one `bench: goal` line per goal and a final `bench: goals` tally.
// Nothing here asserts a time: an unmet goal is reported, not a failure; the exit status is
// non-zero only when a section itself failed.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/internal/proctest"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
	"github.com/omnigraph/omnigraph-worker/storage"
)

var peopleSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "age", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
}, nil)

func people(k, n int) arrow.Record {
	b := array.NewRecordBuilder(memory.DefaultAllocator, peopleSchema)
	defer b.Release()
	for i := 0; i < n; i++ {
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("p%d-%d", k, i))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("name-%d-%d", k, i))
		b.Field(2).(*array.Int64Builder).Append(int64(i % 90))
		b.Field(3).(*array.Float64Builder).Append(float64(i) * 0.5)
	}
	return b.NewRecord()
}

type nodeResult struct {
	AppendP50 float64 `json:"append_p50_ms"`
	ScanP50   float64 `json:"scan_p50_ms"`
	PeakRSS   float64 `json:"peak_rss_mib"`
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[(len(s)-1)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// createPeople creates the bench table at dir from one batch of rows people, at the bench's
// data file version, in a store opened with opts; the caller closes the store.
func createPeople(ctx context.Context, dir string, rows int, opts ...storage.Option) (storage.Store, *lance.Dataset, error) {
	st, err := storage.Open(ctx, dir, opts...)
	if err != nil {
		return nil, nil, err
	}
	s, _ := schema.FromArrow(peopleSchema)
	d, err := lance.Create(ctx, st, s, []arrow.Record{people(-1, rows)}, lance.CreateOptions{FileVersion: fileVersion})
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, d, nil
}

// goRun mirrors compat.mjs bench: create from one batch, time iters appends, then time iters
// full scans of the score column.
func goRun(ctx context.Context, dir string, rows, iters int) (appendP50, scanP50 float64, err error) {
	st, d, err := createPeople(ctx, dir, rows)
	if err != nil {
		return 0, 0, err
	}
	defer st.Close()
	batches := make([]arrow.Record, iters)
	for k := range batches {
		batches[k] = people(k, rows)
	}
	var app, scan []float64
	for k := 0; k < iters; k++ {
		t0 := time.Now()
		staged, err := d.StageAppend(ctx, []arrow.Record{batches[k]}, lance.StageOptions{})
		if err != nil {
			return 0, 0, err
		}
		if d, err = d.Commit(ctx, staged); err != nil {
			return 0, 0, err
		}
		app = append(app, ms(time.Since(t0)))
	}
	for k := 0; k < iters; k++ {
		t0 := time.Now()
		recs, err := d.ReadAll(ctx, lance.ScanOptions{Columns: []string{"score"}})
		if err != nil {
			return 0, 0, err
		}
		var n int64
		for _, r := range recs {
			n += r.NumRows()
			r.Release()
		}
		scan = append(scan, ms(time.Since(t0)))
		if n != int64(rows*(iters+1)) {
			return 0, 0, fmt.Errorf("scan saw %d rows, want %d", n, rows*(iters+1))
		}
	}
	return median(app), median(scan), nil
}

func nodeRun(ctx context.Context, script, dir string, rows, iters int) (nodeResult, error) {
	out, err := exec.CommandContext(ctx, "node", script, "bench", dir, "--rows", fmt.Sprint(rows), "--iters", fmt.Sprint(iters)).Output()
	if err != nil {
		return nodeResult{}, fmt.Errorf("node bench: %v", err)
	}
	var r nodeResult
	err = json.Unmarshal(out, &r)
	return r, err
}

// benchRounds is how many alternating Go / official rounds a ratio is measured over.
const benchRounds = 5

// fileVersion is the data file version of every table the Go side creates (-lance-version).
var fileVersion = engine.DefaultFileVersion

// durability labels the Go side's bench lines: fsync (the default) or none; localFsync is the
// same as the storage option every graph root of the Go side is opened with.
var (
	durability = "fsync"
	localFsync = true
)

func main() {
	script := flag.String("script", "integration/lancecompat/compat.mjs", "path of compat.mjs")
	iters := flag.Int("iters", 30, "timed repetitions per measurement")
	agedRows := flag.Int("aged-rows", 1_000_000, "existing rows before the aged load measurement")
	agedCommits := flag.Int("aged-commits", 10_000, "prior commits before the aged load measurement (0 skips it)")
	agedFanout := flag.Int("aged-compaction-fanout", 16, "compact the aged graph between its commits as `worker run` does at this compaction_fanout (0: never)")
	agedSameTable := flag.Bool("aged-same-table", false, "the aged graph's one-row commits go to the measured table (fragment growth) instead of another")
	only := flag.String("only", "", "run only these comma-separated benchmarks of framing, jetstream, latency, lance, index, e2e, index-cost and compaction-cost (the e2e lines of those names alone, no Node), merge, graph (the aged graph with it), history, pipeline, aged (framing, jetstream, latency and pipeline need no Node)")
	rounds := flag.Int("rounds", goalRounds, "run the latency, lance, index, e2e and graph benchmarks this many times, each a process of its own, and print the medians of their ratios and the goals")
	roundChild := flag.Int("round-child", 0, "internal: run the sections in this process, as round N of -rounds (-1: a section run once)")
	flag.IntVar(&pipelineDepth, "pipeline-depth", 0, "the e2e worker's pipeline_depth (0: the default of `worker run`; 1: one message at a time)")
	flag.StringVar(&workerLog, "worker-log", "", "append the e2e workers' info log (compactions among it) and the pipeline-full workers' output to this file")
	flag.BoolVar(&withOfficial, "official", true, "pair the e2e bench with the official engine (false: the Go side's figures only, for a machine without node_modules)")
	historyChild := flag.String("history-child", "", "internal: build|open, for the history bench's child processes")
	historyDir := flag.String("history-dir", "", "internal: the history bench graph")
	historyN := flag.Int("history-n", 0, "internal: messages in the history bench graph")
	historySizes := flag.String("history-messages", "10000,1000000", "the history bench's history sizes, in applied messages (the first and the last are compared)")
	mergeChild := flag.String("merge-child", "", "internal: setup|run, for the merge bench's child processes")
	mergeDir := flag.String("merge-dir", "", "internal: the merge bench graph")
	mergeRows := flag.Int("merge-rows", 0, "internal: rows on the merge bench branch")
	mergeNoProof := flag.Bool("merge-no-proof", false, "internal: merge by the ordinary diff")
	indexChild := flag.String("index-child", "", "internal: btree|inverted|ivf_flat, for the index bench's Go builds in a process of their own")
	indexDir := flag.String("index-dir", "", "internal: the index child's table")
	indexRows := flag.Int("index-rows", 0, "internal: rows of the index child's table")
	costChild := flag.String("cost-child", "", "internal: the graph name of a worker run in a process of its own (the index-cost and sustained lines)")
	costDir := flag.String("cost-dir", "", "internal: the worker child's graph")
	costNATS := flag.String("cost-nats", "", "internal: the nats-server the worker child consumes from")
	costIndices := flag.Bool("cost-indices", false, "internal: the worker child's build_indices")
	costFanout := flag.Int("cost-fanout", childDefaultFanout, "internal: the worker child's compaction_fanout (-1: the default)")
	flag.StringVar(&costProfiles, "index-cost-profiles", "", "write a CPU profile and an allocation profile of each worker child process into this directory, NAME.pprof and NAME.allocs.pprof (index-cost: benchcon indices on, benchcoff off; compaction-cost: benchkon default compaction_fanout, benchkoff compaction_fanout=0, neither with indices; sustained: benchsi indices on, benchni off, benchnc compaction_fanout=0; the worker's samples also carry omnigraph_part=stage, commit or maintenance: go tool pprof -tags)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run (Go side) to this file")
	memProfile := flag.String("memprofile", "", "write an allocation profile of the whole run (Go side) to this file at the end")
	engineName := flag.String("engine", "lance12", "the official engine to compare with: lance8, lance10 or lance12 (integration/lancecompat/engine.mjs)")
	version := flag.String("lance-version", engine.DefaultFileVersion.String(), "data file version of every table both sides create")
	fsync := flag.String("fsync", "both", "durability of the Go side's local writes: on (the default config), off (no fsync, as the official engine's local store), or both")
	flag.Parse()
	ctx := context.Background()
	v, err := file.ParseVersion(*version)
	if err != nil || !file.Writable(v) || !file.Readable(v) {
		fmt.Fprintf(os.Stderr, "-lance-version %s: this build must read and write it (parse error: %v)\n", *version, err)
		os.Exit(2)
	}
	fileVersion = v
	// Every official-engine child (bench, bench-serve) reads these.
	os.Setenv("LANCE_ENGINE", *engineName)
	os.Setenv("LANCE_DATA_VERSION", v.String())
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(config.Defaults().GCPercent) // the worker in this process runs as `worker run` would
	}
	adviseHeap()
	if *mergeChild != "" {
		localFsync = *fsync != "off" // the parent passes its durability down
		if err := runMergeChild(ctx, *mergeChild, *mergeDir, *mergeRows, *mergeNoProof); err != nil {
			fmt.Fprintln(os.Stderr, "merge child:", err)
			os.Exit(1)
		}
		return
	}
	if *costChild != "" {
		localFsync = *fsync != "off"
		durability = map[bool]string{true: "fsync", false: "none"}[localFsync]
		if err := runCostChild(ctx, *costChild, *costDir, *costNATS, *costIndices, *costFanout); err != nil {
			fmt.Fprintln(os.Stderr, "worker child:", err)
			os.Exit(1)
		}
		return
	}
	if *indexChild != "" {
		if err := runIndexChild(ctx, *indexChild, *indexDir, *indexRows, *iters); err != nil {
			fmt.Fprintln(os.Stderr, "index child:", err)
			os.Exit(1)
		}
		return
	}
	if *historyChild != "" {
		if err := runHistoryChild(ctx, *historyChild, *historyDir, *historyN); err != nil {
			fmt.Fprintln(os.Stderr, "history child:", err)
			os.Exit(1)
		}
		return
	}
	run, err := parseSections(*only)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// A profile is of one process: with one, the sections run here, once, without medians.
	if *roundChild == 0 && *cpuProfile == "" && *memProfile == "" {
		if *rounds < 1 {
			fmt.Fprintln(os.Stderr, "-rounds: want 1 or more")
			os.Exit(2)
		}
		os.Exit(orchestrate(run, *rounds, os.Args[1:]))
	}
	if run["framing"] {
		if err := framingBench(framingRounds); err != nil {
			fmt.Fprintln(os.Stderr, "framing bench:", err)
			os.Exit(1)
		}
	}
	tmp, err := os.MkdirTemp("", "lance-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(tmp)
	if err := proctest.PrivateTempDir(tmp); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(tmp)
		os.Exit(1)
	}
	// A failed section exits without the deferred removal: its files (gigabytes after the
	// aged graph) go first.
	exit := func(code int) {
		os.RemoveAll(tmp)
		os.Exit(code)
	}
	if run["jetstream"] {
		if err := jetstreamBench(ctx, tmp); err != nil {
			fmt.Fprintln(os.Stderr, "jetstream bench:", err)
			exit(1)
		}
	}
	if run["latency"] {
		if err := latencyBench(ctx, tmp); err != nil {
			fmt.Fprintln(os.Stderr, "latency bench:", err)
			exit(1)
		}
	}
	if run["lance"] || run["index"] || run["e2e"] || run["merge"] || run["graph"] {
		fmt.Printf("bench: official engine %s, data file version %s on both sides\n", *engineName, v)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "cpuprofile:", err)
			exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if *memProfile != "" {
		defer func() {
			f, err := os.Create(*memProfile)
			if err == nil {
				err = pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "memprofile:", err)
			}
		}()
	}
	if run["lance"] {
		lanceBench(ctx, *script, tmp, *iters)
	}
	if run["index"] {
		if err := indexBench(ctx, *script, tmp, *iters); err != nil {
			fmt.Fprintln(os.Stderr, "index bench:", err)
			exit(1)
		}
	}
	modes := map[string][]bool{"on": {true}, "off": {false}, "both": {true, false}}[*fsync]
	if modes == nil {
		fmt.Fprintln(os.Stderr, "-fsync: want on, off or both")
		exit(2)
	}
	for _, sync := range modes {
		localFsync = sync
		durability = map[bool]string{true: "fsync", false: "none"}[sync]
		dir := filepath.Join(tmp, durability)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			exit(1)
		}
		if run["e2e"] {
			if err := e2eBench(ctx, *script, dir, *iters); err != nil {
				fmt.Fprintln(os.Stderr, "e2e bench:", err)
				exit(1)
			}
		}
		var pairs []costPair // e2e measures them among its lines
		if run["index-cost"] && !run["e2e"] {
			pairs = append(pairs, indexCostPair)
		}
		if run["compaction-cost"] && !run["e2e"] {
			pairs = append(pairs, compactionCostPair)
		}
		if len(pairs) > 0 {
			if err := costBench(ctx, dir, *iters, pairs...); err != nil {
				fmt.Fprintln(os.Stderr, "cost bench:", err)
				exit(1)
			}
		}
		if run["merge"] {
			if err := mergeBench(ctx, *script, dir); err != nil {
				fmt.Fprintln(os.Stderr, "merge bench:", err)
				exit(1)
			}
		}
		if run["graph"] {
			if err := graphBench(ctx, *script, dir, *iters); err != nil {
				fmt.Fprintln(os.Stderr, "graph bench:", err)
				exit(1)
			}
		}
	}
	if run["history"] {
		localFsync = true
		durability = "fsync"
		var sizes []int
		for _, f := range strings.Split(*historySizes, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				fmt.Fprintf(os.Stderr, "-history-messages %q: want positive counts\n", *historySizes)
				exit(2)
			}
			sizes = append(sizes, n)
		}
		if err := historyBench(ctx, tmp, sizes); err != nil {
			fmt.Fprintln(os.Stderr, "history bench:", err)
			exit(1)
		}
	}
	if run["pipeline"] {
		localFsync = true
		durability = "fsync"
		if err := pipelineMemoryBench(ctx, tmp); err != nil {
			fmt.Fprintln(os.Stderr, "pipeline bench:", err)
			exit(1)
		}
	}
	// The aged measurement (minutes of aging) runs once, last, with the default durability.
	if run["aged"] && *agedCommits > 0 {
		localFsync = true
		durability = "fsync"
		if err := agedBench(ctx, tmp, *iters, *agedRows, *agedCommits, *agedSameTable, *agedFanout); err != nil {
			fmt.Fprintln(os.Stderr, "aged bench:", err)
			exit(1)
		}
	}
}

// framingRounds is how many rounds of about 200 ms each framing figure is the median of.
const framingRounds = 7

func lanceBench(ctx context.Context, script, tmp string, iters int) {
	for _, size := range []struct {
		label string
		rows  int
	}{{"1k", 1000}, {"8k", 8192}} {
		gA, gS, err := goRun(ctx, filepath.Join(tmp, "go-"+size.label), size.rows, iters)
		if err != nil {
			fmt.Fprintln(os.Stderr, "go:", err)
			os.Exit(1)
		}
		n, err := nodeRun(ctx, script, filepath.Join(tmp, "node-"+size.label), size.rows, iters)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("bench: lance-append-%s go_p50_ms=%.3f lance_p50_ms=%.3f ratio=%.2f\n", size.label, gA, n.AppendP50, gA/n.AppendP50)
		fmt.Printf("bench: lance-scan-%s-x%d go_p50_ms=%.3f lance_p50_ms=%.3f ratio=%.2f\n", size.label, iters+1, gS, n.ScanP50, gS/n.ScanP50)
	}
}

package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/ingest"
	"github.com/omnigraph/omnigraph-worker/internal/benchdata"
)

// The pipeline-full bench: `worker run` (the built binary, a process of its own, so its peak
// resident memory is its alone) over a queue of large batches, with a pipeline deep enough
// that its bound in bytes, not its depth, limits what is held:
//
//	bench: pipeline-full batches=N batch_mib=… pipeline_depth=16 pipeline_bytes_mib=128 peak_rss_mib=… bound_mib=… vs_bound=…
//
// bound_mib is pipeline_bytes + 128 MiB, the goal's allowance for everything else (the
// graph's state, the batch being built and written, the runtime); vs_bound ≤ 1 meets it. The
// first run is at the worker's defaults (memory_limit_mib=0: no limit outside a container), the
// second with memory_limit at pipeline_bytes + 256 MiB. took_s includes publishing.
const (
	pipeMemBatches    = 24
	pipeMemRows       = 8192 // the keyed-table ceiling of one batch
	pipeMemDepth      = 16
	pipeMemBytes      = 128 << 20
	pipeMemAllowance  = 128 << 20
	pipeMemLimitOver  = 256 << 20 // the second run's memory_limit over pipeline_bytes
	pipeMemNameBytes  = 2900      // a name this long makes each batch about 24 MiB
	pipeMemGraph      = "pipemem"
	pipeMemEventWait  = 3 * time.Minute
	pipeMemReadyWait  = time.Minute
	pipeMemPollPeriod = 100 * time.Millisecond
)

func pipelineMemoryBench(ctx context.Context, tmp string) error {
	dir := filepath.Join(tmp, "pipemem")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	worker := filepath.Join(dir, "worker")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", worker, "./cmd/worker").CombinedOutput(); err != nil {
		return fmt.Errorf("build the worker: %v\n%s", err, out)
	}
	ns, err := startNATSProcess(ctx, dir)
	if err != nil {
		return err
	}
	defer ns.stop()
	schema := filepath.Join(dir, "bench.pg")
	if err := os.WriteFile(schema, []byte(benchdata.Schema), 0o644); err != nil {
		return err
	}
	for i, limit := range []int{0, pipeMemBytes + pipeMemLimitOver} {
		if err := pipelineMemoryRun(ctx, dir, worker, schema, ns.url, fmt.Sprintf("%s%d", pipeMemGraph, i), limit); err != nil {
			return err
		}
	}
	return nil
}

// pipelineMemoryRun is one pipeline-full run on graph, with the worker's memory_limit at
// limit (0: its default).
func pipelineMemoryRun(ctx context.Context, dir, worker, schema, url, graph string, limit int) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	httpAddr := l.Addr().String()
	l.Close()
	durabilityFlag := "--local-fsync=" + strconv.FormatBool(localFsync)
	depth := pipeMemDepth
	if pipelineDepth > 0 { // -pipeline-depth, as for the e2e bench
		depth = pipelineDepth
	}
	w := exec.CommandContext(ctx, worker, "run", "--root", filepath.Join(dir, graph), "--graph", graph, "--schema", schema,
		"--nats-url", url, "--memory-limit", strconv.Itoa(limit), "--http", httpAddr, durabilityFlag,
		"--pipeline-depth", strconv.Itoa(depth), "--pipeline-bytes", strconv.Itoa(pipeMemBytes))
	w.Env = append(os.Environ(), "GOGC=") // the worker's own collector setting, not this process's
	// The worker's output goes with the bench's temporary directory, unless -worker-log keeps
	// it.
	logPath, flags := filepath.Join(dir, graph+".log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC
	if workerLog != "" {
		logPath, flags = workerLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND
	}
	logf, err := os.OpenFile(logPath, flags, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	w.Stdout, w.Stderr = logf, logf
	if err := w.Start(); err != nil {
		return err
	}
	defer func() { _ = w.Process.Signal(syscall.SIGTERM); _ = w.Wait() }()
	if err := waitHTTP(ctx, "http://"+httpAddr+"/readyz", pipeMemReadyWait); err != nil {
		return err
	}
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	c := config.Defaults()
	c.Graph = graph
	cfg := c.Ingest()
	events, err := nc.SubscribeSync(cfg.EventSubject())
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	name := strings.Repeat("n", pipeMemNameBytes)
	start := time.Now()
	total := 0
	msgs := make([]*nats.Msg, pipeMemBatches)
	for k := range msgs {
		var b strings.Builder
		for i := range pipeMemRows {
			fmt.Fprintf(&b, `{"type":"Person","data":{"handle":"q%d-%d","name":"%s","age":%d,"score":0.5}}`+"\n", k, i, name, i%90)
		}
		msgs[k] = nats.NewMsg(cfg.IngestSubject())
		msgs[k].Data = []byte(b.String())
		msgs[k].Header.Set(ingest.HeaderMode, "append")
		total += len(msgs[k].Data)
	}
	if err := publishAll(ctx, js, msgs, graph); err != nil {
		return err
	}
	for n := 0; n < pipeMemBatches; n++ {
		if _, err := events.NextMsg(pipeMemEventWait); err != nil {
			state := "consumer state not read"
			if cons, cerr := js.Consumer(ctx, ingest.StreamName(graph), ingest.DefaultConsumer); cerr == nil {
				if info, ierr := cons.Info(ctx); ierr == nil {
					state = fmt.Sprintf("consumer: delivered %d, ack floor %d, ack pending %d, pending %d, redelivered %d, waiting pulls %d",
						info.Delivered.Stream, info.AckFloor.Stream, info.NumAckPending, info.NumPending, info.NumRedelivered, info.NumWaiting)
				}
			}
			return fmt.Errorf("pipeline-full: %d of %d batches committed: %w; %s; the worker's log ends:\n%s", n, pipeMemBatches, err, state, tail(logf.Name(), 40))
		}
	}
	peak, err := procPeakRSSMiB(w.Process.Pid)
	if err != nil {
		return err
	}
	batchMiB := float64(total) / pipeMemBatches / (1 << 20)
	bound := float64(pipeMemBytes+pipeMemAllowance) / (1 << 20)
	fmt.Printf("bench: pipeline-full durability=%s batches=%d batch_mib=%.1f pipeline_depth=%d pipeline_bytes_mib=%d memory_limit_mib=%d took_s=%.1f peak_rss_mib=%.0f bound_mib=%.0f vs_bound=%.2f\n",
		durability, pipeMemBatches, batchMiB, depth, pipeMemBytes>>20, limit>>20, time.Since(start).Seconds(), peak, bound, peak/bound)
	return nil
}

// procPeakRSSMiB is the peak resident memory (VmHWM) of process pid.
func procPeakRSSMiB(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("the worker is gone: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// waitHTTP waits until url answers 200.
func waitHTTP(ctx context.Context, url string, limit time.Duration) error {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(pipeMemPollPeriod) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("%s did not answer 200 within %v", url, limit)
}

// tail is the last n lines of the file at path, for an error.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

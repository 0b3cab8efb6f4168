// Command soak runs `worker run` under a steady stream of graph batches for a set number of
// minutes against a real nats-server process, and prints once a minute the worker's resident
// memory, open file descriptors and goroutines, then the slope of each over the minutes after
// warm-up: a worker that runs for months shows none (`make soak`; not part of CI). Resident
// memory and heap_inuse climb toward the soft memory limit while the collector lets garbage
// gather; the live heap (what the last collection kept) is the figure a leak moves.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/omnigraph/omnigraph-worker/ingest"
	"github.com/omnigraph/omnigraph-worker/internal/benchdata"
)

func main() {
	minutes := flag.Int("minutes", 10, "how long the stream runs")
	warmup := flag.Int("warmup", 2, "minutes left out of the slopes (caches and pools filling)")
	rate := flag.Int("rate", 20, "batches published per second")
	rows := flag.Int("rows", 100, "people per batch (and as many edges)")
	profiles := flag.String("profiles", "", "write the worker's heap profile (after a collection) here at the end of warm-up and at the end, to compare with go tool pprof -diff_base")
	keys := flag.Int("keys", 50, "distinct batches, upserted in turn (mode merge): the graph stays this size, so what grows is the worker, not the data; 0 appends new rows forever")
	flag.Parse()
	if *minutes <= *warmup {
		fmt.Fprintln(os.Stderr, "soak: -minutes must exceed -warmup")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *minutes, *warmup, *rate, *rows, *keys, *profiles); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, minutes, warmup, rate, rows, keys int, profiles string) error {
	dir, err := os.MkdirTemp("", "omnigraph-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	worker, natsBin := filepath.Join(dir, "worker"), filepath.Join(dir, "nats-server")
	for out, pkg := range map[string]string{worker: "./cmd/worker", natsBin: "github.com/nats-io/nats-server/v2"} {
		if b, err := exec.CommandContext(ctx, "go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %v\n%s", pkg, err, b)
		}
	}
	natsPort, httpPort := freePort(), freePort()
	conf := filepath.Join(dir, "nats.conf")
	body := fmt.Sprintf("listen: 127.0.0.1:%d\nmax_payload: %d\njetstream {\n  store_dir: %q\n}\n", natsPort, ingest.MaxMessageBytes, filepath.Join(dir, "js"))
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		return err
	}
	ns := exec.Command(natsBin, "-c", conf)
	if err := ns.Start(); err != nil {
		return err
	}
	defer func() { _ = ns.Process.Signal(syscall.SIGTERM); _ = ns.Wait() }()
	url := fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	schema := filepath.Join(dir, "soak.pg")
	if err := os.WriteFile(schema, []byte(benchdata.Schema), 0o644); err != nil {
		return err
	}
	httpAddr := fmt.Sprintf("127.0.0.1:%d", httpPort)
	w := exec.Command(worker, "run", "--root", filepath.Join(dir, "graph"), "--graph", "soak", "--schema", schema,
		"--nats-url", url, "--http", httpAddr, "--pprof", "on")
	logf, err := os.Create(filepath.Join(dir, "worker.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	w.Stdout, w.Stderr = logf, logf
	if err := w.Start(); err != nil {
		return err
	}
	defer func() { _ = w.Process.Signal(syscall.SIGTERM); _ = w.Wait() }()
	if err := waitReady(ctx, httpAddr); err != nil {
		return err
	}
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	fmt.Printf("soak: %d min (%d warm-up), %d batches/s of %d+%d rows over %d distinct batches (0: all new), worker pid %d\n", minutes, warmup, rate, rows, rows, keys, w.Process.Pid)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	minute := time.NewTicker(time.Minute)
	defer minute.Stop()
	var samples []sample
	published, failed := 0, 0
	// futures are the publishes not yet confirmed or refused: one JetStream did not store
	// (a timeout on a loaded machine) is no message the worker could apply.
	var futures []jetstream.PubAckFuture
	for len(samples) < minutes {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			m := nats.NewMsg("omnigraph.soak.ingest")
			if keys > 0 {
				m.Data = benchdata.GraphBody(published%keys, rows)
				m.Header.Set(ingest.HeaderMode, "merge")
			} else {
				m.Data = benchdata.GraphBody(published, rows)
				m.Header.Set(ingest.HeaderMode, "append")
			}
			m.Header.Set(ingest.HeaderMsgID, fmt.Sprintf("soak-%d", published))
			f, err := js.PublishMsgAsync(m)
			if err != nil {
				return fmt.Errorf("publish: %w", err)
			}
			futures = append(futures, f)
			published++
		case <-minute.C:
			s, err := measure(w.Process.Pid, httpAddr)
			if err != nil {
				return err
			}
			pending := futures[:0]
			for _, f := range futures {
				select {
				case <-f.Ok():
				case <-f.Err():
					failed++
				default:
					pending = append(pending, f)
				}
			}
			futures = pending
			s.published, s.failed = published, failed
			samples = append(samples, s)
			if profiles != "" && (len(samples) == warmup || len(samples) == minutes) {
				if err := heapProfile(httpAddr, filepath.Join(profiles, fmt.Sprintf("heap-minute-%d.pb.gz", len(samples)))); err != nil {
					return err
				}
			}
			fmt.Printf("soak: minute=%d rss_mib=%.1f heap_inuse_mib=%.1f heap_live_mib=%.1f memory_limit_mib=%.0f fds=%d goroutines=%d published=%d publish_failed=%d applied=%d compactions=%d\n",
				len(samples), s.rssMiB, s.heapMiB, s.liveMiB, s.limitMiB, s.fds, s.goroutines, s.published, s.failed, s.applied, s.compactions)
		}
	}
	after := samples[warmup:]
	rss, heap := slope(after, func(s sample) float64 { return s.rssMiB }), slope(after, func(s sample) float64 { return s.heapMiB })
	live := slope(after, func(s sample) float64 { return s.liveMiB })
	fds, gor := slope(after, func(s sample) float64 { return float64(s.fds) }), slope(after, func(s sample) float64 { return float64(s.goroutines) })
	last := samples[len(samples)-1]
	gorText := fmt.Sprintf("%.2f", gor)
	if last.goroutines < 0 {
		gorText = "n/a" // the worker's metrics do not report go_goroutines
	}
	fmt.Printf("soak: slope rss_mib_per_min=%.2f heap_inuse_mib_per_min=%.2f heap_live_mib_per_min=%.2f fds_per_min=%.2f goroutines_per_min=%s applied=%d of %d published (worker log %s)\n",
		rss, heap, live, fds, gorText, last.applied, last.published, logf.Name())
	return nil
}

type sample struct {
	rssMiB, heapMiB            float64
	liveMiB, limitMiB          float64 // the live heap at the last collection; the soft limit
	fds, goroutines            int
	published, failed, applied int
	compactions                int // automatic compactions published (each a graph commit)
}

// measure reads the worker's resident memory and descriptors from /proc and its goroutines
// and applied messages from its metrics.
func measure(pid int, httpAddr string) (sample, error) {
	var s sample
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, fmt.Errorf("the worker is gone: %w", err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			s.rssMiB = float64(kb) / 1024
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, err
	}
	s.fds = len(fds)
	s.goroutines = -1 // until the metrics say
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 8<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch {
		case f[0] == "go_goroutines":
			s.goroutines = int(v)
		case f[0] == "go_memstats_heap_inuse_bytes":
			s.heapMiB = v / (1 << 20)
		case f[0] == "go_gc_heap_live_bytes":
			s.liveMiB = v / (1 << 20)
		case f[0] == "go_gc_gomemlimit_bytes":
			s.limitMiB = v / (1 << 20)
		case strings.HasPrefix(f[0], "omnigraph_messages_total{") && strings.Contains(f[0], `outcome="committed"`):
			s.applied = int(v)
		case strings.HasPrefix(f[0], "omnigraph_compactions_total{") && strings.Contains(f[0], `result="ok"`):
			s.compactions = int(v)
		}
	}
	return s, sc.Err()
}

// slope is the least-squares slope of f over the samples, per sample (per minute).
func slope(ss []sample, f func(sample) float64) float64 {
	n := float64(len(ss))
	if n < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for i, s := range ss {
		x, y := float64(i), f(s)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	return (n*sxy - sx*sy) / (n*sxx - sx*sx)
}

// heapProfile saves the worker's heap profile, taken after a collection (gc=1), to path.
func heapProfile(httpAddr, path string) error {
	resp, err := http.Get("http://" + httpAddr + "/debug/pprof/heap?gc=1")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("heap profile: %s", resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	fmt.Printf("soak: heap profile %s\n", path)
	return f.Close()
}

func waitReady(ctx context.Context, addr string) error {
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("the worker did not become ready on %s", addr)
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

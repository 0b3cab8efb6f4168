package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/ingest"
)

// The index-cost line and the sustained lines run each of their workers in a process of its
// own (costSide), so that none pays for another's heap: in one process the side that happened
// to be running when the shared heap grew paid for its first touches, which on this machine
// moved a round's ratio between 0.4 and 1.8. The parent publishes and times; a child runs one
// `worker run`-like worker and answers on its stdin and stdout:
//
//	child: ready                       (the worker consumes)
//	parent: settle
//	child: {"cpu_ns":…,"faults":…}     (once no maintenance is due: the process's totals)
//
// and ends when its stdin closes.

// costProfiles is the directory of the index-cost workers' CPU and allocation profiles ("":
// none).
var costProfiles string

// costSide is one worker child process and the parent's view of its worker's events.
type costSide struct {
	name    string
	indices bool
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     *bufio.Scanner
	subject string        // the worker's ingest subject
	events  chan struct{} // one value per event the worker publishes
	sub     *nats.Subscription
}

// childDefaultFanout, as a child's fanout, is `worker run`'s default compaction_fanout.
const childDefaultFanout = -1

// startWorkerChild starts the child of side name (its graph in dir, build_indices indices,
// compaction_fanout fanout or childDefaultFanout) against the nats-server at url, and returns
// once its worker consumes.
func startWorkerChild(ctx context.Context, nc *nats.Conn, url, dir, name string, indices bool, fanout int) (_ *costSide, err error) {
	c := config.Defaults()
	c.Graph = name
	ic := c.Ingest()
	s := &costSide{name: name, indices: indices, subject: ic.IngestSubject(), events: make(chan struct{}, 64)}
	sub, err := nc.Subscribe(ic.EventSubject(), func(m *nats.Msg) {
		var ev ingest.Event
		if json.Unmarshal(m.Data, &ev) == nil {
			s.events <- struct{}{}
		}
	})
	if err != nil {
		return nil, err
	}
	s.sub = sub
	defer func() {
		if err != nil && (s.cmd == nil || s.cmd.Process == nil) { // no child started: stop does not run
			_ = sub.Unsubscribe()
		}
	}()
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	fsync := map[bool]string{true: "on", false: "off"}[localFsync]
	s.cmd = exec.CommandContext(ctx, self, "-lance-version", fileVersion.String(), "-fsync", fsync,
		"-pipeline-depth", strconv.Itoa(pipelineDepth), "-worker-log", workerLog, "-index-cost-profiles", costProfiles,
		"-cost-child", name, "-cost-dir", dir, "-cost-nats", url, "-cost-indices="+strconv.FormatBool(indices), "-cost-fanout", strconv.Itoa(fanout))
	s.cmd.Stderr = os.Stderr
	if s.in, err = s.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s.out = bufio.NewScanner(stdout)
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	if line, err := s.read(); err != nil || line != "ready" {
		s.stop()
		return nil, fmt.Errorf("worker child %s: %q instead of ready (%v)", name, line, err)
	}
	return s, nil
}

func (s *costSide) read() (string, error) {
	if s.out.Scan() {
		return s.out.Text(), nil
	}
	if err := s.out.Err(); err != nil {
		return "", err
	}
	return "", io.ErrUnexpectedEOF
}

// settle returns once the child's worker has no maintenance due, with the child's CPU time and
// minor page faults so far.
func (s *costSide) settle() (time.Duration, int64, error) {
	if _, err := io.WriteString(s.in, "settle\n"); err != nil {
		return 0, 0, err
	}
	line, err := s.read()
	if err != nil {
		return 0, 0, fmt.Errorf("worker child %s: %w", s.name, err)
	}
	var u costUsage
	if err := json.Unmarshal([]byte(line), &u); err != nil {
		return 0, 0, fmt.Errorf("worker child %s: %q: %w", s.name, line, err)
	}
	if u.Err != "" {
		return 0, 0, fmt.Errorf("worker child %s: %s", s.name, u.Err)
	}
	return time.Duration(u.CPUNanos), u.Faults, nil
}

// stop ends the child (its stdin closed: it stops its worker and exits) and waits for it.
func (s *costSide) stop() {
	_ = s.in.Close()
	_ = s.cmd.Wait()
	_ = s.sub.Unsubscribe()
}

// costUsage is a child's answer to settle.
type costUsage struct {
	CPUNanos int64  `json:"cpu_ns"`
	Faults   int64  `json:"faults"`
	Err      string `json:"error,omitempty"`
}

// runCostChild is a worker child: the worker of graph name on a fresh graph in dir, at
// compaction_fanout fanout (childDefaultFanout: the default), build_indices indices, consuming
// from the nats-server at url.
func runCostChild(ctx context.Context, name, dir, url string, indices bool, fanout int) error {
	if costProfiles != "" {
		if err := os.MkdirAll(costProfiles, 0o755); err != nil {
			return err
		}
		f, err := os.Create(filepath.Join(costProfiles, name+".pprof"))
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
		defer func() {
			if f, err := os.Create(filepath.Join(costProfiles, name+".allocs.pprof")); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				_ = f.Close()
			}
		}()
	}
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	if fanout == childDefaultFanout {
		fanout = config.Defaults().CompactionFanout
	}
	setIndices := func(c *config.Config) { c.BuildIndices = indices }
	g, w, err := freshWorker(ctx, nc, dir, name, fanout, setIndices)
	if err != nil {
		return err
	}
	defer w.stop()
	go func() { // the parent counts the events; this process only keeps the channel flowing
		for range w.events {
		}
	}()
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	enc := json.NewEncoder(os.Stdout)
	for in.Scan() {
		if in.Text() != "settle" {
			return fmt.Errorf("unknown request %q", in.Text())
		}
		var u costUsage
		if err := awaitMaintenance(ctx, g, fanout, indices); err != nil {
			u.Err = err.Error()
		}
		u.CPUNanos, u.Faults = int64(cpuTime()), minorFaults()
		if err := enc.Encode(u); err != nil {
			return err
		}
	}
	return in.Err()
}

// freshWorker starts the worker of graph name at compaction_fanout fanout, configured by set,
// on a fresh graph in dir.
func freshWorker(ctx context.Context, nc *nats.Conn, dir, name string, fanout int, set func(*config.Config)) (*engine.Graph, *benchWorker, error) {
	g, err := newBenchGraph(ctx, dir)
	if err != nil {
		return nil, nil, err
	}
	w, err := startBenchWorker(ctx, nc, g, name, fanout, 64, set)
	return g, w, err
}

package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/engine/rows"
	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/graph/pg"
	"github.com/omnigraph/omnigraph-worker/internal/benchdata"
)

// framingBench prints, for the 1k+1k and 4k+4k (8,192-record) batches of the graph benches,
// how many MB of NDJSON one core frames per second as the worker frames a message's body
// (framing.FrameRetained: records point into the body it keeps, and their memory is given
// back when the message is done, for the next one), alone and followed by engine/rows
// building the per-table Arrow records (an append load's build, one table at a time):
//
//	bench: framing batch=1k+1k bytes=… gc_percent=400 mb_per_s=… with_arrow_mb_per_s=… fresh_mb_per_s=…
//
// fresh_mb_per_s is framing alone with all of the records' memory allocated anew
// (framing.ParseRetained, which gives nothing back): what a caller that keeps its records pays.
//
// Per core: GOMAXPROCS is 1 while it runs (a batch of this size is framed in one part), and
// the time is the process's CPU time (user + system, the GC's included), so other work on a
// shared machine does not count against it. The collector runs at `worker run`'s default
// gc_percent (the setting's default, printed): at Go's own 100, in a process whose live heap
// is little more than the batch, it would collect every frame or two, a cost no worker pays.
// Each figure is the median of rounds rounds.
// Node is not needed: `-only framing` runs just this.
func framingBench(rounds int) error {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return fmt.Errorf("cpu time: %w", err)
	}
	contract, err := pg.InitContract(benchdata.Schema, "")
	if err != nil {
		return err
	}
	cat := contract.Catalog
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	gcPercent := config.Defaults().GCPercent
	if v := os.Getenv("GOGC"); v != "" {
		// As in `worker run`, the variable wins, so a run can price another setting.
		if n, err := strconv.Atoi(v); err == nil {
			gcPercent = n
		} else if v == "off" {
			gcPercent = -1
		}
	}
	defer debug.SetGCPercent(debug.SetGCPercent(gcPercent))
	for _, b := range []struct {
		label string
		n     int
	}{{"1k+1k", 1000}, {"4k+4k", 4096}} {
		body := benchdata.GraphBody(0, b.n)
		frame := func() error {
			fr, err := framing.FrameRetained(body, framing.DefaultLimits())
			if err != nil {
				return err
			}
			defer fr.Release()
			if len(fr.Records) != 2*b.n {
				return fmt.Errorf("framed %d records, want %d", len(fr.Records), 2*b.n)
			}
			return nil
		}
		build := func() error {
			fr, err := framing.FrameRetained(body, framing.DefaultLimits())
			if err != nil {
				return err
			}
			defer fr.Release()
			out, err := rows.Build(cat, fr.Records, rows.Append, rows.Options{})
			if err != nil {
				return err
			}
			for _, tb := range out {
				tb.Record.Release()
			}
			return nil
		}
		fresh := func() error {
			_, err := framing.ParseRetained(body, framing.DefaultLimits())
			return err
		}
		alone, err := cpuMBPerS(len(body), rounds, frame)
		if err != nil {
			return fmt.Errorf("framing %s: %w", b.label, err)
		}
		withArrow, err := cpuMBPerS(len(body), rounds, build)
		if err != nil {
			return fmt.Errorf("framing + arrow %s: %w", b.label, err)
		}
		allocating, err := cpuMBPerS(len(body), rounds, fresh)
		if err != nil {
			return fmt.Errorf("framing anew %s: %w", b.label, err)
		}
		fmt.Printf("bench: framing batch=%s bytes=%d gc_percent=%d mb_per_s=%.1f with_arrow_mb_per_s=%.1f fresh_mb_per_s=%.1f\n", b.label, len(body), gcPercent, alone, withArrow, allocating)
	}
	return nil
}

// cpuMBPerS runs f in rounds of about 200 ms of CPU time each and returns the median rate,
// bytes per run over the CPU time per run, in MB (10^6 bytes) per second.
func cpuMBPerS(bytes, rounds int, f func() error) (float64, error) {
	// Warm up, and size a round.
	n := 0
	start := cpuTime()
	for n < 3 || cpuTime()-start < 50*time.Millisecond {
		if err := f(); err != nil {
			return 0, err
		}
		n++
	}
	per := max(1, int(float64(n)*float64(200*time.Millisecond)/float64(cpuTime()-start)))
	rates := make([]float64, 0, rounds)
	for range max(rounds, 1) {
		runtime.GC() // each round starts from the same heap
		t0 := cpuTime()
		for range per {
			if err := f(); err != nil {
				return 0, err
			}
		}
		used := cpuTime() - t0
		rates = append(rates, float64(bytes)*float64(per)/used.Seconds()/1e6)
	}
	slices.Sort(rates)
	return rates[len(rates)/2], nil
}

// minorFaults is the minor page faults the process has taken: each first touch of a page of
// memory. On this kind of virtual machine one costs about 12 µs, so a side that grows its heap
// into fresh memory pays for it in CPU time (docs/performance.md).
func minorFaults() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Minflt
}

// cpuTime is the CPU time the process has used, user and system (framingBench has checked
// that the call works here).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

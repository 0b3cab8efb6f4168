package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"time"
)

// official is one official-engine process (compat.mjs bench-serve) holding a table open and
// appending on request, so Go and official timings can alternate a few operations at a time:
// this shared machine drifts by tens of percent within seconds, and a ratio is only as good as
// the closeness in time of the two sides it divides.
type official struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Scanner
	peak  float64
	cpu   time.Duration // the process's CPU time over the last appends call
	close func()
}

// startOfficial starts one bench-serve process whose appends write rows each, split over tables.
func startOfficial(ctx context.Context, script, dir string, rows, tables int) (*official, error) {
	cmd := exec.CommandContext(ctx, "node", script, "bench-serve", dir, "--rows", fmt.Sprint(rows), "--tables", fmt.Sprint(tables))
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	o := &official{cmd: cmd, in: in, out: bufio.NewScanner(stdout)}
	o.close = func() { _ = in.Close(); _ = cmd.Wait() }
	var ready struct{ Ready bool }
	if err := o.read(&ready); err != nil || !ready.Ready {
		o.close()
		return nil, fmt.Errorf("official bench-serve did not start: %v", err)
	}
	return o, nil
}

func (o *official) read(v any) error {
	if !o.out.Scan() {
		if err := o.out.Err(); err != nil {
			return err
		}
		return io.ErrUnexpectedEOF
	}
	return json.Unmarshal(o.out.Bytes(), v)
}

// appends times k appends of the table's row count, each of fresh rows; o.cpu is then the
// process's CPU time over them.
func (o *official) appends(k int) ([]float64, error) {
	if _, err := fmt.Fprintln(o.in, k); err != nil {
		return nil, err
	}
	var r struct {
		AppendMS []float64 `json:"append_ms"`
		CPUMS    float64   `json:"cpu_ms"`
		PeakRSS  float64   `json:"peak_rss_mib"`
	}
	if err := o.read(&r); err != nil {
		return nil, fmt.Errorf("official bench-serve: %w", err)
	}
	if len(r.AppendMS) != k {
		return nil, fmt.Errorf("official bench-serve answered %d timings, want %d", len(r.AppendMS), k)
	}
	o.peak = max(o.peak, r.PeakRSS)
	o.cpu = time.Duration(r.CPUMS * float64(time.Millisecond))
	return r.AppendMS, nil
}

// pairedRounds are the alternating rounds of a paired measurement, each of pairedBlock
// operations per side, after one unmeasured warm-up round.
const (
	pairedRounds = 15
	pairedBlock  = 8
)

// paired alternates goSide(pairedBlock) and pairedBlock official appends for pairedRounds
// rounds. It returns every Go timing, every official timing and each round's ratio of p50s.
func paired(o *official, goSide func(n int) ([]float64, error)) (goMS, offMS, ratios []float64, err error) {
	for r := -1; r < pairedRounds; r++ {
		g, err := goSide(pairedBlock)
		if err != nil {
			return nil, nil, nil, err
		}
		off, err := o.appends(pairedBlock)
		if err != nil {
			return nil, nil, nil, err
		}
		if r < 0 {
			continue // warm-up: first files, first JIT, first allocations on both sides
		}
		goMS, offMS = append(goMS, g...), append(offMS, off...)
		ratios = append(ratios, median(g)/median(off))
	}
	return goMS, offMS, ratios, nil
}

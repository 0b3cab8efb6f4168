package main

import (
	"errors"
	"io"
	"os"
	"regexp"
	"testing"
	"time"
)

// TestCPUMBPerSStopsAtError: a failing run ends the measurement with its error, whether it
// fails while warming up or in a round.
func TestCPUMBPerSStopsAtError(t *testing.T) {
	boom := errors.New("boom")
	// Each run burns 20 ms of CPU time, so warming up takes 3 runs and a round about 10.
	for _, failAt := range []int{2, 5} {
		calls := 0
		_, err := cpuMBPerS(1, 1, func() error {
			if calls++; calls == failAt {
				return boom
			}
			for t0 := cpuTime(); cpuTime()-t0 < 20*time.Millisecond; {
			}
			return nil
		})
		if !errors.Is(err, boom) {
			t.Fatalf("failing at run %d: %v", failAt, err)
		}
	}
}

// TestFramingBenchLines: -only framing prints one line per batch, with both rates.
func TestFramingBenchLines(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	runErr := framingBench(1)
	os.Stdout = stdout
	w.Close()
	out, _ := io.ReadAll(r)
	if runErr != nil {
		t.Fatal(runErr)
	}
	line := regexp.MustCompile(`(?m)^bench: framing batch=(1k\+1k|4k\+4k) bytes=\d+ gc_percent=\d+ mb_per_s=[0-9.]+ with_arrow_mb_per_s=[0-9.]+ fresh_mb_per_s=[0-9.]+$`)
	if got := line.FindAllString(string(out), -1); len(got) != 2 {
		t.Fatalf("want two framing lines, got:\n%s", out)
	}
}

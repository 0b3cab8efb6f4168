package main

import (
	"math"
	"runtime/metrics"
	"testing"
)

// TestSchedQuantile: the quantile is over the waits counted between the two readings only,
// read as the upper bound of the bucket it falls in; nothing counted, or a missing reading, is
// NaN.
func TestSchedQuantile(t *testing.T) {
	buckets := []float64{0, 0.001, 0.01, 0.1, math.Inf(1)}
	before := &metrics.Float64Histogram{Counts: []uint64{100, 0, 0, 0}, Buckets: buckets}
	after := &metrics.Float64Histogram{Counts: []uint64{190, 9, 1, 0}, Buckets: buckets}
	for _, c := range []struct{ q, want float64 }{{0.5, 0.001}, {0.9, 0.001}, {0.95, 0.01}, {0.99, 0.01}, {1, 0.1}} {
		if got := schedQuantile(before, after, c.q); got != c.want {
			t.Errorf("q=%v: %v, want %v", c.q, got, c.want)
		}
	}
	if got := schedQuantile(before, before, 0.99); !math.IsNaN(got) {
		t.Errorf("nothing counted: %v, want NaN", got)
	}
	if got := schedQuantile(nil, after, 0.99); !math.IsNaN(got) {
		t.Errorf("a missing reading: %v, want NaN", got)
	}
	if h := schedLatencies(); h == nil || len(h.Buckets) != len(h.Counts)+1 {
		t.Fatalf("the runtime's %s: %v", schedLatencyMetric, h)
	}
}

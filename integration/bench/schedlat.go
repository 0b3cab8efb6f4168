package main

import (
	"math"
	"runtime/metrics"
)

// schedLatencyMetric is the Go runtime's histogram of the time goroutines spent runnable
// before they ran.
const schedLatencyMetric = "/sched/latencies:seconds"

// schedLatencies reads the scheduler latency histogram of this process so far.
func schedLatencies() *metrics.Float64Histogram {
	s := []metrics.Sample{{Name: schedLatencyMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return s[0].Value.Float64Histogram()
}

// schedQuantile is the q-quantile (0 < q <= 1) of the waits counted between two readings of
// the histogram, before and after, in seconds: the upper bound of the bucket the quantile falls
// in (NaN when nothing was counted, or a reading is missing).
func schedQuantile(before, after *metrics.Float64Histogram, q float64) float64 {
	if before == nil || after == nil || len(before.Counts) != len(after.Counts) {
		return math.NaN()
	}
	var total uint64
	for i := range after.Counts {
		total += after.Counts[i] - before.Counts[i]
	}
	if total == 0 {
		return math.NaN()
	}
	want := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i := range after.Counts {
		if seen += after.Counts[i] - before.Counts[i]; seen >= want {
			return after.Buckets[i+1]
		}
	}
	return math.Inf(1)
}

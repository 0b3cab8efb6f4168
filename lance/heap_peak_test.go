package lance

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// heapPeak starts sampling the heap's live objects every 200 µs, with the collector at GOGC 5
// so that the heap stays close to what is live, and returns the function that stops it and
// gives the most it saw above what was live at the start.
func heapPeak() (stop func() uint64) {
	gc := debug.SetGCPercent(5)
	runtime.GC()
	read := func() uint64 {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	base, peak := read(), uint64(0)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Microsecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				peak = max(peak, read())
			}
		}
	}()
	return func() uint64 {
		close(quit)
		<-done
		debug.SetGCPercent(gc)
		return max(peak, base) - base
	}
}

// benchPeak runs run b.N times, timed, and reports the most the live heap rose during one run
// above where it stood before it (heapPeak): peak_MiB, and peak_B/row over rows. Measured per
// run, so what earlier runs left behind (the files a memory store keeps) counts for none.
func benchPeak(b *testing.B, rows int, run func()) {
	var most uint64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		stop := heapPeak()
		b.StartTimer()
		run()
		b.StopTimer()
		most = max(most, stop())
		b.StartTimer()
	}
	b.ReportMetric(float64(most)/(1<<20), "peak_MiB")
	b.ReportMetric(float64(most)/float64(rows), "peak_B/row")
}

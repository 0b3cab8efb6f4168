package framing_test

import (
	"bytes"
	"testing"

	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/internal/benchdata"
)

func BenchmarkParse8192(b *testing.B) { benchParse(b, framing.Batch8192(b), 8192) }

func BenchmarkParse8192Wide(b *testing.B) { benchParse(b, framing.WideBatch8192(b), 8192) }

// Batches of n short node lines and n short edge lines (about 85 bytes each), the shape the
// engine and end-to-end benchmarks load: per-record costs dominate, not bytes.
func BenchmarkParseSmall1k1k(b *testing.B) { benchParse(b, benchdata.GraphBody(0, 1000), 2000) }

func BenchmarkParseSmall4k4k(b *testing.B) { benchParse(b, benchdata.GraphBody(0, 4096), 8192) }

// The same batches framed in place (ParseRetained: records point into the body rather than
// into a copy), all their memory allocated anew.
func BenchmarkRetainedSmall1k1k(b *testing.B) {
	benchRetained(b, benchdata.GraphBody(0, 1000), 2000)
}

func BenchmarkRetainedSmall4k4k(b *testing.B) {
	benchRetained(b, benchdata.GraphBody(0, 4096), 8192)
}

// The 1k+1k batch as Python's json.dumps writes it, with ", " and ": " between tokens.
func BenchmarkParseSpaced1k1k(b *testing.B) {
	body := bytes.ReplaceAll(benchdata.GraphBody(0, 1000), []byte(`":`), []byte(`": `))
	benchParse(b, bytes.ReplaceAll(body, []byte(`,"`), []byte(`, "`)), 2000)
}

func benchParse(b *testing.B, body []byte, want int) {
	benchFraming(b, body, want, func() (int, func(), error) {
		recs, err := framing.ParseBytes(body, framing.DefaultLimits())
		return len(recs), func() {}, err
	})
}

func benchRetained(b *testing.B, body []byte, want int) {
	benchFraming(b, body, want, func() (int, func(), error) {
		recs, err := framing.ParseRetained(body, framing.DefaultLimits())
		return len(recs), func() {}, err
	})
}

// The same batches framed as the worker frames them since it gives their memory back
// (FrameRetained, then Release): the path integration/bench's framing figure measures.
func BenchmarkFrameSmall1k1k(b *testing.B) { benchFrame(b, benchdata.GraphBody(0, 1000), 2000) }

func BenchmarkFrameSmall4k4k(b *testing.B) { benchFrame(b, benchdata.GraphBody(0, 4096), 8192) }

func benchFrame(b *testing.B, body []byte, want int) {
	benchFraming(b, body, want, func() (int, func(), error) {
		fr, err := framing.FrameRetained(body, framing.DefaultLimits())
		if err != nil {
			return 0, func() {}, err
		}
		return len(fr.Records), fr.Release, nil
	})
}

// benchFraming runs frame, which frames body and returns how many records it gave and what
// gives their memory back, as b's loop, requiring want records each time.
func benchFraming(b *testing.B, body []byte, want int, frame func() (int, func(), error)) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		n, release, err := frame()
		if err != nil || n != want {
			b.Fatalf("%d records, %v", n, err)
		}
		release()
	}
}

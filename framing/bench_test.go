package framing

import (
	"fmt"
	"strings"
	"testing"
)

// batch8192 builds a 32 MiB batch (33,554,432 bytes) of 8,192 node lines of 4,096 bytes
// each, the keyed-table ceiling at the body ceiling: a realistic worst case for one message.
func batch8192(tb testing.TB) []byte {
	tb.Helper()
	const lineBytes = 4096
	body := make([]byte, 0, 8192*lineBytes)
	for i := range 8192 {
		start := len(body)
		body = fmt.Appendf(body, `{"type":"Document","data":{"slug":"doc-%06d","title":"Document number %d","rank":%d,"score":%d.25,"published":true,"tags":["alpha","beta","gamma"],"owner":{"name":"team-%d","since":19723},"body":"`,
			i, i, i*7, i%100, i%17)
		pad := lineBytes - (len(body) - start) - len(`"}}`) - 1
		const phrase = `lorem ipsum \"dolor\" sit amet `
		text := []byte(strings.Repeat(phrase, pad/len(phrase)+1)[:pad])
		if text[pad-1] == '\\' { // do not escape the closing quote
			text[pad-1] = '.'
		}
		body = append(body, text...)
		body = append(body, "\"}}\n"...)
		if len(body)-start != lineBytes {
			tb.Fatalf("line %d is %d bytes", i, len(body)-start)
		}
	}
	return body
}

// wideBatch8192 is 8,192 node lines of about 4 KiB made of 100 short members each: the
// member-name and duplicate-detection path under load.
func wideBatch8192(tb testing.TB) []byte {
	tb.Helper()
	var b strings.Builder
	for i := range 8192 {
		fmt.Fprintf(&b, `{"type":"Wide","data":{"id":"w-%d"`, i)
		for j := range 100 {
			fmt.Fprintf(&b, `,"property_%03d":"value-%05d-%03d"`, j, i, j)
		}
		b.WriteString("}}\n")
	}
	return []byte(b.String())
}

func benchParse(b *testing.B, body []byte, want int) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		recs, err := ParseBytes(body, DefaultLimits())
		if err != nil || len(recs) != want {
			b.Fatalf("%d records, %v", len(recs), err)
		}
	}
}

func BenchmarkParse8192(b *testing.B) { benchParse(b, batch8192(b), 8192) }

func BenchmarkParse8192Wide(b *testing.B) { benchParse(b, wideBatch8192(b), 8192) }

// smallGraphBatch is n short node lines and n short edge lines (about 85 bytes each), the
// shape of the end-to-end benchmark's batches: per-record costs dominate, not bytes.
func smallGraphBatch(n int) []byte {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"type":"Person","data":{"handle":"p-%d","name":"name-%d","age":%d,"score":%g}}`+"\n", i, i, i%90, float64(i)*0.5)
	}
	for i := range n {
		fmt.Fprintf(&b, `{"edge":"Knows","from":"p-%d","to":"p-%d","data":{"id":"k-%d","since":%d}}`+"\n", i, (i+1)%n, i, i)
	}
	return []byte(b.String())
}

func BenchmarkParseSmall1k1k(b *testing.B) { benchParse(b, smallGraphBatch(1000), 2000) }

func BenchmarkParseSmall4k4k(b *testing.B) { benchParse(b, smallGraphBatch(4096), 8192) }

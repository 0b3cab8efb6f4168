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

// The generators for the benchmarks, which live in package framing_test beside batches built
// by internal/benchdata (which imports this package).
var (
	Batch8192     = batch8192
	WideBatch8192 = wideBatch8192
)

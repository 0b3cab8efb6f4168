package file

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// BenchmarkWrite22 encodes the bench table (id, name, age, score) into one file, at 2.2 and,
// for comparison, at 2.0.
func BenchmarkWrite22(b *testing.B) {
	for _, n := range []int{1000, 8192} {
		for _, v := range []Version{V2_2, V2_0} {
			b.Run(fmt.Sprintf("rows=%d/v=%s", n, v), func(b *testing.B) {
				rec, as := benchRecord(b, n)
				defer rec.Release()
				s, _ := lanceSchema(b, as)
				b.ReportAllocs()
				size := 0
				for b.Loop() {
					w, err := NewWriter(s, Options{Version: v})
					if err != nil {
						b.Fatal(err)
					}
					if err := w.Write(rec); err != nil {
						b.Fatal(err)
					}
					out, err := w.Finish()
					if err != nil {
						b.Fatal(err)
					}
					size = len(out)
				}
				b.SetBytes(int64(size))
				b.ReportMetric(float64(size), "file-bytes")
			})
		}
	}
}

// BenchmarkWrite22Nested encodes every test type (lists, structs, vectors, strings), nullable
// and not, at 2.2 and 2.0.
func BenchmarkWrite22Nested(b *testing.B) {
	s, as := testSchema(b)
	rec := randomRecord(memory.DefaultAllocator, as, 8192, 0.1, 7)
	defer rec.Release()
	for _, v := range []Version{V2_2, V2_0} {
		b.Run("v="+v.String(), func(b *testing.B) {
			b.ReportAllocs()
			size := 0
			for b.Loop() {
				size = len(writeFile(b, s, Options{Version: v}, rec))
			}
			b.ReportMetric(float64(size), "file-bytes")
		})
	}
}

package file

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// benchRecord: id Utf8 (uuid-like), name Utf8, age Int64, score Float64.
func benchRecord(b *testing.B, n int) (arrow.Record, *arrow.Schema) {
	as := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "age", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	mem := memory.DefaultAllocator
	ib, nb, ab, sb := array.NewStringBuilder(mem), array.NewStringBuilder(mem), array.NewInt64Builder(mem), array.NewFloat64Builder(mem)
	for i := 0; i < n; i++ {
		ib.Append(fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i*7919))
		nb.Append(fmt.Sprintf("person %d", i))
		ab.Append(int64(20 + i%60))
		sb.Append(float64(i) * 0.5)
	}
	return buildRecord(as, ib.NewArray(), nb.NewArray(), ab.NewArray(), sb.NewArray()), as
}

func BenchmarkWrite8192(b *testing.B) {
	rec, as := benchRecord(b, 8192)
	defer rec.Release()
	s, _ := lanceSchema(b, as)
	b.ReportAllocs()
	var size int
	for b.Loop() {
		w, err := NewWriter(s, Options{})
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
}

func BenchmarkReadColumn(b *testing.B) {
	const n = 1_000_000
	for _, nulls := range []bool{false, true} {
		b.Run(fmt.Sprintf("nulls=%v", nulls), func(b *testing.B) {
			as := arrow.NewSchema([]arrow.Field{
				{Name: "id", Type: arrow.PrimitiveTypes.Int64},
				{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
			}, nil)
			s, _ := lanceSchema(b, as)
			ib, fb := array.NewInt64Builder(memory.DefaultAllocator), array.NewFloat64Builder(memory.DefaultAllocator)
			for i := 0; i < n; i++ {
				ib.Append(int64(i))
				if nulls && i%10 == 0 {
					fb.AppendNull()
				} else {
					fb.Append(float64(i) / 3)
				}
			}
			rec := buildRecord(as, ib.NewArray(), fb.NewArray())
			defer rec.Release()
			file := writeFile(b, s, Options{}, rec)
			r := mustOpen(b, file)
			fields := s.Fields[1:2]
			b.SetBytes(8 * n)
			b.ReportAllocs()
			for b.Loop() {
				got, err := r.Read(context.Background(), fields, nil, 0, n, nil)
				if err != nil {
					b.Fatal(err)
				}
				if got.NumRows() != n {
					b.Fatal("short read")
				}
				got.Release()
			}
		})
	}
}

func BenchmarkReadStrings8192(b *testing.B) {
	rec, as := benchRecord(b, 8192)
	defer rec.Release()
	s, _ := lanceSchema(b, as)
	r := mustOpen(b, writeFile(b, s, Options{}, rec))
	b.ReportAllocs()
	for b.Loop() {
		got, err := r.Read(context.Background(), s.Fields, nil, 0, 8192, nil)
		if err != nil {
			b.Fatal(err)
		}
		got.Release()
	}
}

// BenchmarkReadStringsManyPages reads 262,144 short strings, the keys of a compacted fragment,
// in one call, across the many pages the writer cut them into (at each version that has pages
// of its own layout): what a fold reading back the rows its index lacks does.
func BenchmarkReadStringsManyPages(b *testing.B) {
	const n = 1 << 18
	as := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}}, nil)
	sb := array.NewStringBuilder(memory.DefaultAllocator)
	for i := range n {
		sb.Append(fmt.Sprintf("p%d-%d", 8000000+i/8192, i%8192))
	}
	rec := buildRecord(as, sb.NewArray())
	defer rec.Release()
	s, _ := lanceSchema(b, as)
	for _, v := range []Version{V2_1, V2_2} {
		b.Run(v.String(), func(b *testing.B) {
			r := mustOpen(b, writeFile(b, s, Options{Version: v, MaxPageRows: 8192}, rec))
			b.ReportAllocs()
			for b.Loop() {
				got, err := r.Read(context.Background(), s.Fields, nil, 0, n, nil)
				if err != nil {
					b.Fatal(err)
				}
				got.Release()
			}
		})
	}
}

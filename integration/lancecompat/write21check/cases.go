package main

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/omnigraph/omnigraph-worker/lance/file"
)

// col is one column of a case: its field and how row i is appended to its builder.
type col struct {
	f   arrow.Field
	add func(b array.Builder, i int)
}

// tcase is one table the check writes with Go at each version and has every engine read.
type tcase struct {
	name  string
	cols  []col
	rows  int
	batch int          // rows per record given to Create/StageAppend
	fo    file.Options // page sizes (zero: the writer's defaults)
	// commits > 1 spreads the rows over Create and commits-1 appends; empty adds a 0-row
	// record before every batch.
	commits int
	empty   bool
}

func (c *tcase) schema() *arrow.Schema {
	fs := make([]arrow.Field, len(c.cols))
	for i, k := range c.cols {
		fs[i] = k.f
	}
	return arrow.NewSchema(fs, nil)
}

// records builds rows [lo, hi) in records of c.batch rows.
func (c *tcase) records(lo, hi int) []arrow.Record {
	var out []arrow.Record
	as := c.schema()
	for lo < hi {
		n := min(c.batch, hi-lo)
		if c.empty {
			out = append(out, c.build(as, lo, lo))
		}
		out = append(out, c.build(as, lo, lo+n))
		lo += n
	}
	return out
}

func (c *tcase) build(as *arrow.Schema, lo, hi int) arrow.Record {
	rb := array.NewRecordBuilder(memory.DefaultAllocator, as)
	defer rb.Release()
	for i := lo; i < hi; i++ {
		for k, cl := range c.cols {
			cl.add(rb.Field(k), i)
		}
	}
	return rb.NewRecord()
}

func nullable(name string, t arrow.DataType) arrow.Field {
	return arrow.Field{Name: name, Type: t, Nullable: true}
}

// nullEvery returns an adder that appends null on rows i%n == r and otherwise calls add.
func nullEvery(n, r int, add func(b array.Builder, i int)) func(array.Builder, int) {
	return func(b array.Builder, i int) {
		if i%n == r {
			b.AppendNull()
			return
		}
		add(b, i)
	}
}

func str(i int) string {
	tail := strings.Repeat("abcdefghij", 4)
	return fmt.Sprintf("s%d-", i) + tail[:i%37]
}

func scalarCols() []col {
	return []col{
		{nullable("i8", arrow.PrimitiveTypes.Int8), nullEvery(7, 1, func(b array.Builder, i int) { b.(*array.Int8Builder).Append(int8(i*31 - 128)) })},
		{nullable("i16", arrow.PrimitiveTypes.Int16), nullEvery(7, 2, func(b array.Builder, i int) { b.(*array.Int16Builder).Append(int16(i*977 - 30000)) })},
		{nullable("i32", arrow.PrimitiveTypes.Int32), nullEvery(7, 3, func(b array.Builder, i int) { b.(*array.Int32Builder).Append(int32(i*7919 - 1<<30)) })},
		{nullable("i64", arrow.PrimitiveTypes.Int64), nullEvery(7, 4, func(b array.Builder, i int) { b.(*array.Int64Builder).Append(int64(i)*1_000_000_007 - 1<<62) })},
		{nullable("u8", arrow.PrimitiveTypes.Uint8), nullEvery(5, 0, func(b array.Builder, i int) { b.(*array.Uint8Builder).Append(uint8(i)) })},
		{nullable("u16", arrow.PrimitiveTypes.Uint16), nullEvery(5, 1, func(b array.Builder, i int) { b.(*array.Uint16Builder).Append(uint16(i * 13)) })},
		{nullable("u32", arrow.PrimitiveTypes.Uint32), nullEvery(5, 2, func(b array.Builder, i int) { b.(*array.Uint32Builder).Append(uint32(i) * 2654435761) })},
		{nullable("u64", arrow.PrimitiveTypes.Uint64), nullEvery(5, 3, func(b array.Builder, i int) { b.(*array.Uint64Builder).Append(uint64(i) * 0x9E3779B97F4A7C15) })},
		{nullable("f16", arrow.FixedWidthTypes.Float16), nullEvery(6, 0, func(b array.Builder, i int) { b.(*array.Float16Builder).Append(float16.New(float32(i%1000) / 8)) })},
		{nullable("f32", arrow.PrimitiveTypes.Float32), nullEvery(6, 1, func(b array.Builder, i int) { b.(*array.Float32Builder).Append(float32(i) * 0.25) })},
		{nullable("f64", arrow.PrimitiveTypes.Float64), nullEvery(6, 2, func(b array.Builder, i int) { b.(*array.Float64Builder).Append(float64(i) / 3) })},
		{nullable("flag", arrow.FixedWidthTypes.Boolean), nullEvery(4, 3, func(b array.Builder, i int) { b.(*array.BooleanBuilder).Append(i%3 == 0) })},
		{arrow.Field{Name: "flag_nn", Type: arrow.FixedWidthTypes.Boolean}, func(b array.Builder, i int) { b.(*array.BooleanBuilder).Append(i%5 < 2) }},
		{nullable("s", arrow.BinaryTypes.String), nullEvery(9, 4, func(b array.Builder, i int) { b.(*array.StringBuilder).Append(str(i)) })},
		{arrow.Field{Name: "s_nn", Type: arrow.BinaryTypes.String}, func(b array.Builder, i int) { b.(*array.StringBuilder).Append(str(i * 3)) }},
		{nullable("ls", arrow.BinaryTypes.LargeString), nullEvery(8, 5, func(b array.Builder, i int) { b.(*array.LargeStringBuilder).Append(str(i + 11)) })},
		{nullable("bin", arrow.BinaryTypes.Binary), nullEvery(8, 6, func(b array.Builder, i int) {
			b.(*array.BinaryBuilder).Append([]byte{byte(i), 0, byte(i >> 8)}[:i%4%3])
		})},
		{nullable("lbin", arrow.BinaryTypes.LargeBinary), nullEvery(8, 7, func(b array.Builder, i int) { b.(*array.BinaryBuilder).Append([]byte(str(i))) })},
		{nullable("d32", arrow.FixedWidthTypes.Date32), nullEvery(10, 1, func(b array.Builder, i int) { b.(*array.Date32Builder).Append(arrow.Date32(i - 5000)) })},
		{nullable("d64", arrow.FixedWidthTypes.Date64), nullEvery(10, 2, func(b array.Builder, i int) { b.(*array.Date64Builder).Append(arrow.Date64(int64(i) * 86_400_000)) })},
		{nullable("ts_us", &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}), nullEvery(10, 3, func(b array.Builder, i int) {
			b.(*array.TimestampBuilder).Append(arrow.Timestamp(int64(i) * 1_000_003))
		})},
		{nullable("ts_ns", &arrow.TimestampType{Unit: arrow.Nanosecond}), nullEvery(10, 4, func(b array.Builder, i int) {
			b.(*array.TimestampBuilder).Append(arrow.Timestamp(int64(i) * 1_000_000_007))
		})},
		{nullable("fsb", &arrow.FixedSizeBinaryType{ByteWidth: 16}), nullEvery(10, 8, func(b array.Builder, i int) {
			v := make([]byte, 16)
			for k := range v {
				v[k] = byte(i*7 + k)
			}
			b.(*array.FixedSizeBinaryBuilder).Append(v)
		})},
	}
}

func listOf(t arrow.DataType) *arrow.ListType { return arrow.ListOfField(nullable("item", t)) }

func f32s(b array.Builder, vals ...float32) {
	fb := b.(*array.Float32Builder)
	for _, v := range vals {
		fb.Append(v)
	}
}

func nestedCols() []col {
	st := arrow.StructOf(nullable("a", arrow.PrimitiveTypes.Int32), nullable("b", arrow.BinaryTypes.String), nullable("c", listOf(arrow.PrimitiveTypes.Float64)))
	lst := arrow.StructOf(nullable("x", arrow.PrimitiveTypes.Int64), nullable("y", arrow.BinaryTypes.String))
	fsl := func(n int32, t arrow.DataType) *arrow.FixedSizeListType {
		return arrow.FixedSizeListOfField(n, nullable("item", t))
	}
	return []col{
		{nullable("l_i32", listOf(arrow.PrimitiveTypes.Int32)), func(b array.Builder, i int) {
			lb := b.(*array.ListBuilder)
			switch i % 6 {
			case 0:
				lb.AppendNull()
				return
			case 1:
				lb.Append(true) // empty
				return
			}
			lb.Append(true)
			vb := lb.ValueBuilder().(*array.Int32Builder)
			for k := 0; k < i%7+1; k++ {
				if (i+k)%5 == 0 {
					vb.AppendNull()
				} else {
					vb.Append(int32(i*10 + k))
				}
			}
		}},
		{nullable("ll_str", arrow.LargeListOfField(nullable("item", arrow.BinaryTypes.String))), func(b array.Builder, i int) {
			lb := b.(*array.LargeListBuilder)
			if i%4 == 2 {
				lb.AppendNull()
				return
			}
			lb.Append(true)
			vb := lb.ValueBuilder().(*array.StringBuilder)
			for k := 0; k < i%4; k++ {
				vb.Append(str(i + k))
			}
		}},
		{nullable("lli", listOf(listOf(arrow.PrimitiveTypes.Int32))), func(b array.Builder, i int) {
			lb := b.(*array.ListBuilder)
			if i%5 == 0 {
				lb.AppendNull()
				return
			}
			lb.Append(true)
			inner := lb.ValueBuilder().(*array.ListBuilder)
			for k := 0; k < i%4; k++ {
				switch (i + k) % 3 {
				case 0:
					inner.AppendNull()
				case 1:
					inner.Append(true)
				default:
					inner.Append(true)
					vb := inner.ValueBuilder().(*array.Int32Builder)
					vb.Append(int32(i))
					vb.Append(int32(k))
				}
			}
		}},
		{nullable("st", st), func(b array.Builder, i int) {
			sb := b.(*array.StructBuilder)
			if i%7 == 3 {
				sb.AppendNull()
				return
			}
			sb.Append(true)
			if i%5 == 1 {
				sb.FieldBuilder(0).AppendNull()
			} else {
				sb.FieldBuilder(0).(*array.Int32Builder).Append(int32(i))
			}
			if i%4 == 1 {
				sb.FieldBuilder(1).AppendNull()
			} else {
				sb.FieldBuilder(1).(*array.StringBuilder).Append(str(i))
			}
			cb := sb.FieldBuilder(2).(*array.ListBuilder)
			if i%3 == 0 {
				cb.AppendNull()
			} else {
				cb.Append(true)
				for k := 0; k < i%3; k++ {
					cb.ValueBuilder().(*array.Float64Builder).Append(float64(i) + float64(k)/4)
				}
			}
		}},
		{nullable("l_st", arrow.ListOfField(nullable("item", lst))), func(b array.Builder, i int) {
			lb := b.(*array.ListBuilder)
			if i%6 == 5 {
				lb.AppendNull()
				return
			}
			lb.Append(true)
			sb := lb.ValueBuilder().(*array.StructBuilder)
			for k := 0; k < i%3; k++ {
				if (i+k)%4 == 0 {
					sb.AppendNull()
					continue
				}
				sb.Append(true)
				sb.FieldBuilder(0).(*array.Int64Builder).Append(int64(i*100 + k))
				sb.FieldBuilder(1).(*array.StringBuilder).Append(str(k))
			}
		}},
		{nullable("fsl4", fsl(4, arrow.PrimitiveTypes.Float32)), func(b array.Builder, i int) {
			fb := b.(*array.FixedSizeListBuilder)
			if i%5 == 2 {
				fb.AppendNull()
				return
			}
			fb.Append(true)
			vb := fb.ValueBuilder().(*array.Float32Builder)
			for k := 0; k < 4; k++ {
				if (i+k)%9 == 0 {
					vb.AppendNull()
				} else {
					vb.Append(float32(i) + float32(k)/8)
				}
			}
		}},
		{arrow.Field{Name: "fsl4_nn", Type: fsl(4, arrow.PrimitiveTypes.Float32)}, func(b array.Builder, i int) {
			fb := b.(*array.FixedSizeListBuilder)
			fb.Append(true)
			f32s(fb.ValueBuilder(), float32(i), 1, -float32(i), 0.5)
		}},
		{nullable("fsl128", fsl(128, arrow.PrimitiveTypes.Float32)), func(b array.Builder, i int) {
			fb := b.(*array.FixedSizeListBuilder)
			if i%4 == 1 {
				fb.AppendNull()
				return
			}
			fb.Append(true)
			vb := fb.ValueBuilder().(*array.Float32Builder)
			for k := 0; k < 128; k++ {
				vb.Append(float32(i) + float32(k)/128)
			}
		}},
		{nullable("fsl128_items", fsl(128, arrow.PrimitiveTypes.Float32)), func(b array.Builder, i int) {
			fb := b.(*array.FixedSizeListBuilder)
			fb.Append(true)
			vb := fb.ValueBuilder().(*array.Float32Builder)
			for k := 0; k < 128; k++ {
				if (i+k)%50 == 0 {
					vb.AppendNull()
				} else {
					vb.Append(float32(k) - float32(i))
				}
			}
		}},
		{nullable("fsl_u8", fsl(16, arrow.PrimitiveTypes.Uint8)), func(b array.Builder, i int) {
			fb := b.(*array.FixedSizeListBuilder)
			fb.Append(true)
			vb := fb.ValueBuilder().(*array.Uint8Builder)
			for k := 0; k < 16; k++ {
				vb.Append(uint8(i + k))
			}
		}},
		{nullable("fsl_bool", fsl(8, arrow.FixedWidthTypes.Boolean)), nullEvery(7, 6, func(b array.Builder, i int) {
			fb := b.(*array.FixedSizeListBuilder)
			fb.Append(true)
			vb := fb.ValueBuilder().(*array.BooleanBuilder)
			for k := 0; k < 8; k++ {
				vb.Append((i>>k)&1 == 1)
			}
		})},
		{nullable("st_fsl", arrow.StructOf(nullable("v", fsl(4, arrow.PrimitiveTypes.Float32)))), func(b array.Builder, i int) {
			sb := b.(*array.StructBuilder)
			if i%5 == 4 {
				sb.AppendNull()
				return
			}
			sb.Append(true)
			fb := sb.FieldBuilder(0).(*array.FixedSizeListBuilder)
			fb.Append(true)
			f32s(fb.ValueBuilder(), float32(i), 2, 3, 4)
		}},
		{nullable("l_wide", listOf(fsl(128, arrow.PrimitiveTypes.Float32))), func(b array.Builder, i int) {
			lb := b.(*array.ListBuilder)
			switch i % 5 {
			case 0:
				lb.AppendNull()
				return
			case 1:
				lb.Append(true)
				return
			}
			lb.Append(true)
			fb := lb.ValueBuilder().(*array.FixedSizeListBuilder)
			for k := 0; k < i%3; k++ {
				if k == 1 && i%2 == 0 {
					fb.AppendNull()
					continue
				}
				fb.Append(true)
				vb := fb.ValueBuilder().(*array.Float32Builder)
				for j := 0; j < 128; j++ {
					vb.Append(float32(i*1000 + k*128 + j))
				}
			}
		}},
		{nullable("l_fsl", listOf(fsl(2, arrow.PrimitiveTypes.Int32))), func(b array.Builder, i int) {
			lb := b.(*array.ListBuilder)
			if i%8 == 7 {
				lb.AppendNull()
				return
			}
			lb.Append(true)
			fb := lb.ValueBuilder().(*array.FixedSizeListBuilder)
			for k := 0; k < i%3; k++ {
				if (i+k)%11 == 0 {
					fb.AppendNull()
					continue
				}
				fb.Append(true)
				vb := fb.ValueBuilder().(*array.Int32Builder)
				vb.Append(int32(i))
				if (i+k)%7 == 0 {
					vb.AppendNull()
				} else {
					vb.Append(int32(k))
				}
			}
		}},
		{nullable("st2", arrow.StructOf(nullable("inner", arrow.StructOf(nullable("x", arrow.PrimitiveTypes.Int32), nullable("s", arrow.BinaryTypes.String))), nullable("n", arrow.PrimitiveTypes.Int64))), func(b array.Builder, i int) {
			sb := b.(*array.StructBuilder)
			if i%9 == 4 {
				sb.AppendNull()
				return
			}
			sb.Append(true)
			ib := sb.FieldBuilder(0).(*array.StructBuilder)
			if i%4 == 1 {
				ib.AppendNull()
			} else {
				ib.Append(true)
				if i%5 == 0 {
					ib.FieldBuilder(0).AppendNull()
				} else {
					ib.FieldBuilder(0).(*array.Int32Builder).Append(int32(i))
				}
				ib.FieldBuilder(1).(*array.StringBuilder).Append(str(i))
			}
			sb.FieldBuilder(1).(*array.Int64Builder).Append(int64(i) << 20)
		}},
	}
}

func allNullCols() []col {
	null := func(b array.Builder, i int) { b.AppendNull() }
	return []col{
		{nullable("n_i32", arrow.PrimitiveTypes.Int32), null},
		{nullable("n_s", arrow.BinaryTypes.String), null},
		{nullable("n_ls", arrow.BinaryTypes.LargeString), null},
		{nullable("n_bool", arrow.FixedWidthTypes.Boolean), null},
		{nullable("n_list", listOf(arrow.PrimitiveTypes.Int32)), null},
		{nullable("n_st", arrow.StructOf(nullable("a", arrow.PrimitiveTypes.Int32), nullable("b", arrow.BinaryTypes.String))), null},
		{nullable("n_fsl", arrow.FixedSizeListOfField(4, nullable("item", arrow.PrimitiveTypes.Float32))), null},
		{nullable("n_fsl128", arrow.FixedSizeListOfField(128, nullable("item", arrow.PrimitiveTypes.Float32))), null},
		{nullable("empty_lists", listOf(arrow.PrimitiveTypes.Int32)), func(b array.Builder, i int) { b.(*array.ListBuilder).Append(true) }},
		{nullable("null_or_empty", listOf(arrow.BinaryTypes.String)), func(b array.Builder, i int) {
			if i%2 == 0 {
				b.AppendNull()
			} else {
				b.(*array.ListBuilder).Append(true)
			}
		}},
		{nullable("null_items", listOf(arrow.PrimitiveTypes.Int64)), func(b array.Builder, i int) {
			lb := b.(*array.ListBuilder)
			lb.Append(true)
			lb.ValueBuilder().AppendNull()
		}},
	}
}

// big is a string of n bytes that differs with i.
func big(i, n int) string {
	b := make([]byte, n)
	for k := range b {
		b[k] = 'a' + byte((i+k/1000)%26)
	}
	return string(b)
}

func bigValueCols() []col {
	sizes := []int{70_000, 5, 0, 200_000, 300, 65_536, 65_537, 12}
	return []col{
		{nullable("s", arrow.BinaryTypes.String), nullEvery(5, 3, func(b array.Builder, i int) { b.(*array.StringBuilder).Append(big(i, sizes[i%len(sizes)])) })},
		{nullable("ls", arrow.BinaryTypes.LargeString), nullEvery(4, 1, func(b array.Builder, i int) { b.(*array.LargeStringBuilder).Append(big(i, sizes[(i+3)%len(sizes)])) })},
		{nullable("bin", arrow.BinaryTypes.Binary), func(b array.Builder, i int) { b.(*array.BinaryBuilder).Append([]byte(big(i+1, 100_000*(i%2)+i))) }},
		{nullable("l_s", listOf(arrow.BinaryTypes.String)), func(b array.Builder, i int) {
			lb := b.(*array.ListBuilder)
			switch i % 4 {
			case 0:
				lb.AppendNull()
				return
			case 1:
				lb.Append(true)
				return
			}
			lb.Append(true)
			vb := lb.ValueBuilder().(*array.StringBuilder)
			vb.Append(big(i, 70_000))
			vb.AppendNull()
			vb.Append("x")
		}},
		{nullable("st", arrow.StructOf(nullable("t", arrow.BinaryTypes.String))), func(b array.Builder, i int) {
			sb := b.(*array.StructBuilder)
			if i%3 == 2 {
				sb.AppendNull()
				return
			}
			sb.Append(true)
			sb.FieldBuilder(0).(*array.StringBuilder).Append(big(i, 66_000*(i%2)))
		}},
	}
}

// nodeCols is a typical node table: an id, a few strings, ints, floats, a bool and a date.
func nodeCols() []col {
	cities := []string{"Berlin", "Paris", "Lisbon", "Oslo", "Kyoto", "Lima", "Accra"}
	return []col{
		{nullable("id", arrow.BinaryTypes.String), func(b array.Builder, i int) { b.(*array.StringBuilder).Append(fmt.Sprintf("person-%08d", i)) }},
		{nullable("name", arrow.BinaryTypes.String), func(b array.Builder, i int) {
			b.(*array.StringBuilder).Append(fmt.Sprintf("Name %d Surname%d", i, i%977))
		}},
		{nullable("email", arrow.BinaryTypes.String), nullEvery(10, 3, func(b array.Builder, i int) { b.(*array.StringBuilder).Append(fmt.Sprintf("user%d@example.org", i)) })},
		{nullable("city", arrow.BinaryTypes.String), func(b array.Builder, i int) { b.(*array.StringBuilder).Append(cities[i%len(cities)]) }},
		{nullable("age", arrow.PrimitiveTypes.Int64), func(b array.Builder, i int) { b.(*array.Int64Builder).Append(int64(18 + i%70)) }},
		{nullable("visits", arrow.PrimitiveTypes.Int32), func(b array.Builder, i int) { b.(*array.Int32Builder).Append(int32(i * 37 % 10007)) }},
		{nullable("score", arrow.PrimitiveTypes.Float64), func(b array.Builder, i int) { b.(*array.Float64Builder).Append(float64(i%1000) / 7) }},
		{nullable("active", arrow.FixedWidthTypes.Boolean), func(b array.Builder, i int) { b.(*array.BooleanBuilder).Append(i%3 != 0) }},
		{nullable("born", arrow.FixedWidthTypes.Date32), func(b array.Builder, i int) { b.(*array.Date32Builder).Append(arrow.Date32(i % 20000)) }},
	}
}

func bigCols() []col {
	return []col{
		{nullable("id", arrow.BinaryTypes.String), func(b array.Builder, i int) { b.(*array.StringBuilder).Append(fmt.Sprintf("n-%d", i)) }},
		{nullable("v", arrow.PrimitiveTypes.Int64), func(b array.Builder, i int) { b.(*array.Int64Builder).Append(int64(i) * 3) }},
		{nullable("f", arrow.PrimitiveTypes.Float64), nullEvery(11, 0, func(b array.Builder, i int) { b.(*array.Float64Builder).Append(float64(i) / 2) })},
		{nullable("ok", arrow.FixedWidthTypes.Boolean), func(b array.Builder, i int) { b.(*array.BooleanBuilder).Append(i%2 == 0) }},
		{nullable("tag", arrow.BinaryTypes.String), nullEvery(3, 1, func(b array.Builder, i int) { b.(*array.StringBuilder).Append(str(i % 1000)) })},
		{nullable("l", listOf(arrow.PrimitiveTypes.Int32)), func(b array.Builder, i int) {
			lb := b.(*array.ListBuilder)
			lb.Append(true)
			for k := 0; k < i%3; k++ {
				lb.ValueBuilder().(*array.Int32Builder).Append(int32(i + k))
			}
		}},
	}
}

// longEmptyCols have runs of 40000 empty or null lists between values: too many levels for a
// mini-block chunk, so their pages are full-zip.
func longEmptyCols() []col {
	has := func(i int) bool { return i < 3 || i >= 40_003 }
	return []col{
		{nullable("l", listOf(arrow.PrimitiveTypes.Int32)), func(b array.Builder, i int) {
			lb := b.(*array.ListBuilder)
			lb.Append(true)
			if has(i) {
				lb.ValueBuilder().(*array.Int32Builder).Append(int32(i))
			}
		}},
		{nullable("ls", listOf(arrow.BinaryTypes.String)), func(b array.Builder, i int) {
			lb := b.(*array.ListBuilder)
			if !has(i) {
				lb.AppendNull()
				return
			}
			lb.Append(true)
			lb.ValueBuilder().(*array.StringBuilder).Append(str(i))
		}},
	}
}

// varyingCols have nulls in their first rows only, so their pages (of 5 rows in the case) need
// different layers: mini-block and full-zip pages without a list above them.
func varyingCols() []col {
	early := func(i int) bool { return i < 12 && i%3 == 0 }
	return []col{
		{nullable("s", arrow.BinaryTypes.String), func(b array.Builder, i int) {
			if early(i) {
				b.AppendNull()
				return
			}
			b.(*array.StringBuilder).Append(big(i, 300*(i%2)))
		}},
		{nullable("i", arrow.PrimitiveTypes.Int64), func(b array.Builder, i int) {
			if early(i) {
				b.AppendNull()
				return
			}
			b.(*array.Int64Builder).Append(int64(i))
		}},
		{nullable("st", arrow.StructOf(nullable("t", arrow.BinaryTypes.String), nullable("v", arrow.FixedSizeListOfField(128, nullable("item", arrow.PrimitiveTypes.Float32))))), func(b array.Builder, i int) {
			sb := b.(*array.StructBuilder)
			if early(i + 1) {
				sb.AppendNull()
				return
			}
			sb.Append(true)
			sb.FieldBuilder(0).(*array.StringBuilder).Append(big(i, 260))
			fb := sb.FieldBuilder(1).(*array.FixedSizeListBuilder)
			fb.Append(true)
			for k := 0; k < 128; k++ {
				fb.ValueBuilder().(*array.Float32Builder).Append(float32(i + k))
			}
		}},
	}
}

// cases are the tables Go writes at each version.
func cases(bigRows int) []*tcase {
	return []*tcase{
		{name: "scalars", cols: scalarCols(), rows: 3000, batch: 3000, commits: 1},
		{name: "scalars_pages", cols: scalarCols(), rows: 3000, batch: 1000, commits: 3, empty: true, fo: file.Options{MaxPageRows: 700}},
		{name: "nested", cols: nestedCols(), rows: 2000, batch: 2000, commits: 1},
		{name: "nested_pages", cols: nestedCols(), rows: 2000, batch: 500, commits: 2, fo: file.Options{MaxPageRows: 300}},
		{name: "nested_smallpages", cols: nestedCols(), rows: 600, batch: 600, commits: 1, fo: file.Options{MaxPageBytes: 4096}},
		// full-zip pages under a list whose data alone would call for different layers
		{name: "wide_lists_pages", cols: nestedCols()[12:13], rows: 600, batch: 600, commits: 1, fo: file.Options{MaxPageRows: 10}},
		{name: "varying", cols: varyingCols(), rows: 60, batch: 60, commits: 1, fo: file.Options{MaxPageRows: 5}},
		{name: "allnull", cols: allNullCols(), rows: 500, batch: 500, commits: 1},
		{name: "bigvalues", cols: bigValueCols(), rows: 40, batch: 40, commits: 1},
		{name: "bigvalues_pages", cols: bigValueCols(), rows: 40, batch: 13, commits: 2, fo: file.Options{MaxPageRows: 5}},
		{name: "longempty", cols: longEmptyCols(), rows: 40_010, batch: 40_010, commits: 1},
		{name: "big", cols: bigCols(), rows: bigRows, batch: 100_000, commits: 1},
		{name: "node1000", cols: nodeCols(), rows: 1000, batch: 1000, commits: 1},
		// the engines append seed.arrow (the same 1,000 rows) to these Go tables
		{name: "grown_by_l8", cols: nodeCols(), rows: 1000, batch: 1000, commits: 1},
		{name: "grown_by_l12", cols: nodeCols(), rows: 1000, batch: 1000, commits: 1},
		{name: "node8192", cols: nodeCols(), rows: 8192, batch: 8192, commits: 1},
		// file.Options.Compress: LZ4 general compression of 2.2 mini-block values
		{name: "scalars_lz4", cols: scalarCols(), rows: 3000, batch: 1000, commits: 3, empty: true, fo: file.Options{MaxPageRows: 700, Compress: true}},
		{name: "nested_lz4", cols: nestedCols(), rows: 2000, batch: 500, commits: 2, fo: file.Options{MaxPageRows: 300, Compress: true}},
		{name: "node8192_lz4", cols: nodeCols(), rows: 8192, batch: 8192, commits: 1, fo: file.Options{Compress: true}},
	}
}

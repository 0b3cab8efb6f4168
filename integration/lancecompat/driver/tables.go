package main

import (
	"encoding/base64"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/omnigraph/omnigraph-worker/integration/lancecompat/canon"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
)

func listOf(t arrow.DataType) arrow.DataType {
	return arrow.ListOfField(arrow.Field{Name: "item", Type: t, Nullable: true})
}

// allTypesSchema has every Arrow type the graph schema language maps to, nullable and not.
func allTypesSchema() *arrow.Schema {
	pk := arrow.NewMetadata([]string{schema.PrimaryKeyMeta}, []string{"true"})
	f := func(n string, t arrow.DataType, nullable bool) arrow.Field {
		return arrow.Field{Name: n, Type: t, Nullable: nullable}
	}
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Metadata: pk},
		f("s", arrow.BinaryTypes.String, true),
		f("s_nn", arrow.BinaryTypes.String, false),
		f("ls", arrow.BinaryTypes.LargeString, true),
		f("b", arrow.BinaryTypes.Binary, true),
		f("lb", arrow.BinaryTypes.LargeBinary, true),
		f("flag", arrow.FixedWidthTypes.Boolean, true),
		f("flag_nn", arrow.FixedWidthTypes.Boolean, false),
		f("i32", arrow.PrimitiveTypes.Int32, true),
		f("i32_nn", arrow.PrimitiveTypes.Int32, false),
		f("i64", arrow.PrimitiveTypes.Int64, true),
		f("u32", arrow.PrimitiveTypes.Uint32, true),
		f("u64", arrow.PrimitiveTypes.Uint64, true),
		f("f32", arrow.PrimitiveTypes.Float32, true),
		f("f64", arrow.PrimitiveTypes.Float64, true),
		f("f64_nn", arrow.PrimitiveTypes.Float64, false),
		f("d32", arrow.FixedWidthTypes.Date32, true),
		f("d64", arrow.FixedWidthTypes.Date64, true),
		f("ts", &arrow.TimestampType{Unit: arrow.Microsecond}, true),
		f("vec", arrow.FixedSizeListOfField(4, arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Float32, Nullable: true}), true),
		f("vec_nn", arrow.FixedSizeListOfField(2, arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Float32, Nullable: true}), false),
		f("ls_utf8", listOf(arrow.BinaryTypes.String), true),
		f("ls_i64", listOf(arrow.PrimitiveTypes.Int64), true),
		f("ls_f64", listOf(arrow.PrimitiveTypes.Float64), true),
		f("ls_bool", listOf(arrow.FixedWidthTypes.Boolean), true),
		f("ls_d32", listOf(arrow.FixedWidthTypes.Date32), true),
	}, nil)
}

// allTypesRow is row i of the all-types table: nulls, empty strings, empty and null lists and
// null list items rotate through the ids; extremes appear at fixed ids.
func allTypesRow(i int) canon.Row {
	m := func(k, r int) bool { return i%k == r }
	null := func(cond bool, v any) any {
		if cond {
			return nil
		}
		return v
	}
	var lsUTF8 any = []any{fmt.Sprintf("a%d", i), nil, ""}
	switch {
	case m(6, 1):
		lsUTF8 = nil
	case m(6, 2):
		lsUTF8 = []any{}
	}
	u64 := strconv.FormatUint(uint64(1)<<53+uint64(i), 10)
	if i == 2 {
		u64 = "18446744073709551615"
	}
	i64 := strconv.FormatInt(int64(i)*1_000_000_007-5_000_000_000, 10)
	if i == 1 {
		i64 = "-9223372036854775808"
	}
	return canon.Row{
		"id":      strconv.Itoa(i),
		"s":       null(m(5, 1), map[bool]string{true: "", false: fmt.Sprintf("s%d ✓", i)}[m(5, 2)]),
		"s_nn":    map[bool]string{true: "", false: fmt.Sprintf("nn%d", i)}[m(4, 0)],
		"ls":      null(m(7, 3), fmt.Sprintf("large-%d", i*i)),
		"b":       null(m(4, 1), base64.StdEncoding.EncodeToString([]byte{byte(i), 0, 255, byte(i * 3)})),
		"lb":      null(m(3, 2), base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("blob%d", i)))),
		"flag":    null(m(3, 0), i%2 == 0),
		"flag_nn": i%3 == 1,
		"i32":     null(m(5, 3), float64(i*7-20)),
		"i32_nn":  float64(i * 11),
		"i64":     null(m(6, 5), i64),
		"u32":     null(m(5, 4), float64(uint32(4294967295-i))),
		"u64":     null(m(7, 0), u64),
		"f32":     null(m(4, 3), float64(i)*0.25-1),
		"f64":     null(m(5, 0), float64(i)/8),
		"f64_nn":  float64(i) * 1.5,
		"d32":     null(m(6, 3), float64(19723+i-10)),
		"d64":     null(m(6, 4), float64(1700000000000+int64(i)*86400000)),
		"ts":      null(m(8, 7), strconv.FormatInt(1700000000000000+int64(i)*1000001, 10)),
		"vec":     null(m(5, 2), []any{float64(i), float64(i) + 0.5, -float64(i), 0.0}),
		"vec_nn":  []any{float64(i) * 2, 1.0},
		"ls_utf8": lsUTF8,
		"ls_i64":  null(m(4, 2), []any{strconv.Itoa(i), nil, "-7"}[:i%3+1]),
		"ls_f64":  null(m(5, 1), []any{float64(i) / 4, 2.5}[:i%2+1]),
		"ls_bool": null(m(7, 6), []any{i%2 == 0, nil}[:i%2+1]),
		"ls_d32":  null(m(3, 1), []any{float64(i), nil}),
	}
}

func rowsRange(gen func(int) canon.Row, lo, hi int) []canon.Row {
	out := make([]canon.Row, 0, hi-lo)
	for i := lo; i < hi; i++ {
		out = append(out, gen(i))
	}
	return out
}

// plainSchema is the (id, name, age, score) shape plus a list column.
func plainSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "age", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "tags", Type: listOf(arrow.BinaryTypes.String), Nullable: true},
	}, nil)
}

func plainRow(i int) canon.Row {
	var tags any = []any{fmt.Sprintf("t%d", i%13)}
	if i%9 == 0 {
		tags = nil
	}
	var name any = fmt.Sprintf("name-%d", i)
	if i%17 == 0 {
		name = nil
	}
	return canon.Row{"id": strconv.Itoa(i), "name": name, "age": strconv.Itoa(i % 97), "score": float64(i) * 0.5, "tags": tags}
}

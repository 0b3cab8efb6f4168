// Package canon converts Arrow records to and from the canonical JSON rows that the interop
// suite's Go and Node sides exchange (see integration/lancecompat/canonical.mjs for the contract):
// 64-bit integers and timestamps as decimal strings, binary as base64, dates as integers.
package canon

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Row is one canonical row.
type Row = map[string]any

// Rows converts records to canonical rows.
func Rows(recs []arrow.Record) ([]Row, error) {
	var out []Row
	for _, rec := range recs {
		for i := 0; i < int(rec.NumRows()); i++ {
			r := Row{}
			for c, f := range rec.Schema().Fields() {
				v, err := value(rec.Column(c), i)
				if err != nil {
					return nil, fmt.Errorf("column %s: %w", f.Name, err)
				}
				r[f.Name] = v
			}
			out = append(out, r)
		}
	}
	return out, nil
}

func value(a arrow.Array, i int) (any, error) {
	if a.IsNull(i) {
		return nil, nil
	}
	switch x := a.(type) {
	case *array.Int8:
		return float64(x.Value(i)), nil
	case *array.Int16:
		return float64(x.Value(i)), nil
	case *array.Int32:
		return float64(x.Value(i)), nil
	case *array.Uint8:
		return float64(x.Value(i)), nil
	case *array.Uint16:
		return float64(x.Value(i)), nil
	case *array.Uint32:
		return float64(x.Value(i)), nil
	case *array.Int64:
		return strconv.FormatInt(x.Value(i), 10), nil
	case *array.Uint64:
		return strconv.FormatUint(x.Value(i), 10), nil
	case *array.Float32:
		return float64(x.Value(i)), nil
	case *array.Float64:
		return x.Value(i), nil
	case *array.Boolean:
		return x.Value(i), nil
	case *array.String:
		return x.Value(i), nil
	case *array.LargeString:
		return x.Value(i), nil
	case *array.Binary:
		return base64.StdEncoding.EncodeToString(x.Value(i)), nil
	case *array.LargeBinary:
		return base64.StdEncoding.EncodeToString(x.Value(i)), nil
	case *array.Date32:
		return float64(x.Value(i)), nil
	case *array.Date64:
		return float64(x.Value(i)), nil
	case *array.Timestamp:
		return strconv.FormatInt(int64(x.Value(i)), 10), nil
	case *array.FixedSizeList:
		n := int(x.DataType().(*arrow.FixedSizeListType).Len())
		return listValues(x.ListValues(), i*n, (i+1)*n)
	case *array.List:
		lo, hi := x.ValueOffsets(i)
		return listValues(x.ListValues(), int(lo), int(hi))
	case *array.LargeList:
		lo, hi := x.ValueOffsets(i)
		return listValues(x.ListValues(), int(lo), int(hi))
	}
	return nil, fmt.Errorf("type %s is not in the canonical contract", a.DataType())
}

func listValues(items arrow.Array, lo, hi int) (any, error) {
	out := make([]any, 0, hi-lo)
	for j := lo; j < hi; j++ {
		v, err := value(items, j)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Record builds an Arrow record of schema s from canonical rows (missing keys are null).
func Record(s *arrow.Schema, rows []Row) (arrow.Record, error) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer b.Release()
	for ri, r := range rows {
		for c, f := range s.Fields() {
			if err := appendValue(b.Field(c), r[f.Name]); err != nil {
				return nil, fmt.Errorf("row %d column %s: %w", ri, f.Name, err)
			}
		}
	}
	return b.NewRecord(), nil
}

func appendValue(b array.Builder, v any) error {
	if v == nil {
		b.AppendNull()
		return nil
	}
	num := func() (float64, error) {
		switch x := v.(type) {
		case float64:
			return x, nil
		case int:
			return float64(x), nil
		case json.Number:
			return x.Float64()
		}
		return 0, fmt.Errorf("want a number, got %T", v)
	}
	str := func() (string, error) {
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("want a string, got %T", v)
		}
		return s, nil
	}
	switch x := b.(type) {
	case *array.Int8Builder, *array.Int16Builder, *array.Int32Builder, *array.Uint8Builder, *array.Uint16Builder,
		*array.Uint32Builder, *array.Float32Builder, *array.Float64Builder, *array.Date32Builder, *array.Date64Builder:
		n, err := num()
		if err != nil {
			return err
		}
		switch y := x.(type) {
		case *array.Int8Builder:
			y.Append(int8(n))
		case *array.Int16Builder:
			y.Append(int16(n))
		case *array.Int32Builder:
			y.Append(int32(n))
		case *array.Uint8Builder:
			y.Append(uint8(n))
		case *array.Uint16Builder:
			y.Append(uint16(n))
		case *array.Uint32Builder:
			y.Append(uint32(n))
		case *array.Float32Builder:
			y.Append(float32(n))
		case *array.Float64Builder:
			y.Append(n)
		case *array.Date32Builder:
			y.Append(arrow.Date32(int32(n)))
		case *array.Date64Builder:
			y.Append(arrow.Date64(int64(n)))
		}
	case *array.Int64Builder:
		s, err := str()
		if err != nil {
			return err
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return err
		}
		x.Append(n)
	case *array.Uint64Builder:
		s, err := str()
		if err != nil {
			return err
		}
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return err
		}
		x.Append(n)
	case *array.TimestampBuilder:
		s, err := str()
		if err != nil {
			return err
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return err
		}
		x.Append(arrow.Timestamp(n))
	case *array.BooleanBuilder:
		t, ok := v.(bool)
		if !ok {
			return fmt.Errorf("want a bool, got %T", v)
		}
		x.Append(t)
	case *array.StringBuilder:
		s, err := str()
		if err != nil {
			return err
		}
		x.Append(s)
	case *array.LargeStringBuilder:
		s, err := str()
		if err != nil {
			return err
		}
		x.Append(s)
	case *array.BinaryBuilder:
		s, err := str()
		if err != nil {
			return err
		}
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return err
		}
		x.Append(raw)
	case *array.FixedSizeListBuilder:
		items, ok := v.([]any)
		if !ok {
			return fmt.Errorf("want an array, got %T", v)
		}
		x.Append(true)
		for _, it := range items {
			if err := appendValue(x.ValueBuilder(), it); err != nil {
				return err
			}
		}
	case *array.ListBuilder:
		items, ok := v.([]any)
		if !ok {
			return fmt.Errorf("want an array, got %T", v)
		}
		x.Append(true)
		for _, it := range items {
			if err := appendValue(x.ValueBuilder(), it); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("builder %T is not in the canonical contract", b)
	}
	return nil
}

// SortByID sorts rows by their canonical id (numerically when it is an integer string).
func SortByID(rows []Row) {
	sort.SliceStable(rows, func(i, j int) bool { return idLess(rows[i]["id"], rows[j]["id"]) })
}

func idLess(a, b any) bool {
	as, aok := a.(string)
	bs, bok := b.(string)
	if aok && bok {
		ai, e1 := strconv.ParseInt(as, 10, 64)
		bi, e2 := strconv.ParseInt(bs, 10, 64)
		if e1 == nil && e2 == nil {
			return ai < bi
		}
		return as < bs
	}
	af, _ := a.(float64)
	bf, _ := b.(float64)
	return af < bf
}

// Diff compares two row sets (sorted by id first) and describes the first difference, or "".
// Numbers are compared after rounding both sides to float32 when either is not exactly equal,
// since Float32 columns travel through JSON as float64.
func Diff(want, got []Row) string {
	want, got = append([]Row(nil), want...), append([]Row(nil), got...)
	SortByID(want)
	SortByID(got)
	if len(want) != len(got) {
		return fmt.Sprintf("want %d rows, got %d", len(want), len(got))
	}
	for i := range want {
		for k, wv := range want[i] {
			gv, ok := got[i][k]
			if !ok {
				return fmt.Sprintf("row %d (id %v): column %s missing", i, want[i]["id"], k)
			}
			if !equal(wv, gv) {
				return fmt.Sprintf("row %d (id %v): column %s: want %s, got %s", i, want[i]["id"], k, js(wv), js(gv))
			}
		}
		if len(got[i]) != len(want[i]) {
			return fmt.Sprintf("row %d (id %v): %d columns, want %d", i, want[i]["id"], len(got[i]), len(want[i]))
		}
	}
	return ""
}

func equal(a, b any) bool {
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case float64:
		y, ok := b.(float64)
		return ok && (x == y || float32(x) == float32(y) || math.IsNaN(x) && math.IsNaN(y))
	}
	return a == b
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

package rows

import (
	"encoding/base64"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/graph/pg"
)

// Export renders a table's rows (rec, in the table's Arrow schema) as batch lines, one per
// row, in the load envelope (the reference's `export` shape): node
// {"type":"T","data":{…}}, edge {"edge":"E","from":…,"to":…,"data":{…}}, data holding
// "id" and every property (null ones as null), members sorted by name. Values use the
// round-trip-safe encodings (docs/omnigraph-format.md §5.4): Date as epoch days, DateTime as epoch ms,
// Blob as "base64:<standard padded base64>", floats as the shortest decimal that reads
// back to the same value at the stored width. Build accepts the lines back unchanged and
// rebuilds an equal record. Non-finite floats and strings that are not UTF-8 (replaced by
// U+FFFD) cannot round-trip: the former are refused.
func Export(cat *pg.Catalog, tableKey string, rec arrow.Record, w io.Writer) error {
	if cat == nil {
		return fmt.Errorf("rows: nil catalog")
	}
	var tbl *pg.Table
	kind := framing.NodeRecord
	if name, ok := strings.CutPrefix(tableKey, "node:"); ok {
		n := cat.Node(name)
		if n == nil {
			return fmt.Errorf("unknown node type '%s'", name)
		}
		tbl = &n.Table
	} else if name, ok := strings.CutPrefix(tableKey, "edge:"); ok {
		e := cat.Edge(name)
		if e == nil {
			return fmt.Errorf("unknown edge type '%s'", name)
		}
		tbl, kind = &e.Table, framing.EdgeRecord
	} else {
		return fmt.Errorf("invalid export table key '%s'", tableKey)
	}
	fields := tbl.Arrow.Fields()
	if int(rec.NumCols()) != len(fields) {
		return fmt.Errorf("rows: export of %s: record has %d columns, the table %d", tableKey, rec.NumCols(), len(fields))
	}
	for i, f := range fields {
		if got := rec.Schema().Field(i); got.Name != f.Name || !arrow.TypeEqual(got.Type, f.Type) {
			return fmt.Errorf("rows: export of %s: column %d is %s %s, the table's is %s %s", tableKey, i, got.Name, got.Type, f.Name, f.Type)
		}
	}
	system := 1
	if kind == framing.EdgeRecord {
		system = 3
	}
	systemCol := func(c, row int) (string, error) {
		a, ok := rec.Column(c).(*array.String)
		if !ok || a.IsNull(row) {
			return "", fmt.Errorf("rows: export of %s: row %d has no %s", tableKey, row, fields[c].Name)
		}
		return a.Value(row), nil
	}
	r := framing.Record{Kind: kind, Type: tbl.Name, Data: make(framing.Members, len(tbl.Properties))}
	var out, scratch []byte
	ends := make([]int, len(tbl.Properties))
	for row := 0; row < int(rec.NumRows()); row++ {
		id, err := systemCol(0, row)
		if err != nil {
			return err
		}
		r.ID = &id
		if kind == framing.EdgeRecord {
			if r.From, err = systemCol(1, row); err != nil {
				return err
			}
			if r.To, err = systemCol(2, row); err != nil {
				return err
			}
		}
		scratch = scratch[:0]
		for j, p := range tbl.Properties {
			if scratch, err = appendValue(scratch, rec.Column(system+j), row); err != nil {
				return fmt.Errorf("rows: export of %s, row %d, property '%s': %w", tableKey, row, p.Name, err)
			}
			ends[j] = len(scratch)
		}
		start := 0
		for j, p := range tbl.Properties {
			r.Data[j] = framing.Member{Name: p.Name, Value: scratch[start:ends[j]:ends[j]]}
			start = ends[j]
		}
		out = append(r.AppendJSON(out), '\n')
		if len(out) >= 64<<10 {
			if _, err := w.Write(out); err != nil {
				return err
			}
			out = out[:0]
		}
	}
	if len(out) > 0 {
		_, err := w.Write(out)
		return err
	}
	return nil
}

// appendValue appends row i of arr as JSON.
func appendValue(dst []byte, arr arrow.Array, i int) ([]byte, error) {
	if arr.IsNull(i) {
		return append(dst, "null"...), nil
	}
	switch a := arr.(type) {
	case *array.String:
		return framing.AppendJSONString(dst, a.Value(i)), nil
	case *array.Boolean:
		return strconv.AppendBool(dst, a.Value(i)), nil
	case *array.Int32:
		return strconv.AppendInt(dst, int64(a.Value(i)), 10), nil
	case *array.Int64:
		return strconv.AppendInt(dst, a.Value(i), 10), nil
	case *array.Uint32:
		return strconv.AppendUint(dst, uint64(a.Value(i)), 10), nil
	case *array.Uint64:
		return strconv.AppendUint(dst, a.Value(i), 10), nil
	case *array.Float32:
		return appendFloat(dst, float64(a.Value(i)), 32)
	case *array.Float64:
		return appendFloat(dst, a.Value(i), 64)
	case *array.Date32:
		return strconv.AppendInt(dst, int64(a.Value(i)), 10), nil
	case *array.Date64:
		return strconv.AppendInt(dst, int64(a.Value(i)), 10), nil
	case *array.LargeBinary:
		return appendBlob(dst, a.Value(i)), nil
	case *array.Binary:
		return appendBlob(dst, a.Value(i)), nil
	case *array.List:
		start, end := a.ValueOffsets(i)
		return appendItems(dst, a.ListValues(), start, end)
	case *array.FixedSizeList:
		start, end := a.ValueOffsets(i)
		return appendItems(dst, a.ListValues(), start, end)
	}
	return nil, fmt.Errorf("unsupported Arrow type %s", arr.DataType())
}

func appendItems(dst []byte, values arrow.Array, start, end int64) ([]byte, error) {
	dst = append(dst, '[')
	for j := start; j < end; j++ {
		if j > start {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = appendValue(dst, values, int(j)); err != nil {
			return nil, err
		}
	}
	return append(dst, ']'), nil
}

func appendFloat(dst []byte, v float64, bits int) ([]byte, error) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil, fmt.Errorf("non-finite value %s has no JSON form", rustFloat(v))
	}
	return strconv.AppendFloat(dst, v, 'g', -1, bits), nil
}

func appendBlob(dst, data []byte) []byte {
	dst = append(dst, `"base64:`...)
	dst = base64.StdEncoding.AppendEncode(dst, data)
	return append(dst, '"')
}

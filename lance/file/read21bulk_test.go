package file

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Strings and binary without nulls are read in bulk (readVarBinary21), across pages and within
// one, of every width of offsets; a column with nulls in some pages is read by the builder from
// the pages already decoded. Every range reads what was written.
func TestBulkVarBinaryReadsWhatWasWritten(t *testing.T) {
	const n = 20_000
	value := func(i int) string {
		if i%7 == 0 {
			return ""
		}
		return fmt.Sprintf("k%d-é%s", i, strings.Repeat("x", i%5))
	}
	for _, dt := range []arrow.DataType{arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString, arrow.BinaryTypes.Binary, arrow.BinaryTypes.LargeBinary} {
		for _, nulls := range []bool{false, true} {
			as := arrow.NewSchema([]arrow.Field{{Name: "v", Type: dt, Nullable: nulls}}, nil)
			b := array.NewBuilder(memory.DefaultAllocator, dt)
			isNull := func(i int) bool { return nulls && i >= 9000 && i%3 == 0 } // nulls from the fourth page on
			for i := range n {
				switch {
				case isNull(i):
					b.AppendNull()
				case dt.ID() == arrow.STRING || dt.ID() == arrow.LARGE_STRING:
					b.(interface{ Append(string) }).Append(value(i))
				default:
					b.(interface{ Append([]byte) }).Append([]byte(value(i)))
				}
			}
			rec := buildRecord(as, b.NewArray())
			b.Release()
			s, _ := lanceSchema(t, as)
			for _, v := range []Version{V2_1, V2_2} {
				t.Run(fmt.Sprintf("%s/nulls=%v/%s", dt, nulls, v), func(t *testing.T) {
					r := mustOpen(t, writeFile(t, s, Options{Version: v, MaxPageRows: 3000}, rec))
					for _, rg := range [][2]int64{{0, n}, {0, 1}, {2999, 2}, {4500, 7845}, {8999, 3}, {19_999, 1}, {6000, 3000}} {
						got := readRange(t, r, s.Fields, rg[0], rg[1], nil)
						col := got.Column(0)
						for k := range int(rg[1]) {
							i := int(rg[0]) + k
							if col.IsNull(k) != isNull(i) {
								t.Fatalf("rows %v: row %d null %v", rg, i, col.IsNull(k))
							}
							if isNull(i) {
								continue
							}
							var val string
							switch c := col.(type) {
							case *array.String:
								val = c.Value(k)
							case *array.LargeString:
								val = c.Value(k)
							case *array.Binary:
								val = string(c.Value(k))
							case *array.LargeBinary:
								val = string(c.Value(k))
							}
							if val != value(i) {
								t.Fatalf("rows %v: row %d = %q, want %q", rg, i, val, value(i))
							}
						}
						if err := col.(interface{ ValidateFull() error }).ValidateFull(); err != nil {
							t.Fatalf("rows %v: %v", rg, err)
						}
						got.Release()
					}
				})
			}
			rec.Release()
		}
	}
}

// The bulk read checks each value as UTF-8 as the builder's path does: a value that splits a
// rune is refused, naming it; bytes that are no UTF-8 leave the page to the builder's path,
// which names the value.
func TestBulkStringsCheckEachValue(t *testing.T) {
	page := func(offs []uint64, data string) []pageRows {
		n := uint64(len(offs) - 1)
		return []pageRows{{pg: &page21{rows: n, vals: &vals21{n: n, variable: true, offs: offs, data: []byte(data)}}, count: n}}
	}
	if _, _, err := readVarBinary21(arrow.BinaryTypes.String, page([]uint64{0, 1, 2}, "é"), 2); err == nil || !strings.Contains(err.Error(), "value 1 is not UTF-8") {
		t.Fatalf("a split rune: %v", err)
	}
	if _, ok, err := readVarBinary21(arrow.BinaryTypes.String, page([]uint64{0, 1, 2}, "a\xff"), 2); ok || err != nil {
		t.Fatalf("bytes that are no UTF-8: ok %v, %v; want the builder's path", ok, err)
	}
	arr, ok, err := readVarBinary21(arrow.BinaryTypes.Binary, page([]uint64{0, 1, 2}, "a\xff"), 2)
	if !ok || err != nil || string(arr.(*array.Binary).Value(1)) != "\xff" {
		t.Fatalf("binary is not UTF-8: ok %v, %v", ok, err)
	}
	arr.Release()
}

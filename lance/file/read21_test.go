package file

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
)

// The fixtures under testdata/v21 were written by the official engines (Lance 8, 10, 12; see
// integration/lancecompat/fixtures21.mjs); <table>.json holds the rows as canonical JSON.
var fixtureTables21 = []string{"main", "vec", "huge", "tiny"}

type fixture21 struct {
	name string
	file []byte
	rows []map[string]any
}

func loadFixtures21(t testing.TB) []fixture21 {
	t.Helper()
	want := map[string][]map[string]any{}
	for _, tb := range fixtureTables21 {
		b, err := os.ReadFile(filepath.Join("testdata", "v21", tb+".json"))
		if err != nil {
			t.Fatal(err)
		}
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var rows []map[string]any
		if err := d.Decode(&rows); err != nil {
			t.Fatal(err)
		}
		want[tb] = rows
	}
	dirs, err := filepath.Glob(filepath.Join("testdata", "v21", "lance*"))
	if err != nil || len(dirs) != 6 {
		t.Fatalf("fixture directories %v: %v", dirs, err)
	}
	var out []fixture21
	for _, d := range dirs {
		for _, tb := range fixtureTables21 {
			b, err := os.ReadFile(filepath.Join(d, tb+".lance"))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fixture21{name: filepath.Base(d) + "/" + tb, file: b, rows: want[tb]})
		}
	}
	return out
}

// canon21 renders value i of arr as canonical.mjs does: integers up to 32 bits as numbers,
// 64-bit integers and timestamps as decimal strings, dates as numbers, lists as arrays.
func canon21(arr arrow.Array, i int) any {
	if arr.IsNull(i) {
		return nil
	}
	switch a := arr.(type) {
	case *array.Boolean:
		return a.Value(i)
	case *array.Int8:
		return json.Number(strconv.FormatInt(int64(a.Value(i)), 10))
	case *array.Int16:
		return json.Number(strconv.FormatInt(int64(a.Value(i)), 10))
	case *array.Int32:
		return json.Number(strconv.FormatInt(int64(a.Value(i)), 10))
	case *array.Uint8:
		return json.Number(strconv.FormatUint(uint64(a.Value(i)), 10))
	case *array.Uint16:
		return json.Number(strconv.FormatUint(uint64(a.Value(i)), 10))
	case *array.Uint32:
		return json.Number(strconv.FormatUint(uint64(a.Value(i)), 10))
	case *array.Int64:
		return strconv.FormatInt(a.Value(i), 10)
	case *array.Uint64:
		return strconv.FormatUint(a.Value(i), 10)
	case *array.Timestamp:
		return strconv.FormatInt(int64(a.Value(i)), 10)
	case *array.Date32:
		return json.Number(strconv.FormatInt(int64(a.Value(i)), 10))
	case *array.Date64:
		return json.Number(strconv.FormatInt(int64(a.Value(i)), 10))
	case *array.Float32:
		return float64(a.Value(i))
	case *array.Float64:
		return a.Value(i)
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	case *array.FixedSizeList:
		n := int(a.DataType().(*arrow.FixedSizeListType).Len())
		out := make([]any, n)
		for k := range out {
			out[k] = canon21(a.ListValues(), i*n+k)
		}
		return out
	case array.ListLike:
		lo, hi := a.ValueOffsets(i)
		out := []any{}
		for k := lo; k < hi; k++ {
			out = append(out, canon21(a.ListValues(), int(k)))
		}
		return out
	}
	return fmt.Sprintf("unsupported %s", arr.DataType())
}

func sameCell21(want, got any) bool {
	switch w := want.(type) {
	case nil:
		return got == nil
	case json.Number:
		switch g := got.(type) {
		case json.Number:
			return w == g
		case float64:
			f, err := w.Float64()
			return err == nil && (f == g || (math.IsNaN(f) && math.IsNaN(g)))
		}
		return false
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for k := range w {
			if !sameCell21(w[k], g[k]) {
				return false
			}
		}
		return true
	}
	return want == got
}

// checkRows21 compares rec (rows [off, off+n) of the fixture) value by value.
func checkRows21(t *testing.T, what string, fx fixture21, rec arrow.Record, off int) {
	t.Helper()
	for c, f := range rec.Schema().Fields() {
		col := rec.Column(c)
		for i := 0; i < int(rec.NumRows()); i++ {
			want, got := fx.rows[off+i][f.Name], canon21(col, i)
			if !sameCell21(want, got) {
				t.Fatalf("%s: %s row %d: want %v, got %v", what, f.Name, off+i, want, got)
			}
		}
	}
}

func TestRead21Fixtures(t *testing.T) {
	ctx := context.Background()
	for _, fx := range loadFixtures21(t) {
		t.Run(fx.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			r, err := Open(ctx, BytesSource(fx.file), fx.name)
			if err != nil {
				t.Fatal(err)
			}
			wantV := V2_1
			if filepath.Base(filepath.Dir(fx.name+"/x")) != "" && bytes.Contains([]byte(fx.name), []byte("v2.2")) {
				wantV = V2_2
			}
			if r.Version() != wantV {
				t.Fatalf("version %s, want %s", r.Version(), wantV)
			}
			n := int(r.NumRows())
			if n != len(fx.rows) {
				t.Fatalf("%d rows, want %d", n, len(fx.rows))
			}
			fields := r.Schema().Fields
			rec, err := r.Read(ctx, fields, nil, 0, int64(n), mem)
			if err != nil {
				t.Fatal(err)
			}
			checkRows21(t, "full read", fx, rec, 0)
			rec.Release()
			// every column alone, and ranges at the edges and across chunk boundaries (1024
			// values per bitpacked chunk, fewer for strings)
			ranges := [][2]int{{0, 1}, {n / 2, 1}, {n - 1, 1}, {0, n}, {1, n - 2}}
			if n > 1100 {
				ranges = append(ranges, [2]int{1000, 100}, [2]int{511, 514}, [2]int{1023, 2}, [2]int{257, 700})
			}
			for _, f := range fields {
				for _, rg := range ranges {
					rec, err := r.Read(ctx, []*schema.Field{f}, nil, int64(rg[0]), int64(rg[1]), mem)
					if err != nil {
						t.Fatalf("%s [%d,+%d): %v", f.Name, rg[0], rg[1], err)
					}
					checkRows21(t, fmt.Sprintf("%s [%d,+%d)", f.Name, rg[0], rg[1]), fx, rec, rg[0])
					rec.Release()
				}
			}
			// a projection in another order, through a manifest-style column map (leaf ids)
			leafCol := map[int32]int{}
			i := 0
			for _, f := range r.Schema().Flatten() {
				if len(f.Children) == 0 {
					leafCol[f.ID] = i
					i++
				}
			}
			rev := make([]*schema.Field, 0, len(fields))
			for k := len(fields) - 1; k >= 0; k-- {
				rev = append(rev, fields[k])
			}
			rec, err = r.Read(ctx, rev, func(id int32) (int, bool) { c, ok := leafCol[id]; return c, ok }, 0, int64(n), mem)
			if err != nil {
				t.Fatal(err)
			}
			checkRows21(t, "reversed projection", fx, rec, 0)
			rec.Release()
			// a field the file lacks reads as nulls
			rec, err = r.Read(ctx, fields[:1], func(int32) (int, bool) { return 0, false }, 0, int64(n), mem)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Column(0).NullN() != n {
				t.Fatalf("missing column: %d nulls of %d", rec.Column(0).NullN(), n)
			}
			rec.Release()
		})
	}
}

// A file whose footer names a version other than 2.0, 2.1, 2.2 is refused with the version
// named; a 2.1 file relabelled 2.0 is refused because its pages are not 2.0 pages.
func TestOpen21Versions(t *testing.T) {
	fx := loadFixtures21(t)[0]
	for _, v := range []Version{{2, 3}, {0, 1}, {0, 2}, {3, 0}} {
		b := bytes.Clone(fx.file)
		putFooterVersion(b, v)
		_, err := Open(context.Background(), BytesSource(b), "f")
		var fe *FormatError
		var ue *UnsupportedVersionError
		if !errors.As(err, &fe) || !errors.As(err, &ue) || ue.Version != v || ue.Op != "read" {
			t.Fatalf("footer %s: %v", v, err)
		}
	}
	b := bytes.Clone(fx.file)
	putFooterVersion(b, Version{2, 0})
	if _, err := Open(context.Background(), BytesSource(b), "f"); !isFormatError(err) {
		t.Fatalf("2.1 pages in a 2.0 file: %v", err)
	}
	for _, v := range Known {
		if !Readable(v) {
			t.Fatalf("%s not readable", v)
		}
	}
}

func putFooterVersion(b []byte, v Version) {
	end := len(b) - footerSize
	b[end+32], b[end+33] = byte(v.Major), byte(v.Major>>8)
	b[end+34], b[end+35] = byte(v.Minor), byte(v.Minor>>8)
}

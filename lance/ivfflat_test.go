package lance

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/lance/internal/pb"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// ivfFixtures are tables on which an official engine built IVF_FLAT (one partition, L2) on
// column v (testdata/ivfflat/make.mjs): 310 rows of 8-dimensional vectors with stable row ids,
// one deleted, a null vector, one with a NaN and one with a null element.
var ivfFixtures = []string{"lance10-v2.0.lance", "lance12-v2.1.lance"}

func openIVFFixture(t *testing.T, name string) *Dataset {
	t.Helper()
	src := filepath.Join("testdata", "ivfflat", name)
	dst := filepath.Join(t.TempDir(), name)
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if e.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := storage.Open(t.Context(), dst)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	d, err := Open(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// ivfFile is one index file as read back: its version, schema, rows and global buffer 1.
type ivfFile struct {
	version file.Version
	schema  *schema.Schema
	rec     arrow.Record
	ivf     []byte
}

func readIVFFile(t *testing.T, d *Dataset, x *Index, name string) ivfFile {
	t.Helper()
	ctx := context.Background()
	r := openIndexFile(t, d, x, name)
	rec, err := r.Read(ctx, r.Schema().Fields, nil, 0, r.NumRows(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rec.Release)
	if r.NumGlobalBuffers() != 2 {
		t.Fatalf("%s of %s: %d global buffers", name, x.Name, r.NumGlobalBuffers())
	}
	g, err := r.GlobalBuffer(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	return ivfFile{version: r.Version(), schema: r.Schema(), rec: rec, ivf: g}
}

// ivfMessage is a decoded lance.index.pb.IVF.
type ivfMessage struct {
	offsets, lengths []uint64
	tensorType       uint64
	shape            []uint64
	centroid         []float32
	loss             *float64
}

func decodeIVF(t *testing.T, b []byte) ivfMessage {
	t.Helper()
	var m ivfMessage
	packed := func(b []byte) []uint64 {
		var out []uint64
		for len(b) > 0 {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				t.Fatal("bad varint")
			}
			out, b = append(out, v), b[n:]
		}
		return out
	}
	err := pb.Walk(b, func(f pb.Field) error {
		switch f.Num {
		case 2:
			m.offsets = packed(f.Bytes)
		case 3:
			m.lengths = packed(f.Bytes)
		case 4:
			return pb.Walk(f.Bytes, func(g pb.Field) error {
				switch g.Num {
				case 1:
					m.tensorType = g.Varint
				case 2:
					m.shape = packed(g.Bytes)
				case 3:
					for i := 0; i+4 <= len(g.Bytes); i += 4 {
						m.centroid = append(m.centroid, math.Float32frombits(binary.LittleEndian.Uint32(g.Bytes[i:])))
					}
				}
				return nil
			})
		case 5:
			v := math.Float64frombits(f.Varint)
			m.loss = &v
		default:
			t.Fatalf("IVF message field %d", f.Num)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// vectorDetails decodes a VectorIndexDetails: its field numbers in order (map entries once)
// and the runtime hints.
func vectorDetails(t *testing.T, b []byte) ([]int, map[string]string) {
	t.Helper()
	var nums []int
	hints := map[string]string{}
	err := pb.Walk(b, func(f pb.Field) error {
		if len(nums) == 0 || nums[len(nums)-1] != int(f.Num) {
			nums = append(nums, int(f.Num))
		}
		if f.Num == 9 {
			var k, v string
			if err := pb.Walk(f.Bytes, func(g pb.Field) error {
				if g.Num == 1 {
					k = g.Str()
				} else {
					v = g.Str()
				}
				return nil
			}); err != nil {
				return err
			}
			hints[k] = v
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return nums, hints
}

func fieldsOf(s *schema.Schema) string {
	var out string
	for _, f := range s.Flatten() {
		out += fmt.Sprintf("[%d %d %q %s nullable=%v] ", f.ID, f.ParentID, f.Name, f.LogicalType, f.Nullable)
	}
	return out
}

// The Go-built IVF_FLAT is the engine's, file for file: on a table an official engine indexed,
// the index Go builds beside the engine's has the same files, schemas, schema metadata,
// global buffers, stored rows (row ids and vectors, in order, without the null and non-finite
// vectors) and index metadata. Only the centroid differs: the engine trains it on a sample.
func TestIVFFlatMatchesEngine(t *testing.T) {
	for _, name := range ivfFixtures {
		t.Run(name, func(t *testing.T) {
			d := openIVFFixture(t, name)
			eng := d.VectorIndex("v")
			if eng == nil || eng.Name != "v_idx" {
				t.Fatalf("the fixture's vector index: %+v", eng)
			}
			s, err := d.StageIVFFlatIndex(t.Context(), "v", IndexOptions{Name: "go_idx"})
			d = commit(t, d, s, err)
			var gox *Index
			for i := range d.Indices() {
				if d.Indices()[i].Name == "go_idx" {
					gox = &d.Indices()[i]
				}
			}
			eng = d.VectorIndex("v") // the first vector index on v: still the engine's
			if gox == nil || eng.Name != "v_idx" {
				t.Fatalf("indices %v", indexNames(d))
			}

			// The index metadata.
			if !slices.Equal(gox.Fields, eng.Fields) || !slices.Equal(gox.Fragments, eng.Fragments) ||
				*gox.IndexVersion != *eng.IndexVersion || gox.Details.TypeURL != eng.Details.TypeURL ||
				gox.DatasetVersion != d.Version()-1 || gox.CreatedAt == nil {
				t.Fatalf("Go index %+v, engine's %+v", gox, eng)
			}
			gn, gh := vectorDetails(t, gox.Details.Value)
			en, eh := vectorDetails(t, eng.Details.Value)
			if fmt.Sprint(gn, gh) != fmt.Sprint(en, eh) {
				t.Fatalf("details: Go fields %v hints %v, engine's %v %v", gn, gh, en, eh)
			}

			for _, fn := range []string{ivfIndexFile, ivfAuxFile} {
				g, e := readIVFFile(t, d, gox, fn), readIVFFile(t, d, eng, fn)
				if g.version != e.version {
					t.Fatalf("%s: version %s, engine's %s", fn, g.version, e.version)
				}
				if fieldsOf(g.schema) != fieldsOf(e.schema) {
					t.Fatalf("%s: fields\n%s\nengine's\n%s", fn, fieldsOf(g.schema), fieldsOf(e.schema))
				}
				if fmt.Sprint(g.schema.Metadata) != fmt.Sprint(e.schema.Metadata) {
					t.Fatalf("%s: metadata %q, engine's %q", fn, g.schema.Metadata, e.schema.Metadata)
				}
				if !array.RecordEqual(g.rec, e.rec) {
					t.Fatalf("%s: rows differ: Go %d, engine %d", fn, g.rec.NumRows(), e.rec.NumRows())
				}
				gm, em := decodeIVF(t, g.ivf), decodeIVF(t, e.ivf)
				if fmt.Sprint(gm.offsets, gm.lengths, gm.tensorType, gm.shape, len(gm.centroid), gm.loss != nil) !=
					fmt.Sprint(em.offsets, em.lengths, em.tensorType, em.shape, len(em.centroid), em.loss != nil) {
					t.Fatalf("%s: IVF %+v, engine's %+v", fn, gm, em)
				}
				if fn == ivfAuxFile {
					if g.rec.NumRows() != 306 || !slices.Equal(g.ivf, e.ivf) {
						t.Fatalf("storage of %d rows, IVF %x, engine's %x", g.rec.NumRows(), g.ivf, e.ivf)
					}
					continue
				}
				// The centroids: each the mean of its vectors, the engine's of a sample.
				for j := range gm.centroid {
					if math.Abs(float64(gm.centroid[j]-em.centroid[j])) > 0.05 {
						t.Fatalf("centroid %v, engine's %v", gm.centroid, em.centroid)
					}
				}
			}
		})
	}
}

// ivfTable is a table of n rows: id and an 8-dimensional vector column v (nullable), row i's
// vector i/n + j; ids divisible by 7 have a null vector, id 3 a NaN element.
func ivfTable(t *testing.T, ids []int64, opts CreateOptions) *Dataset {
	t.Helper()
	d, err := Create(t.Context(), memStore(t), ivfSchema(t), ivfRows(ids), opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var ivfArrow = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "v", Type: arrow.FixedSizeListOf(8, arrow.PrimitiveTypes.Float32), Nullable: true},
}, nil)

func ivfSchema(t *testing.T) *schema.Schema {
	s, err := schema.FromArrow(ivfArrow)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ivfVector(id int64) []float32 {
	v := make([]float32, 8)
	for j := range v {
		v[j] = float32(id)/100 + float32(j)
	}
	if id == 3 {
		v[2] = float32(math.NaN())
	}
	return v
}

func ivfRows(ids []int64) []arrow.Record {
	b := array.NewRecordBuilder(memory.DefaultAllocator, ivfArrow)
	defer b.Release()
	vb := b.Field(1).(*array.FixedSizeListBuilder)
	for _, id := range ids {
		b.Field(0).(*array.Int64Builder).Append(id)
		if id%7 == 0 {
			vb.AppendNull()
			continue
		}
		vb.Append(true)
		vb.ValueBuilder().(*array.Float32Builder).AppendValues(ivfVector(id), nil)
	}
	return []arrow.Record{b.NewRecord()}
}

// The build stores every live, finite vector of every fragment with its row id, in scan order,
// and the centroid is their mean; later writes leave the index covering the fragments it was
// built on.
func TestIVFFlatIndexFiles(t *testing.T) {
	for _, stable := range []bool{true, false} {
		t.Run(fmt.Sprintf("stable=%v", stable), func(t *testing.T) {
			ctx := t.Context()
			d := ivfTable(t, seq(0, 40), CreateOptions{DisableStableRowIDs: !stable})
			s, err := d.StageAppend(ctx, ivfRows(seq(40, 60)), StageOptions{})
			d = commit(t, d, s, err)
			s, err = d.StageDelete(ctx, In("id", 5, 45), StageOptions{})
			d = commit(t, d, s, err)
			if d.VectorIndex("v") != nil {
				t.Fatal("a vector index before the build")
			}
			s, err = d.StageIVFFlatIndex(ctx, "v", IndexOptions{})
			d = commit(t, d, s, err)
			x := d.VectorIndex("v")
			if x == nil || x.Name != "v_idx" || x.Kind() != "Vector" || !x.IsVector() || fmt.Sprint(x.Fragments) != "[0 1]" ||
				x.DatasetVersion != 3 || *x.IndexVersion != 1 {
				t.Fatalf("index %+v", x)
			}
			var want []int64
			for _, id := range seq(0, 60) {
				if id%7 != 0 && id != 3 && id != 5 && id != 45 {
					want = append(want, id)
				}
			}
			aux := readIVFFile(t, d, x, ivfAuxFile)
			ids := aux.rec.Column(0).(*array.Uint64).Uint64Values()
			vecs := aux.rec.Column(1).(*array.FixedSizeList)
			vals := vecs.ListValues().(*array.Float32).Float32Values()
			if len(ids) != len(want) {
				t.Fatalf("%d rows stored, want %d", len(ids), len(want))
			}
			var mean [8]float64
			for i, id := range want {
				// Row ids: stable ids are 0, 1, … in insertion order; addresses name fragment 1
				// from 1<<32.
				wantID := uint64(id)
				if !stable && id >= 40 {
					wantID = 1<<32 | uint64(id-40)
				}
				if ids[i] != wantID || !slices.Equal(vals[i*8:(i+1)*8], ivfVector(id)) {
					t.Fatalf("row %d: id %d vector %v, want %d %v", i, ids[i], vals[i*8:(i+1)*8], wantID, ivfVector(id))
				}
				for j, v := range ivfVector(id) {
					mean[j] += float64(v) / float64(len(want))
				}
			}
			m := decodeIVF(t, readIVFFile(t, d, x, ivfIndexFile).ivf)
			if fmt.Sprint(m.offsets, m.lengths, m.tensorType, m.shape) != "[0] [0] 2 [1 8]" || m.loss == nil || *m.loss <= 0 {
				t.Fatalf("IVF model %+v", m)
			}
			for j := range mean {
				if math.Abs(float64(m.centroid[j])-mean[j]) > 1e-5 {
					t.Fatalf("centroid %v, mean %v", m.centroid, mean)
				}
			}
			if a := decodeIVF(t, aux.ivf); fmt.Sprint(a.offsets, a.lengths, a.shape, a.loss) != fmt.Sprintf("[0] [%d] [] <nil>", len(want)) {
				t.Fatalf("storage IVF %+v", a)
			}

			// An append is not covered; a delete keeps the index.
			s, err = d.StageAppend(ctx, ivfRows(seq(60, 70)), StageOptions{})
			d = commit(t, d, s, err)
			s, err = d.StageDelete(ctx, In("id", 10), StageOptions{})
			d = commit(t, d, s, err)
			if x := d.VectorIndex("v"); x == nil || fmt.Sprint(x.Fragments) != "[0 1]" {
				t.Fatalf("after writes: %+v", x)
			}
			if rows, frags := d.Uncovered(d.VectorIndex("v")); rows != 10 || frags != 1 {
				t.Fatalf("uncovered %d rows in %d fragments", rows, frags)
			}
			// A second build replaces the first by name and covers everything.
			s, err = d.StageIVFFlatIndex(ctx, "v", IndexOptions{})
			d = commit(t, d, s, err)
			if len(d.Indices()) != 1 || fmt.Sprint(d.VectorIndex("v").Fragments) != "[0 1 2]" {
				t.Fatalf("after the rebuild: %v", d.Indices())
			}
		})
	}
}

func TestIVFFlatRefuses(t *testing.T) {
	ctx := t.Context()
	d := ivfTable(t, []int64{0, 7, 14}, CreateOptions{}) // every vector null
	for _, col := range []string{"nope", "id", "v"} {
		s, err := d.StageIVFFlatIndex(ctx, col, IndexOptions{})
		var ie *IndexError
		if s != nil || !errors.As(err, &ie) {
			t.Fatalf("an IVF_FLAT on %s: %v", col, err)
		}
	}
}

// A staged build moves onto a version with more rows (Staged.Rebase), as a BTREE build does:
// the index covers the fragments it read, and the appended ones stay uncovered.
func TestIVFFlatRebasesPastAppends(t *testing.T) {
	ctx := t.Context()
	d := ivfTable(t, seq(1, 30), CreateOptions{})
	s, err := d.StageIVFFlatIndex(ctx, "v", IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := d.StageAppend(ctx, ivfRows(seq(30, 40)), StageOptions{})
	later := commit(t, d, a, err)
	if err := s.Rebase(later); err != nil {
		t.Fatal(err)
	}
	later = commit(t, later, s, nil)
	x := later.VectorIndex("v")
	if x == nil || fmt.Sprint(x.Fragments) != "[0]" || x.DatasetVersion != 1 {
		t.Fatalf("rebased index %+v", x)
	}
	if rows, _ := later.Uncovered(x); rows != 10 {
		t.Fatalf("%d rows uncovered, want the 10 appended", rows)
	}
}

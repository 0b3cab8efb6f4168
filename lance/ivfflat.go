package lance

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/lance/internal/pb"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
)

// An IVF_FLAT vector index of one partition with L2 distance, as Lance 8, 10 and 12 write the
// one `Index.ivfFlat({numPartitions: 1, distanceType: "l2"})` builds (docs/lance-indices.md):
// two Lance files under _indices/<uuid>/, at the table's data file version.
//
//   - index.idx: the IVF model. No rows; its one column is "__flat_marker" (uint64, not null).
//     Global buffer 1 is a lance.index.pb.IVF message with the centroid (a float32 tensor
//     [1, dim]), the partition's offset 0 and length 0 (a flat sub-index has no rows), and the
//     k-means loss. Schema metadata: "lance:ivf" (the global buffer's index, "1"),
//     "lance:index" ({"type":"IVF_FLAT","distance_type":"l2"}) and "lance:flat" ([""], one
//     partition's sub-index metadata).
//   - auxiliary.idx: the flat storage, every indexed vector with its row id, partition by
//     partition. Columns "_rowid" (uint64) and "flat" (the column's fixed_size_list<float32>,
//     not null). Global buffer 1 is an IVF message without centroids: offset 0 and length n.
//     Schema metadata: "lance:ivf" ("1"), "distance_type" ("l2") and "storage_metadata"
//     (["{\"dim\":D}"]).
//
// The engine answers a nearest query from it exactly: it probes the one partition and computes
// the distance of the query to every stored vector, the raw values, not residuals.
const (
	ivfIndexFile = "index.idx"
	ivfAuxFile   = "auxiliary.idx"
	// VectorDetailsType is the type URL of a vector index's details.
	VectorDetailsType = "/lance.index.pb.VectorIndexDetails"
	// ivfFlatIndexVersion is the index_version the engines record for an IVF_FLAT index.
	ivfFlatIndexVersion = 1
)

// ivfRuntimeHints are the build parameters the engines record in an IVF_FLAT index's details
// (VectorIndexDetails.runtime_hints), their defaults: Lance reads them back when it retrains
// the index (optimize), so an index built here retrains as one the engine built.
var ivfRuntimeHints = map[string]string{
	"lance.ivf.max_iters":                     "50",
	"lance.ivf.sample_rate":                   "256",
	"lance.ivf.shuffle_partition_batches":     "10240",
	"lance.ivf.shuffle_partition_concurrency": "2",
	"lance.skip_transpose":                    "false",
}

// ivfFlatDetails is the VectorIndexDetails of an IVF_FLAT index with L2 distance, field for
// field as the engines write it: metric L2 (0, omitted), an empty field 8 (the flat storage,
// no compression) and the runtime hints as map field 9, here sorted by key.
func ivfFlatDetails() []byte {
	var e pb.Encoder
	e.Message(8, func(*pb.Encoder) {})
	e.StringMap(9, ivfRuntimeHints)
	return e.B
}

// StageIVFFlatIndex builds an IVF_FLAT vector index on column over every live row of this
// version: one IVF partition, flat (unquantized) storage, L2 distance, the index the reference
// OmniGraph builds on a vector property (ivf_flat(1, L2)). It returns the CreateIndex
// transaction that lists it (replacing an index of the same name); its files are written with
// the transaction, under a new uuid, and nothing is visible until Commit.
//
// The column must be a top-level fixed_size_list<float32, dim>. As the engine does, the index
// holds only the vectors it can compare: a null vector, or one with a null, NaN or infinite
// element, is left out (and a nearest query through the index does not return its row). The
// index covers every fragment of this version; rows appended later are in fragments it does
// not cover, which the engines search by brute force beside it.
func (d *Dataset) StageIVFFlatIndex(ctx context.Context, column string, o IndexOptions) (*Staged, error) {
	return d.stageIndex(ctx, column, o, d.buildIVFFlat)
}

// VectorIndex is the version's vector index (of any kind: IVF_FLAT, IVF_PQ, IVF_HNSW_*, …) on
// exactly the named column, or nil.
func (d *Dataset) VectorIndex(column string) *Index {
	return d.indexOn(column, (*Index).IsVector)
}

// ivfVectors is what an IVF_FLAT build stores: the row ids and their vectors, flat.
type ivfVectors struct {
	dim  int
	ids  []uint64
	vals []float32 // len(ids) * dim
}

// buildIVFFlat encodes one column's IVF_FLAT files into w and returns the index's metadata.
func (d *Dataset) buildIVFFlat(ctx context.Context, column, name string, fo file.Options, w *fileWrites) (Index, error) {
	if name == "" {
		name = column + "_idx"
	}
	refuse := func(reason string) (Index, error) {
		return Index{}, &IndexError{Dataset: d.dir.URI(), Index: name, Op: OpCreateIndex, Reason: reason}
	}
	f := d.Schema().Field(column)
	if f == nil {
		return refuse(fmt.Sprintf("no column %q", column))
	}
	af, err := f.ToArrow()
	if err != nil {
		return Index{}, err
	}
	ft, ok := af.Type.(*arrow.FixedSizeListType)
	if !ok || ft.Elem().ID() != arrow.FLOAT32 || ft.Len() < 1 {
		return refuse(fmt.Sprintf("column %q is %s: an IVF_FLAT index here is on a fixed_size_list<float32, dim>", column, af.Type))
	}
	// The vectors are gathered into one buffer sized for the table's rows as the scan reads
	// them, each batch let go once gathered: read whole first and appended, the buffer grew a
	// quarter at a time (about five times the vectors allocated) beside all of the records.
	sc, err := d.Scan(ctx, ScanOptions{Columns: []string{column}, WithRowID: true})
	if err != nil {
		return Index{}, err
	}
	rows := int(min(d.CountRows(), math.MaxInt32))
	vs := ivfVectors{dim: int(ft.Len()), ids: make([]uint64, 0, rows), vals: make([]float32, 0, rows*int(ft.Len()))}
	for {
		r, err := sc.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return Index{}, err
		}
		vs.add(r.Column(0).(*array.FixedSizeList), r.Column(1).(*array.Uint64).Uint64Values())
		r.Release()
	}
	if len(vs.ids) == 0 {
		return refuse(fmt.Sprintf("column %q has no vector to index (none that is non-null and finite)", column))
	}

	x, err := d.newIndexMeta(f.ID, name, &IndexDetails{TypeURL: VectorDetailsType, Value: ivfFlatDetails()}, ivfFlatIndexVersion)
	if err != nil {
		return Index{}, err
	}

	idx, err := vs.indexFile(fo)
	if err != nil {
		return Index{}, fmt.Errorf("lance: IVF_FLAT index on %s: %s: %w", column, ivfIndexFile, err)
	}
	aux, err := vs.auxFile(fo)
	if err != nil {
		return Index{}, fmt.Errorf("lance: IVF_FLAT index on %s: %s: %w", column, ivfAuxFile, err)
	}
	w.add(x.Dir()+ivfIndexFile, idx, "lance.write_index_file", "index file")
	w.add(x.Dir()+ivfAuxFile, aux, "lance.write_index_file", "index file")
	return x, nil
}

// add appends the vectors of a that the engine indexes: non-null, every element non-null and
// finite (Lance's KeepFiniteVectors), with their row ids.
func (vs *ivfVectors) add(a *array.FixedSizeList, ids []uint64) {
	items := a.ListValues().(*array.Float32)
	vals := items.Float32Values()
	off := a.Offset() // a's own offset; its items start at item (off+i)*dim
	for i := 0; i < a.Len(); i++ {
		if a.IsNull(i) {
			continue
		}
		lo := (off + i) * vs.dim
		ok := true
		for j := lo; j < lo+vs.dim; j++ {
			if items.IsNull(j) || math.IsNaN(float64(vals[j])) || math.IsInf(float64(vals[j]), 0) {
				ok = false
				break
			}
		}
		if ok {
			vs.ids = append(vs.ids, ids[i])
			vs.vals = append(vs.vals, vals[lo:lo+vs.dim]...)
		}
	}
}

// centroid is the one partition's centroid, the mean of the vectors (what k-means with one
// cluster converges to), and the k-means loss: the sum of the squared L2 distances to it.
func (vs *ivfVectors) centroid() ([]float32, float64) {
	sum := make([]float64, vs.dim)
	n := len(vs.ids)
	for r := range n {
		for j, v := range vs.vals[r*vs.dim : (r+1)*vs.dim] {
			sum[j] += float64(v)
		}
	}
	c := make([]float32, vs.dim)
	for j := range c {
		c[j] = float32(sum[j] / float64(n))
	}
	loss := 0.0
	for r := range n {
		for j, v := range vs.vals[r*vs.dim : (r+1)*vs.dim] {
			dv := float64(v) - float64(c[j])
			loss += dv * dv
		}
	}
	return c, loss
}

// ivfModel encodes a lance.index.pb.IVF message of one partition: offset 0, length n, and with
// centroid non-nil the centroid tensor and the loss.
func ivfModel(n int, centroid []float32, loss float64) []byte {
	var e pb.Encoder
	e.B = protowire.AppendTag(e.B, 2, protowire.BytesType) // offsets: [0], packed
	e.B = protowire.AppendBytes(e.B, protowire.AppendVarint(nil, 0))
	e.B = protowire.AppendTag(e.B, 3, protowire.BytesType) // lengths: [n], packed
	e.B = protowire.AppendBytes(e.B, protowire.AppendVarint(nil, uint64(n)))
	if centroid == nil {
		return e.B
	}
	e.Message(4, func(t *pb.Encoder) {
		const float32Tensor = 2 // lance.index.pb.Tensor.DataType.FLOAT32
		t.Uint(1, float32Tensor)
		t.PackedUints(2, []uint64{1, uint64(len(centroid))})
		data := make([]byte, 0, 4*len(centroid))
		for _, v := range centroid {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
		}
		t.BytesAlways(3, data)
	})
	e.B = protowire.AppendTag(e.B, 5, protowire.Fixed64Type) // loss: optional, always present
	e.B = protowire.AppendFixed64(e.B, math.Float64bits(loss))
	return e.B
}

// indexFile is index.idx: the IVF model, no rows.
func (vs *ivfVectors) indexFile(fo file.Options) ([]byte, error) {
	c, loss := vs.centroid()
	md := arrow.NewMetadata(
		[]string{"lance:flat", "lance:index", "lance:ivf"},
		[]string{`[""]`, `{"type":"IVF_FLAT","distance_type":"l2"}`, "1"})
	as := arrow.NewSchema([]arrow.Field{{Name: "__flat_marker", Type: arrow.PrimitiveTypes.Uint64}}, &md)
	b := array.NewUint64Builder(memory.DefaultAllocator)
	defer b.Release()
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecord(as, []arrow.Array{col}, 0)
	defer rec.Release()
	return encodeIndexFileGlobals(rec, fo, ivfModel(0, c, loss))
}

// auxFile is auxiliary.idx: the row ids and vectors of the one partition.
func (vs *ivfVectors) auxFile(fo file.Options) ([]byte, error) {
	md := arrow.NewMetadata(
		[]string{"distance_type", "lance:ivf", "storage_metadata"},
		[]string{"l2", "1", fmt.Sprintf(`["{\"dim\":%d}"]`, vs.dim)})
	vt := arrow.FixedSizeListOfField(int32(vs.dim), arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Float32, Nullable: true})
	as := arrow.NewSchema([]arrow.Field{
		{Name: RowIDColumn, Type: arrow.PrimitiveTypes.Uint64, Nullable: true},
		{Name: "flat", Type: vt},
	}, &md)
	n := len(vs.ids)
	items := array.NewData(arrow.PrimitiveTypes.Float32, len(vs.vals),
		[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Float32Traits.CastToBytes(vs.vals))}, nil, 0, 0)
	defer items.Release()
	vecs := array.NewData(vt, n, []*memory.Buffer{nil}, []arrow.ArrayData{items}, 0, 0)
	defer vecs.Release()
	idArr, vecArr := uint64View(vs.ids), array.MakeFromData(vecs)
	defer idArr.Release()
	defer vecArr.Release()
	rec := array.NewRecord(as, []arrow.Array{idArr, vecArr}, int64(n))
	defer rec.Release()
	return encodeIndexFileGlobals(rec, fo, ivfModel(n, nil, 0))
}

// encodeIndexFileGlobals writes one record as a Lance file of the table's data file version,
// with the given global buffers after the file descriptor (1, 2, …).
func encodeIndexFileGlobals(rec arrow.Record, fo file.Options, globals ...[]byte) ([]byte, error) {
	s, err := schema.FromArrow(rec.Schema())
	if err != nil {
		return nil, err
	}
	w, err := file.NewWriter(s, fo)
	if err != nil {
		return nil, err
	}
	for _, g := range globals {
		w.AddGlobalBuffer(g)
	}
	if err := w.Write(rec); err != nil {
		return nil, err
	}
	return w.Finish()
}

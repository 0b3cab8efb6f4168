package file

import "github.com/omnigraph/omnigraph-worker/lance/internal/pb"

// Builders for the lance.encodings21 messages a 2.1/2.2 writer needs (protos/encodings_v2_1.proto):
//
//	PageLayout oneof { mini_block_layout=1 all_null_layout=2 full_zip_layout=3 }
//	MiniBlockLayout{rep_compression=1 def_compression=2 value_compression=3 layers=6 num_buffers=7
//	                repetition_index_depth=8 num_items=9 has_large_chunk=10}
//	FullZipLayout{bits_rep=1 bits_def=2 bits_per_value=3 | bits_per_offset=4 num_items=5
//	              num_visible_items=6 value_compression=7 layers=8}
//	AllNullLayout{layers=5 rep_compression=7 def_compression=8 num_rep_values=9 num_def_values=10}
//	CompressiveEncoding oneof { flat=1 variable=2 ... fixed_size_list=11 }
//	Flat{bits_per_value=1}  Variable{offsets=1}  FixedSizeList{items_per_value=1 values=2 has_validity=3}
//
// Fields 7..10 of AllNullLayout and field 10 of MiniBlockLayout arrived with 2.2; a 2.1 file
// leaves them out (the engines that write 2.1 do).

// repDefLayer is a RepDefLayer enum value: what one structural layer's definition levels mean.
type repDefLayer uint64

const (
	rdAllValidItem     repDefLayer = 1
	rdAllValidList     repDefLayer = 2
	rdNullableItem     repDefLayer = 3
	rdNullableList     repDefLayer = 4
	rdEmptyableList    repDefLayer = 5
	rdNullAndEmptyList repDefLayer = 6
)

// compFlat is CompressiveEncoding{flat{bits_per_value}}: values stored as they are.
func compFlat(bits uint64) []byte {
	var f pb.Encoder
	f.Uint(1, bits)
	var e pb.Encoder
	e.BytesAlways(1, f.B)
	return e.B
}

// compVariable is CompressiveEncoding{variable{offsets=flat(offsetBits)}}: uncompressed bytes
// with uncompressed offsets.
func compVariable(offsetBits uint64) []byte {
	var v pb.Encoder
	v.BytesAlways(1, compFlat(offsetBits))
	var e pb.Encoder
	e.BytesAlways(2, v.B)
	return e.B
}

// compFSL is CompressiveEncoding{fixed_size_list{items_per_value, values, has_validity}}.
func compFSL(dim uint64, values []byte, validity bool) []byte {
	var f pb.Encoder
	f.Uint(1, dim)
	f.BytesAlways(2, values)
	f.Bool(3, validity)
	var e pb.Encoder
	e.BytesAlways(11, f.B)
	return e.B
}

func packedLayers(layers []repDefLayer) []byte {
	b := make([]byte, 0, len(layers))
	for _, l := range layers {
		b = append(b, byte(l)) // every RepDefLayer value is a one-byte varint
	}
	return b
}

type miniBlockDesc struct {
	rep, def   bool
	values     []byte // CompressiveEncoding
	layers     []repDefLayer
	numBuffers uint64
	numItems   uint64
	large      bool
}

func (d miniBlockDesc) encode() []byte {
	var m pb.Encoder
	if d.rep {
		m.BytesAlways(1, compFlat(16))
	}
	if d.def {
		m.BytesAlways(2, compFlat(16))
	}
	m.BytesAlways(3, d.values)
	m.BytesAlways(6, packedLayers(d.layers))
	m.Uint(7, d.numBuffers)
	if d.rep {
		m.Uint(8, 1) // repetition_index_depth: one (rows, leftovers) pair per chunk
	}
	m.Uint(9, d.numItems)
	m.Bool(10, d.large)
	return pageLayout(1, m.B)
}

type fullZipDesc struct {
	bitsRep, bitsDef uint64
	bitsPerValue     uint64 // fixed width values
	bitsPerOffset    uint64 // variable width values (then bitsPerValue is 0)
	numItems         uint64
	numVisible       uint64
	values           []byte
	layers           []repDefLayer
}

func (d fullZipDesc) encode() []byte {
	var m pb.Encoder
	m.Uint(1, d.bitsRep)
	m.Uint(2, d.bitsDef)
	if d.bitsPerOffset > 0 {
		m.UintAlways(4, d.bitsPerOffset)
	} else {
		m.UintAlways(3, d.bitsPerValue)
	}
	m.Uint(5, d.numItems)
	m.Uint(6, d.numVisible)
	m.BytesAlways(7, d.values)
	m.BytesAlways(8, packedLayers(d.layers))
	return pageLayout(3, m.B)
}

// allNullDesc describes a page without values. With levels (a 2.2 complex all-null page) the
// rep/def buffers are declared as flat u16, as a 2.1 reader assumes them to be.
type allNullDesc struct {
	layers         []repDefLayer
	numRep, numDef uint64 // levels stored; 0 when the buffer is absent
	v22, rep, def  bool
}

func (d allNullDesc) encode() []byte {
	var m pb.Encoder
	m.BytesAlways(5, packedLayers(d.layers))
	if d.v22 {
		if d.rep {
			m.BytesAlways(7, compFlat(16))
		}
		if d.def {
			m.BytesAlways(8, compFlat(16))
		}
		m.Uint(9, d.numRep)
		m.Uint(10, d.numDef)
	}
	return pageLayout(2, m.B)
}

func pageLayout(field pb.Number, body []byte) []byte {
	var e pb.Encoder
	e.BytesAlways(field, body)
	return e.B
}

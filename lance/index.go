package lance

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/omnigraph/omnigraph-worker/lance/internal/pb"
)

// Index is one entry of a manifest's index section (lance.table.IndexMetadata): the metadata of
// an index whose files live under _indices/<uuid>/ of the dataset (or of base path BaseID).
// This package never reads those files; it carries the metadata through every commit the way
// Lance's own commit does (docs/lance-indices.md), so that a table indexed by another engine
// keeps its indices when this package writes to it.
type Index struct {
	UUID   [16]byte
	Fields []int32 // field ids the index is built on
	Name   string
	// DatasetVersion is the version the index was built from.
	DatasetVersion uint64
	// Fragments is the set of fragment ids whose rows the index holds, ascending. It may name
	// fragments that no longer exist. Nil with HasFragments false: the index records none
	// (older writers), which Lance reads as "unknown".
	Fragments    []uint32
	HasFragments bool
	// Details is the google.protobuf.Any describing the index type (its type_url says which:
	// BTreeIndexDetails, InvertedIndexDetails, VectorIndexDetails, …); nil when absent.
	Details *IndexDetails
	// IndexVersion is the index format version; nil when the writer recorded none.
	IndexVersion *int32
	// CreatedAt is milliseconds since the epoch; nil when not recorded.
	CreatedAt *uint64
	// BaseID names the base path holding the index files; nil: this dataset's own root.
	BaseID *uint32
	// unknown holds the encoded fields this package does not know, written back verbatim.
	unknown []byte
}

// IndexDetails is a google.protobuf.Any: the type of an index and its type-specific settings,
// carried as they were written.
type IndexDetails struct {
	TypeURL string
	Value   []byte
}

// Kind is the index type as its details name it ("BTree", "Inverted", "Vector", "Bitmap",
// "LabelList", …), or "" when the index records no details.
func (x *Index) Kind() string {
	if x.Details == nil {
		return ""
	}
	u := x.Details.TypeURL
	u = u[strings.LastIndexAny(u, "/.")+1:]
	return strings.TrimSuffix(u, "IndexDetails")
}

// IsVector says whether the index is a vector index (IVF_FLAT, IVF_PQ, IVF_HNSW_*, …), which
// Lance drops once it covers no remaining fragment.
func (x *Index) IsVector() bool {
	return x.Details != nil && strings.HasSuffix(x.Details.TypeURL, "VectorIndexDetails")
}

// IsSystem says whether the index is one of Lance's system indices (the fragment reuse index,
// the MemWAL index), which carry no field and are kept whatever the schema.
func (x *Index) IsSystem() bool {
	return x.Name == FragReuseIndexName || x.Name == memWALIndexName
}

// FragReuseIndexName is the name of Lance's fragment reuse index, which a compaction with
// deferred index remapping leaves behind to map old row addresses to new ones.
const FragReuseIndexName = "__lance_frag_reuse"

const memWALIndexName = "__lance_mem_wal"

// UUIDString is the index uuid in its canonical hyphenated form, the name of its directory
// under _indices/.
func (x *Index) UUIDString() string {
	h := hex.EncodeToString(x.UUID[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Dir is the key of the index's directory relative to the root that holds it.
func (x *Index) Dir() string { return "_indices/" + x.UUIDString() + "/" }

// Covers says whether the index holds the rows of fragment id.
func (x *Index) Covers(id uint64) bool {
	if id > math.MaxUint32 {
		return false
	}
	_, ok := slices.BinarySearch(x.Fragments, uint32(id))
	return ok
}

// CreatedTime is CreatedAt as a time, zero when not recorded.
func (x *Index) CreatedTime() time.Time {
	if x.CreatedAt == nil {
		return time.Time{}
	}
	return time.UnixMilli(int64(*x.CreatedAt)).UTC()
}

func (x *Index) clone() Index {
	c := *x
	c.Fields = slices.Clone(x.Fields)
	c.Fragments = slices.Clone(x.Fragments)
	return c
}

func cloneIndices(xs []Index) []Index {
	if xs == nil {
		return nil
	}
	out := make([]Index, len(xs))
	for i := range xs {
		out[i] = xs[i].clone()
	}
	return out
}

// maxIndexFragments bounds how many fragment ids one index's bitmap may name. A run container
// describes 65,536 ids in four bytes, so a hostile bitmap could otherwise ask for billions; no
// real table has more than a few hundred thousand fragments.
const maxIndexFragments = 1 << 20

// decodeIndexSection decodes an IndexSection message (repeated IndexMetadata indices = 1).
func decodeIndexSection(b []byte) ([]Index, error) {
	var out []Index
	err := pb.Walk(b, func(f pb.Field) error {
		if f.Num != 1 {
			return nil
		}
		if err := f.Want(protowire.BytesType); err != nil {
			return err
		}
		x, err := decodeIndex(f.Bytes)
		if err != nil {
			return fmt.Errorf("index %d: %w", len(out), err)
		}
		out = append(out, x)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []Index{}
	}
	return out, nil
}

func decodeIndex(b []byte) (Index, error) {
	var x Index
	hasUUID := false
	err := pb.Walk(b, func(f pb.Field) error {
		var err error
		switch f.Num {
		case 1:
			if err := f.Want(protowire.BytesType); err != nil {
				return err
			}
			var raw []byte
			if err := pb.Walk(f.Bytes, func(u pb.Field) error {
				if u.Num == 1 {
					raw = u.Bytes
				}
				return nil
			}); err != nil {
				return err
			}
			if len(raw) != 16 {
				return fmt.Errorf("uuid of %d bytes, want 16", len(raw))
			}
			copy(x.UUID[:], raw)
			hasUUID = true
		case 2:
			x.Fields, err = f.Int32s(x.Fields)
		case 3:
			x.Name = f.Str()
		case 4:
			x.DatasetVersion = f.Varint
		case 5:
			if err := f.Want(protowire.BytesType); err != nil {
				return err
			}
			if len(f.Bytes) == 0 {
				return nil // no bitmap: unknown coverage
			}
			frags, err := decodePortableRoaring(f.Bytes, maxIndexFragments)
			if err != nil {
				return fmt.Errorf("fragment bitmap: %w", err)
			}
			slices.Sort(frags)
			x.Fragments, x.HasFragments = slices.Compact(frags), true
			if x.Fragments == nil {
				x.Fragments = []uint32{}
			}
		case 6:
			if err := f.Want(protowire.BytesType); err != nil {
				return err
			}
			d := &IndexDetails{}
			if err := pb.Walk(f.Bytes, func(a pb.Field) error {
				switch a.Num {
				case 1:
					d.TypeURL = a.Str()
				case 2:
					d.Value = append([]byte(nil), a.Bytes...)
				}
				return nil
			}); err != nil {
				return err
			}
			x.Details = d
		case 7:
			v := f.Int32()
			x.IndexVersion = &v
		case 8:
			v := f.Varint
			x.CreatedAt = &v
		case 9:
			v := uint32(f.Varint)
			x.BaseID = &v
		default:
			x.unknown = appendRawField(x.unknown, f)
		}
		return err
	})
	if err != nil {
		return Index{}, err
	}
	if !hasUUID {
		return Index{}, fmt.Errorf("no uuid")
	}
	return x, nil
}

// appendRawField re-encodes a field this package does not interpret, so it survives a commit.
func appendRawField(b []byte, f pb.Field) []byte {
	b = protowire.AppendTag(b, f.Num, f.Type)
	switch f.Type {
	case protowire.VarintType:
		return protowire.AppendVarint(b, f.Varint)
	case protowire.Fixed64Type:
		return protowire.AppendFixed64(b, f.Varint)
	case protowire.Fixed32Type:
		return protowire.AppendFixed32(b, uint32(f.Varint))
	default:
		return protowire.AppendBytes(b, f.Bytes)
	}
}

// encodeIndexSection encodes an IndexSection message.
func encodeIndexSection(xs []Index) []byte {
	var e pb.Encoder
	for i := range xs {
		e.Message(1, func(s *pb.Encoder) { encodeIndex(s, &xs[i]) })
	}
	return e.B
}

func encodeIndex(e *pb.Encoder, x *Index) {
	e.Message(1, func(s *pb.Encoder) { s.BytesAlways(1, x.UUID[:]) })
	e.PackedInt32s(2, x.Fields)
	e.String(3, x.Name)
	e.Uint(4, x.DatasetVersion)
	if x.HasFragments {
		e.BytesAlways(5, encodePortableRoaring(x.Fragments))
	}
	if x.Details != nil {
		e.Message(6, func(s *pb.Encoder) { s.String(1, x.Details.TypeURL); s.Bytes(2, x.Details.Value) })
	}
	if x.IndexVersion != nil {
		e.UintAlways(7, uint64(int64(*x.IndexVersion)))
	}
	if x.CreatedAt != nil {
		e.UintAlways(8, *x.CreatedAt)
	}
	if x.BaseID != nil {
		e.UintAlways(9, uint64(*x.BaseID))
	}
	e.B = append(e.B, x.unknown...)
}

// encodePortableRoaring writes sorted, distinct values as a 32-bit RoaringBitmap in the
// portable serialization without run containers (what Lance's roaring crate writes): an array
// container up to 4,096 values of one high half, a bitmap container above. No values is the
// 8-byte empty bitmap, which readers tell from "no bitmap" (zero bytes).
func encodePortableRoaring(vals []uint32) []byte {
	type container struct {
		key  uint16
		lows []uint16
	}
	var cs []container
	for _, v := range vals {
		hi, lo := uint16(v>>16), uint16(v)
		if n := len(cs); n == 0 || cs[n-1].key != hi {
			cs = append(cs, container{key: hi})
		}
		c := &cs[len(cs)-1]
		c.lows = append(c.lows, lo)
	}
	const cookieNoRun = 12346
	out := binary.LittleEndian.AppendUint32(nil, cookieNoRun)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(cs)))
	for _, c := range cs {
		out = binary.LittleEndian.AppendUint16(out, c.key)
		out = binary.LittleEndian.AppendUint16(out, uint16(len(c.lows)-1))
	}
	off := uint32(len(out) + 4*len(cs))
	size := func(c container) uint32 {
		if len(c.lows) <= 4096 {
			return uint32(2 * len(c.lows))
		}
		return 8192
	}
	for _, c := range cs {
		out = binary.LittleEndian.AppendUint32(out, off)
		off += size(c)
	}
	for _, c := range cs {
		if len(c.lows) <= 4096 {
			for _, lo := range c.lows {
				out = binary.LittleEndian.AppendUint16(out, lo)
			}
			continue
		}
		var words [1024]uint64
		for _, lo := range c.lows {
			words[lo/64] |= 1 << (lo % 64)
		}
		for _, w := range words {
			out = binary.LittleEndian.AppendUint64(out, w)
		}
	}
	return out
}

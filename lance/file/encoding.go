package file

import (
	"github.com/omnigraph/omnigraph-worker/lance/internal/pb"
	"google.golang.org/protobuf/encoding/protowire"
)

// This file holds the lance.encodings (v2.0) ArrayEncoding messages: builders for the writer and
// a parser into a small tree for the reader. Field numbers are from protos/encodings_v2_0.proto:
//
//	ArrayEncoding oneof { flat=1 nullable=2 fixed_size_list=3 list=4 struct=5 binary=6 dictionary=7 ... }
//	Flat{bits_per_value=1, buffer=2 Buffer{buffer_index=1, buffer_type=2}, compression=3}
//	Nullable oneof { no_nulls=1 {values=1} | some_nulls=2 {validity=1, values=2} | all_nulls=3 {} }
//	FixedSizeList{dimension=1, items=2, has_validity=3}
//	List{offsets=1, null_offset_adjustment=2, num_items=3}
//	Binary{indices=1, bytes=2, null_adjustment=3}
//	Dictionary{indices=1, items=2, num_dictionary_items=3}

// Type URLs of the google.protobuf.Any wrappers (no type.googleapis.com prefix, as lance writes).
const (
	arrayEncodingURL  = "/lance.encodings.ArrayEncoding"
	columnEncodingURL = "/lance.encodings.ColumnEncoding"
	pageLayout21URL   = "/lance.encodings21.PageLayout"
)

// ---- writer side ----

func encFlat(bits uint64, buffer uint32) []byte {
	var buf pb.Encoder
	buf.Uint(1, uint64(buffer))
	var flat pb.Encoder
	flat.Uint(1, bits)
	flat.BytesAlways(2, buf.B) // lance always writes the Buffer message, even when empty
	var e pb.Encoder
	e.BytesAlways(1, flat.B)
	return e.B
}

func encNoNulls(values []byte) []byte {
	return nest(values, 1, 1, 2) // ArrayEncoding{nullable{no_nulls{values}}}
}

func encSomeNulls(validity, values []byte) []byte {
	var sn pb.Encoder
	sn.BytesAlways(1, validity)
	sn.BytesAlways(2, values)
	return nest(sn.B, 2, 2)
}

func encAllNulls() []byte { return nest(nil, 3, 2) }

func encFSL(dim uint32, items []byte) []byte {
	var f pb.Encoder
	f.Uint(1, uint64(dim))
	f.BytesAlways(2, items)
	return nest(f.B, 3)
}

func encBinary(indices, bytes []byte, nullAdj uint64) []byte {
	var b pb.Encoder
	b.BytesAlways(1, indices)
	b.BytesAlways(2, bytes)
	b.UintAlways(3, nullAdj)
	return nest(b.B, 6)
}

func encList(offsets []byte, nullAdj, numItems uint64) []byte {
	var l pb.Encoder
	l.BytesAlways(1, offsets)
	l.UintAlways(2, nullAdj)
	l.Uint(3, numItems)
	return nest(l.B, 4)
}

func encStruct() []byte { return nest(nil, 5) }

// nest wraps body in the given message fields, innermost first.
func nest(body []byte, fields ...pb.Number) []byte {
	for _, n := range fields {
		var e pb.Encoder
		e.BytesAlways(n, body)
		body = e.B
	}
	return body
}

// ---- reader side ----

type nodeKind uint8

const (
	nodeFlat nodeKind = iota + 1
	nodeNullable
	nodeFSL
	nodeList
	nodeStruct
	nodeBinary
	nodeDict
)

type nullMode uint8

const (
	noNulls nullMode = iota + 1
	someNulls
	allNulls
)

// encNode is one parsed ArrayEncoding. Which fields are meaningful depends on kind.
type encNode struct {
	kind nodeKind

	bits   uint64 // flat
	buffer uint32 // flat: page buffer index

	mode nullMode // nullable

	a, b *encNode // nullable: validity, values; binary/dict: indices, bytes/items; fsl: items; list: offsets

	dim      uint64 // fsl
	nullAdj  uint64 // binary, list
	numItems uint64 // list: items referenced by the page; dictionary: number of dictionary items
}

// maxEncodingDepth bounds recursion on hostile input; real encodings nest at most ~6 deep.
const maxEncodingDepth = 16

var arrayEncodingNames = map[pb.Number]string{8: "fsst", 9: "packed_struct", 10: "bitpacked",
	11: "fixed_size_binary", 12: "bitpacked_for_non_neg", 13: "constant", 14: "inline_bitpacking",
	15: "out_of_line_bitpacking", 16: "variable", 17: "packed_struct_fixed_width_mini_block",
	18: "block", 19: "rle", 20: "general_mini_block", 21: "byte_stream_split"}

// parseEncoding parses an ArrayEncoding message.
func parseEncoding(b []byte, depth int) (*encNode, error) {
	if depth > maxEncodingDepth {
		return nil, errf("array encoding nested deeper than %d", maxEncodingDepth)
	}
	var n *encNode
	err := pb.Walk(b, func(f pb.Field) error {
		if f.Num < 1 || f.Num > 21 {
			return nil // not part of the oneof: ignore like any unknown field
		}
		if err := f.Want(protowire.BytesType); err != nil {
			return err
		}
		var err error
		switch f.Num {
		case 1:
			n, err = parseFlat(f.Bytes)
		case 2:
			n, err = parseNullable(f.Bytes, depth)
		case 3:
			n = &encNode{kind: nodeFSL}
			err = parseMsg(f.Bytes, depth, map[pb.Number]**encNode{2: &n.a}, map[pb.Number]*uint64{1: &n.dim})
			if err == nil && n.a == nil {
				err = errf("fixed_size_list encoding without items")
			}
		case 4:
			n = &encNode{kind: nodeList}
			err = parseMsg(f.Bytes, depth, map[pb.Number]**encNode{1: &n.a}, map[pb.Number]*uint64{2: &n.nullAdj, 3: &n.numItems})
			if err == nil && n.a == nil {
				err = errf("list encoding without offsets")
			}
		case 5:
			n = &encNode{kind: nodeStruct}
		case 6:
			n = &encNode{kind: nodeBinary}
			err = parseMsg(f.Bytes, depth, map[pb.Number]**encNode{1: &n.a, 2: &n.b}, map[pb.Number]*uint64{3: &n.nullAdj})
			if err == nil && (n.a == nil || n.b == nil) {
				err = errf("binary encoding without indices or bytes")
			}
		case 7:
			n = &encNode{kind: nodeDict}
			err = parseMsg(f.Bytes, depth, map[pb.Number]**encNode{1: &n.a, 2: &n.b}, map[pb.Number]*uint64{3: &n.numItems})
			if err == nil && (n.a == nil || n.b == nil) {
				err = errf("dictionary encoding without indices or items")
			}
		default:
			err = errf("unsupported array encoding %s (field %d)", arrayEncodingNames[f.Num], f.Num)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if n == nil {
		return nil, errf("empty array encoding")
	}
	return n, nil
}

// parseMsg walks a message whose fields are either nested ArrayEncodings (msgs) or varints (ints).
func parseMsg(b []byte, depth int, msgs map[pb.Number]**encNode, ints map[pb.Number]*uint64) error {
	return pb.Walk(b, func(f pb.Field) error {
		if dst, ok := msgs[f.Num]; ok {
			if err := f.Want(protowire.BytesType); err != nil {
				return err
			}
			n, err := parseEncoding(f.Bytes, depth+1)
			if err != nil {
				return err
			}
			*dst = n
		} else if dst, ok := ints[f.Num]; ok {
			if err := f.Want(protowire.VarintType); err != nil {
				return err
			}
			*dst = f.Varint
		}
		return nil
	})
}

func parseFlat(b []byte) (*encNode, error) {
	n := &encNode{kind: nodeFlat}
	haveBuffer := false
	err := pb.Walk(b, func(f pb.Field) error {
		switch f.Num {
		case 1:
			if err := f.Want(protowire.VarintType); err != nil {
				return err
			}
			n.bits = f.Varint
		case 2:
			if err := f.Want(protowire.BytesType); err != nil {
				return err
			}
			haveBuffer = true
			return pb.Walk(f.Bytes, func(g pb.Field) error {
				if g.Type != protowire.VarintType {
					return nil
				}
				switch g.Num {
				case 1:
					if g.Varint > 1<<20 {
						return errf("buffer index %d out of range", g.Varint)
					}
					n.buffer = uint32(g.Varint)
				case 2:
					if g.Varint != 0 {
						return errf("column and file buffers are not supported (buffer type %d)", g.Varint)
					}
				}
				return nil
			})
		case 3:
			if err := f.Want(protowire.BytesType); err != nil {
				return err
			}
			scheme := ""
			if err := pb.Walk(f.Bytes, func(g pb.Field) error {
				if g.Num == 1 {
					scheme = g.Str()
				}
				return nil
			}); err != nil {
				return err
			}
			if scheme != "" && scheme != "none" {
				return errf("compressed buffers (%q) are not supported", scheme)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !haveBuffer {
		return nil, errf("flat encoding without a buffer")
	}
	if n.bits == 0 || (n.bits != 1 && n.bits%8 != 0) || n.bits > 1<<16 {
		return nil, errf("flat encoding with %d bits per value", n.bits)
	}
	return n, nil
}

func parseNullable(b []byte, depth int) (*encNode, error) {
	n := &encNode{kind: nodeNullable}
	err := pb.Walk(b, func(f pb.Field) error {
		if f.Num < 1 || f.Num > 3 {
			return nil
		}
		if err := f.Want(protowire.BytesType); err != nil {
			return err
		}
		n.a, n.b = nil, nil
		switch f.Num {
		case 1:
			n.mode = noNulls
			return parseMsg(f.Bytes, depth, map[pb.Number]**encNode{1: &n.b}, nil)
		case 2:
			n.mode = someNulls
			return parseMsg(f.Bytes, depth, map[pb.Number]**encNode{1: &n.a, 2: &n.b}, nil)
		default:
			n.mode = allNulls
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	switch {
	case n.mode == 0:
		return nil, errf("nullable encoding without a nullability")
	case n.mode == noNulls && n.b == nil:
		return nil, errf("no_nulls encoding without values")
	case n.mode == someNulls && (n.a == nil || n.b == nil):
		return nil, errf("some_nulls encoding without validity or values")
	}
	return n, nil
}

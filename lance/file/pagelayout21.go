package file

import (
	"github.com/omnigraph/omnigraph-worker/lance/internal/pb"
	"google.golang.org/protobuf/encoding/protowire"
)

// The page layouts and compressive encodings of 2.1+ files (protos/encodings_v2_1.proto,
// package lance.encodings21). docs/lance-file-2.1.md describes what the engines write.

// Field numbers of CompressiveEncoding's oneof.
const (
	ceFlat          = 1
	ceVariable      = 2
	ceConstant      = 3
	ceOutOfLineBP   = 4
	ceInlineBP      = 5
	ceFsst          = 6
	ceDictionary    = 7
	ceRle           = 8
	ceByteStream    = 9
	ceGeneral       = 10
	ceFixedSizeList = 11
	cePackedStruct  = 12
	ceVarPacked     = 13
)

var ceNames = map[int]string{ceFlat: "flat", ceVariable: "variable", ceConstant: "constant",
	ceOutOfLineBP: "out_of_line_bitpacking", ceInlineBP: "inline_bitpacking", ceFsst: "fsst",
	ceDictionary: "dictionary", ceRle: "rle", ceByteStream: "byte_stream_split", ceGeneral: "general",
	ceFixedSizeList: "fixed_size_list", cePackedStruct: "packed_struct", ceVarPacked: "variable_packed_struct"}

// BufferCompression schemes.
const (
	schemeNone = 0
	schemeLZ4  = 1
	schemeZstd = 2
)

// ce21 is a parsed CompressiveEncoding. Which fields mean something depends on kind.
type ce21 struct {
	kind   int
	bits   uint64 // flat/bitpacking: bits per value; fixed_size_list: items per value
	scheme int    // flat.data, variable.values, inline_bitpacking.values, general.compression
	a, b   *ce21  // variable.offsets; *.values; rle values+run_lengths; dictionary indices+items
	symtab []byte // fsst symbol table
	value  []byte // constant value
	valid  bool   // fixed_size_list.has_validity
	dictN  uint64 // dictionary.num_dictionary_items
}

func (c *ce21) name() string {
	if c == nil {
		return "none"
	}
	if n, ok := ceNames[c.kind]; ok {
		return n
	}
	return "unknown"
}

// Page layouts (PageLayout oneof).
const (
	layoutMiniBlock = 1
	layoutConstant  = 2 // AllNullLayout in 2.1, ConstantLayout (same field) from 2.2
	layoutFullZip   = 3
	layoutBlob      = 4
)

// RepDefLayer values.
const (
	layerAllValidItem  = 1
	layerAllValidList  = 2
	layerNullableItem  = 3
	layerNullableList  = 4
	layerEmptyableList = 5
	layerNullEmptyList = 6
)

type layout21 struct {
	kind   int
	layers []uint64

	// mini-block
	rep, def, value, dict *ce21
	dictItems             uint64
	numBuffers            uint64
	repIndexDepth         uint64
	numItems              uint64
	largeChunk            bool

	// full-zip
	bitsRep, bitsDef uint64
	bitsPerValue     uint64
	bitsPerOffset    uint64
	variable         bool
	numVisible       uint64

	// constant / all-null
	inline                     []byte
	hasInline                  bool
	numRepValues, numDefValues uint64
}

// maxCE21Depth bounds the nesting of compressive encodings: each level is a recursive call.
const maxCE21Depth = 16

func parseLayout21(b []byte) (*layout21, error) {
	l := &layout21{}
	found := 0
	err := pb.Walk(b, func(f pb.Field) error {
		if f.Num < 1 || f.Num > 5 {
			return nil
		}
		if err := f.Want(protowire.BytesType); err != nil {
			return err
		}
		found++
		l.kind = int(f.Num)
		switch f.Num {
		case layoutMiniBlock:
			return l.parseMiniBlock(f.Bytes)
		case layoutConstant:
			return l.parseConstant(f.Bytes)
		case layoutFullZip:
			return l.parseFullZip(f.Bytes)
		default:
			return errf("page layout %d (blob) is not supported", f.Num)
		}
	})
	if err != nil {
		return nil, err
	}
	if found != 1 {
		return nil, errf("page layout names %d layouts, want 1", found)
	}
	return l, nil
}

func wantCE(f pb.Field, dst **ce21) error {
	if err := f.Want(protowire.BytesType); err != nil {
		return err
	}
	c, err := parseCE(f.Bytes, 0)
	*dst = c
	return err
}

func wantVarint(f pb.Field, dst *uint64) error {
	if err := f.Want(protowire.VarintType); err != nil {
		return err
	}
	*dst = f.Varint
	return nil
}

func (l *layout21) parseMiniBlock(b []byte) error {
	return pb.Walk(b, func(f pb.Field) error {
		var err error
		switch f.Num {
		case 1:
			return wantCE(f, &l.rep)
		case 2:
			return wantCE(f, &l.def)
		case 3:
			return wantCE(f, &l.value)
		case 4:
			return wantCE(f, &l.dict)
		case 5:
			return wantVarint(f, &l.dictItems)
		case 6:
			l.layers, err = f.Uints(l.layers)
		case 7:
			return wantVarint(f, &l.numBuffers)
		case 8:
			return wantVarint(f, &l.repIndexDepth)
		case 9:
			return wantVarint(f, &l.numItems)
		case 10:
			var v uint64
			err = wantVarint(f, &v)
			l.largeChunk = v != 0
		}
		return err
	})
}

func (l *layout21) parseFullZip(b []byte) error {
	return pb.Walk(b, func(f pb.Field) error {
		var err error
		switch f.Num {
		case 1:
			return wantVarint(f, &l.bitsRep)
		case 2:
			return wantVarint(f, &l.bitsDef)
		case 3:
			l.variable = false
			return wantVarint(f, &l.bitsPerValue)
		case 4:
			l.variable = true
			return wantVarint(f, &l.bitsPerOffset)
		case 5:
			return wantVarint(f, &l.numItems)
		case 6:
			return wantVarint(f, &l.numVisible)
		case 7:
			return wantCE(f, &l.value)
		case 8:
			l.layers, err = f.Uints(l.layers)
		}
		return err
	})
}

func (l *layout21) parseConstant(b []byte) error {
	return pb.Walk(b, func(f pb.Field) error {
		var err error
		switch f.Num {
		case 5:
			l.layers, err = f.Uints(l.layers)
		case 6:
			if err = f.Want(protowire.BytesType); err == nil {
				l.inline, l.hasInline = f.Bytes, true
			}
		case 7:
			return wantCE(f, &l.rep)
		case 8:
			return wantCE(f, &l.def)
		case 9:
			return wantVarint(f, &l.numRepValues)
		case 10:
			return wantVarint(f, &l.numDefValues)
		}
		return err
	})
}

func parseBufferCompression(b []byte) (int, error) {
	scheme := 0
	err := pb.Walk(b, func(f pb.Field) error {
		if f.Num == 1 {
			if err := f.Want(protowire.VarintType); err != nil {
				return err
			}
			if f.Varint > schemeZstd {
				return errf("unknown buffer compression scheme %d", f.Varint)
			}
			scheme = int(f.Varint)
		}
		return nil
	})
	return scheme, err
}

func parseCE(b []byte, depth int) (*ce21, error) {
	if depth > maxCE21Depth {
		return nil, errf("compressive encodings nested deeper than %d", maxCE21Depth)
	}
	c := &ce21{}
	found := 0
	err := pb.Walk(b, func(f pb.Field) error {
		if f.Num < 1 || f.Num > 13 {
			return nil
		}
		if err := f.Want(protowire.BytesType); err != nil {
			return err
		}
		found++
		c.kind = int(f.Num)
		return c.parseBody(f.Bytes, depth)
	})
	if err != nil {
		return nil, err
	}
	if found != 1 {
		return nil, errf("compressive encoding names %d compressions, want 1", found)
	}
	return c, nil
}

// parseBody reads the message of c's kind. Fields a kind does not use are ignored.
func (c *ce21) parseBody(b []byte, depth int) error {
	sub := func(f pb.Field, dst **ce21) error {
		if err := f.Want(protowire.BytesType); err != nil {
			return err
		}
		x, err := parseCE(f.Bytes, depth+1)
		*dst = x
		return err
	}
	bc := func(f pb.Field) error {
		if err := f.Want(protowire.BytesType); err != nil {
			return err
		}
		s, err := parseBufferCompression(f.Bytes)
		c.scheme = s
		return err
	}
	err := pb.Walk(b, func(f pb.Field) error {
		switch c.kind {
		case ceFlat, ceInlineBP:
			switch f.Num {
			case 1:
				return wantVarint(f, &c.bits)
			case 2:
				return bc(f)
			}
		case ceVariable:
			switch f.Num {
			case 1:
				return sub(f, &c.a)
			case 2:
				return bc(f)
			}
		case ceConstant:
			if f.Num == 1 {
				if err := f.Want(protowire.BytesType); err != nil {
					return err
				}
				c.value = f.Bytes
			}
		case ceOutOfLineBP:
			switch f.Num {
			case 1:
				return wantVarint(f, &c.bits)
			case 3:
				return sub(f, &c.a)
			}
		case ceFsst:
			switch f.Num {
			case 1:
				if err := f.Want(protowire.BytesType); err != nil {
					return err
				}
				c.symtab = f.Bytes
			case 2:
				return sub(f, &c.a)
			}
		case ceDictionary:
			switch f.Num {
			case 1:
				return sub(f, &c.a)
			case 2:
				return sub(f, &c.b)
			case 3:
				return wantVarint(f, &c.dictN)
			}
		case ceRle:
			switch f.Num {
			case 1:
				return sub(f, &c.a)
			case 2:
				return sub(f, &c.b)
			}
		case ceByteStream:
			if f.Num == 1 {
				return sub(f, &c.a)
			}
		case ceGeneral:
			switch f.Num {
			case 1:
				return bc(f)
			case 3:
				return sub(f, &c.a)
			}
		case ceFixedSizeList:
			switch f.Num {
			case 1:
				return wantVarint(f, &c.bits)
			case 2:
				return sub(f, &c.a)
			case 3:
				var v uint64
				err := wantVarint(f, &v)
				c.valid = v != 0
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The children every decoder dereferences must be present.
	switch c.kind {
	case ceVariable, ceOutOfLineBP, ceFsst, ceByteStream, ceGeneral, ceFixedSizeList:
		if c.a == nil {
			return errf("%s encoding without its inner encoding", c.name())
		}
	case ceRle, ceDictionary:
		if c.a == nil || c.b == nil {
			return errf("%s encoding without both inner encodings", c.name())
		}
	}
	return nil
}

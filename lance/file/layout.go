package file

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
)

// kind is how a field is stored in a 2.0 file. Fixed-width values (including bool and fixed size
// lists of them) live in one column; strings and binaries in one column of end offsets plus bytes;
// lists in an offsets column followed by the item column(s); structs in a header column with no
// data followed by the children's columns.
type kind uint8

const (
	kindFixed kind = iota + 1
	kindBinary
	kindList
	kindStruct
)

// layout is the storage shape of one Arrow type.
type layout struct {
	kind  kind
	bits  int  // kindFixed: bits per leaf value (1 for bool)
	dim   int  // kindFixed: fixed size list dimension, 0 when not a list
	large bool // kindBinary, kindList: Arrow offsets are 64-bit
}

// bitsPerRow estimates the encoded size of one row in bits, for page sizing (0 for strings,
// whose size depends on the row, and struct headers, which have no data).
func (l layout) bitsPerRow() int {
	switch l.kind {
	case kindFixed:
		if l.dim > 0 {
			return l.bits*l.dim + l.dim + 1 // values, item validity, row validity
		}
		return l.bits + 1
	case kindList:
		return 64
	}
	return 0
}

// layoutOf maps an Arrow type to its 2.0 storage layout, refusing what this package cannot store.
func layoutOf(dt arrow.DataType) (layout, error) {
	switch t := dt.(type) {
	case *arrow.BooleanType:
		return layout{kind: kindFixed, bits: 1}, nil
	case *arrow.StringType, *arrow.BinaryType:
		return layout{kind: kindBinary}, nil
	case *arrow.LargeStringType, *arrow.LargeBinaryType:
		return layout{kind: kindBinary, large: true}, nil
	case *arrow.ListType:
		if _, err := layoutOf(t.Elem()); err != nil {
			return layout{}, err
		}
		return layout{kind: kindList}, nil
	case *arrow.LargeListType:
		if _, err := layoutOf(t.Elem()); err != nil {
			return layout{}, err
		}
		return layout{kind: kindList, large: true}, nil
	case *arrow.StructType:
		for _, f := range t.Fields() {
			if _, err := layoutOf(f.Type); err != nil {
				return layout{}, err
			}
		}
		return layout{kind: kindStruct}, nil
	case *arrow.FixedSizeListType:
		el, err := layoutOf(t.Elem())
		if err != nil || el.kind != kindFixed || el.dim != 0 {
			return layout{}, fmt.Errorf("fixed size list of %s is not supported", t.Elem())
		}
		if t.Len() <= 0 {
			return layout{}, fmt.Errorf("fixed size list of dimension %d is not supported", t.Len())
		}
		return layout{kind: kindFixed, bits: el.bits, dim: int(t.Len())}, nil
	}
	switch dt.ID() {
	case arrow.INT8, arrow.UINT8, arrow.INT16, arrow.UINT16, arrow.INT32, arrow.UINT32,
		arrow.INT64, arrow.UINT64, arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64,
		arrow.DATE32, arrow.DATE64, arrow.TIMESTAMP, arrow.TIME32, arrow.TIME64, arrow.DURATION,
		arrow.FIXED_SIZE_BINARY:
		bits := dt.(arrow.FixedWidthDataType).BitWidth()
		if bits <= 0 || bits%8 != 0 {
			break
		}
		return layout{kind: kindFixed, bits: bits}, nil
	}
	return layout{}, fmt.Errorf("arrow type %s is not supported by the Lance 2.0 writer", dt)
}

// sameType reports whether a (the data) has the shape of want (the schema's type). Child field
// names and nested nullability flags are not compared: the data itself is checked for nulls.
func sameType(a, want arrow.DataType) bool {
	if a.ID() != want.ID() {
		return false
	}
	switch w := want.(type) {
	case *arrow.ListType:
		return sameType(a.(*arrow.ListType).Elem(), w.Elem())
	case *arrow.LargeListType:
		return sameType(a.(*arrow.LargeListType).Elem(), w.Elem())
	case *arrow.FixedSizeListType:
		at := a.(*arrow.FixedSizeListType)
		return at.Len() == w.Len() && sameType(at.Elem(), w.Elem())
	case *arrow.StructType:
		at := a.(*arrow.StructType)
		if at.NumFields() != w.NumFields() {
			return false
		}
		for i, f := range w.Fields() {
			if at.Field(i).Name != f.Name || !sameType(at.Field(i).Type, f.Type) {
				return false
			}
		}
		return true
	}
	return arrow.TypeEqual(a, want)
}

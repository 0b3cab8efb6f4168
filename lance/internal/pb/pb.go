// Package pb holds the small protobuf toolkit the Lance format code uses. Lance's messages are
// encoded and decoded by hand with protowire rather than generated code: the project only needs a
// fixed subset of fields, must skip unknown ones, and must never let a length read from a file
// drive an allocation before it is checked against the bytes actually present.
package pb

import (
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// Number is a protobuf field number.
type Number = protowire.Number

// Encoder appends protobuf fields to a byte slice. Zero values of implicit-presence scalars are
// omitted, as proto3 does.
type Encoder struct{ B []byte }

func (e *Encoder) Uint(n Number, v uint64) {
	if v != 0 {
		e.B = protowire.AppendTag(e.B, n, protowire.VarintType)
		e.B = protowire.AppendVarint(e.B, v)
	}
}

// UintAlways writes v even when zero (fields with explicit presence).
func (e *Encoder) UintAlways(n Number, v uint64) {
	e.B = protowire.AppendTag(e.B, n, protowire.VarintType)
	e.B = protowire.AppendVarint(e.B, v)
}

// Int writes a proto int32/int64 (negative values use ten-byte varints).
func (e *Encoder) Int(n Number, v int64) { e.Uint(n, uint64(v)) }

func (e *Encoder) Bool(n Number, v bool) {
	if v {
		e.Uint(n, 1)
	}
}

func (e *Encoder) Double(n Number, v float64) {
	if v != 0 {
		e.B = protowire.AppendTag(e.B, n, protowire.Fixed64Type)
		e.B = protowire.AppendFixed64(e.B, math.Float64bits(v))
	}
}

// String writes a proto3 string, omitted when empty.
func (e *Encoder) String(n Number, s string) {
	if s != "" {
		e.BytesAlways(n, []byte(s))
	}
}

// StringAlways writes s even when empty (optional string, map keys and values).
func (e *Encoder) StringAlways(n Number, s string) {
	e.B = protowire.AppendTag(e.B, n, protowire.BytesType)
	e.B = protowire.AppendString(e.B, s)
}

// Bytes writes a bytes field, omitted when empty.
func (e *Encoder) Bytes(n Number, b []byte) {
	if len(b) != 0 {
		e.BytesAlways(n, b)
	}
}

// BytesAlways writes a length-delimited field even when empty (embedded messages).
func (e *Encoder) BytesAlways(n Number, b []byte) {
	e.B = protowire.AppendTag(e.B, n, protowire.BytesType)
	e.B = protowire.AppendBytes(e.B, b)
}

// Message writes an embedded message produced by fn; it is written even when empty.
func (e *Encoder) Message(n Number, fn func(*Encoder)) {
	var sub Encoder
	fn(&sub)
	e.BytesAlways(n, sub.B)
}

// PackedUints writes a packed repeated varint field, omitted when empty.
func (e *Encoder) PackedUints(n Number, vs []uint64) {
	if len(vs) == 0 {
		return
	}
	var body []byte
	for _, v := range vs {
		body = protowire.AppendVarint(body, v)
	}
	e.BytesAlways(n, body)
}

// PackedInt32s writes a packed repeated int32 field, omitted when empty.
func (e *Encoder) PackedInt32s(n Number, vs []int32) {
	if len(vs) == 0 {
		return
	}
	var body []byte
	for _, v := range vs {
		body = protowire.AppendVarint(body, uint64(int64(v)))
	}
	e.BytesAlways(n, body)
}

// StringMap writes a map<string,string> sorted by key, so output is deterministic.
func (e *Encoder) StringMap(n Number, m map[string]string) {
	for _, k := range sortedKeys(m) {
		v := m[k]
		e.Message(n, func(s *Encoder) { s.StringAlways(1, k); s.StringAlways(2, v) })
	}
}

// BytesMap writes a map<string,bytes> sorted by key.
func (e *Encoder) BytesMap(n Number, m map[string][]byte) {
	for _, k := range sortedKeys(m) {
		v := m[k]
		e.Message(n, func(s *Encoder) { s.StringAlways(1, k); s.BytesAlways(2, v) })
	}
}

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("malformed protobuf")

// Field is one decoded field of a message.
type Field struct {
	Num    Number
	Type   protowire.Type
	Varint uint64
	Bytes  []byte // for length-delimited fields; aliases the input
}

// Walk calls fn for each field of msg in order. Groups are refused; unknown fields are simply
// passed to fn, which ignores the numbers it does not know.
func Walk(msg []byte, fn func(f Field) error) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return fmt.Errorf("%w: bad tag: %v", ErrMalformed, protowire.ParseError(n))
		}
		msg = msg[n:]
		f := Field{Num: num, Type: typ}
		switch typ {
		case protowire.VarintType:
			v, m := protowire.ConsumeVarint(msg)
			if m < 0 {
				return fmt.Errorf("%w: field %d: %v", ErrMalformed, num, protowire.ParseError(m))
			}
			f.Varint, n = v, m
		case protowire.Fixed64Type:
			v, m := protowire.ConsumeFixed64(msg)
			if m < 0 {
				return fmt.Errorf("%w: field %d: %v", ErrMalformed, num, protowire.ParseError(m))
			}
			f.Varint, n = v, m
		case protowire.Fixed32Type:
			v, m := protowire.ConsumeFixed32(msg)
			if m < 0 {
				return fmt.Errorf("%w: field %d: %v", ErrMalformed, num, protowire.ParseError(m))
			}
			f.Varint, n = uint64(v), m
		case protowire.BytesType:
			v, m := protowire.ConsumeBytes(msg)
			if m < 0 {
				return fmt.Errorf("%w: field %d: %v", ErrMalformed, num, protowire.ParseError(m))
			}
			f.Bytes, n = v, m
		default:
			return fmt.Errorf("%w: field %d: unsupported wire type %d", ErrMalformed, num, typ)
		}
		msg = msg[n:]
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// Uints decodes a repeated varint field that may be packed or not, appending to dst.
func (f Field) Uints(dst []uint64) ([]uint64, error) {
	if f.Type == protowire.VarintType {
		return append(dst, f.Varint), nil
	}
	if f.Type != protowire.BytesType {
		return dst, fmt.Errorf("%w: field %d: want varint", ErrMalformed, f.Num)
	}
	b := f.Bytes
	for len(b) > 0 {
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return dst, fmt.Errorf("%w: field %d: packed varint: %v", ErrMalformed, f.Num, protowire.ParseError(n))
		}
		dst = append(dst, v)
		b = b[n:]
	}
	return dst, nil
}

// Int32s decodes a repeated int32 field (packed or not).
func (f Field) Int32s(dst []int32) ([]int32, error) {
	vs, err := f.Uints(nil)
	for _, v := range vs {
		dst = append(dst, int32(v))
	}
	return dst, err
}

// Int32 returns the varint as a proto int32.
func (f Field) Int32() int32 { return int32(f.Varint) }

// Str returns the field as a string (copying).
func (f Field) Str() string { return string(f.Bytes) }

// Double returns a fixed64 field as float64.
func (f Field) Double() float64 { return math.Float64frombits(f.Varint) }

// MapEntry decodes a map entry message into its key and value bytes.
func MapEntry(b []byte) (key string, val []byte, err error) {
	err = Walk(b, func(f Field) error {
		switch f.Num {
		case 1:
			key = f.Str()
		case 2:
			val = f.Bytes
		}
		return nil
	})
	return key, val, err
}

// Want checks that f is length-delimited, the common shape for strings and messages.
func (f Field) Want(t protowire.Type) error {
	if f.Type != t {
		return fmt.Errorf("%w: field %d has wire type %d, want %d", ErrMalformed, f.Num, f.Type, t)
	}
	return nil
}

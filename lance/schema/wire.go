package schema

import (
	"fmt"

	"github.com/omnigraph/omnigraph-worker/lance/internal/pb"
)

// AppendField encodes f (without its children) as a lance.file.Field message body.
func AppendField(b []byte, f *Field) []byte {
	e := pb.Encoder{B: b}
	// type=1 is always PARENT (0) in what lance writes, so it is omitted.
	e.String(2, f.Name)
	e.Int(3, int64(f.ID))
	e.Int(4, int64(f.ParentID))
	e.String(5, f.LogicalType)
	e.Bool(6, f.Nullable)
	e.Int(7, int64(f.Encoding))
	e.String(9, f.ExtensionName)
	e.BytesMap(10, f.Metadata)
	e.Bool(12, f.UnenforcedPrimaryKey)
	return e.B
}

// AppendFields writes every field of s in pre-order as repeated field number n.
func AppendFields(e *pb.Encoder, n pb.Number, s *Schema) {
	for _, f := range s.Flatten() {
		e.BytesAlways(n, AppendField(nil, f))
	}
}

// DecodeField decodes one lance.file.Field message (children are attached later by Build).
func DecodeField(b []byte) (*Field, error) {
	f := &Field{}
	err := pb.Walk(b, func(x pb.Field) error {
		switch x.Num {
		case 2:
			f.Name = x.Str()
		case 3:
			f.ID = x.Int32()
		case 4:
			f.ParentID = x.Int32()
		case 5:
			f.LogicalType = x.Str()
		case 6:
			f.Nullable = x.Varint != 0
		case 7:
			f.Encoding = x.Int32()
		case 9:
			f.ExtensionName = x.Str()
		case 10:
			k, v, err := pb.MapEntry(x.Bytes)
			if err != nil {
				return err
			}
			if f.Metadata == nil {
				f.Metadata = map[string][]byte{}
			}
			f.Metadata[k] = append([]byte(nil), v...)
		case 12:
			f.UnenforcedPrimaryKey = x.Varint != 0
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lance field: %w", err)
	}
	return f, nil
}

// EncodeSchemaMessage encodes a lance.file.Schema message {fields=1, metadata=5}.
func EncodeSchemaMessage(s *Schema) []byte {
	var e pb.Encoder
	AppendFields(&e, 1, s)
	e.BytesMap(5, s.Metadata)
	return e.B
}

// DecodeSchemaMessage decodes a lance.file.Schema message.
func DecodeSchemaMessage(b []byte) (*Schema, error) {
	var flat []*Field
	var meta map[string][]byte
	err := pb.Walk(b, func(x pb.Field) error {
		switch x.Num {
		case 1:
			f, err := DecodeField(x.Bytes)
			if err != nil {
				return err
			}
			flat = append(flat, f)
		case 5:
			k, v, err := pb.MapEntry(x.Bytes)
			if err != nil {
				return err
			}
			if meta == nil {
				meta = map[string][]byte{}
			}
			meta[k] = append([]byte(nil), v...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lance schema: %w", err)
	}
	return Build(flat, meta)
}

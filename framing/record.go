package framing

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"
)

// RecordKind tells a node line from an edge line.
type RecordKind uint8

const (
	NodeRecord RecordKind = iota + 1 // {"type":"<Node>","data":{…}}
	EdgeRecord                       // {"edge":"<Edge>","from":"<id>","to":"<id>","data":{…}}
)

func (k RecordKind) String() string {
	switch k {
	case NodeRecord:
		return "node"
	case EdgeRecord:
		return "edge"
	}
	return "invalid"
}

// Record is one logical graph-batch line. Nothing here is checked against a schema: unknown
// types, unknown data fields, property value types, @key canonical ids and edge endpoints
// are the engine's to check.
//
// A batch's records' Data values share one copy of its bytes, so they must not be written
// to. Type, From, To and ID are never views of the batch, so an index may keep them without
// keeping it: Type names are shared between records, and From, To and ID are copies, which
// the records of a few hundred lines share in small slabs holding nothing but those strings
// (an index that keeps one string keeps its slab's few kilobytes, not the batch).
type Record struct {
	Line int        // 1-based line number in the batch (blank lines counted)
	Kind RecordKind // NodeRecord or EdgeRecord
	Type string     // node type name ("type") or edge type name ("edge"), as written
	From string     // edge only: source node id, as written
	To   string     // edge only: destination node id, as written
	// ID is the supplied data.id (always a JSON string), nil when omitted. For an @key node
	// the engine must check it equals the canonical key id exactly; otherwise it is the
	// physical id used verbatim (docs/omnigraph-format.md §5.2).
	ID *string
	// Data holds the members of "data" other than "id", in input order under their decoded
	// names (which are distinct). Each value is the member's JSON text with insignificant
	// whitespace removed (string escapes and number spellings kept as written, so I64/U64
	// stay exact). Empty when "data" was omitted or {}.
	Data Members
}

// Member is one member of a record's "data" object.
type Member struct {
	Name  string
	Value json.RawMessage
}

// Members are a record's data members. A slice rather than a map: a batch has thousands of
// records of a few members each, which the engine walks in order; one lookup by name is a
// short scan.
type Members []Member

// Get returns the value of the member called name.
func (ms Members) Get(name string) (json.RawMessage, bool) {
	for i := range ms {
		if ms[i].Name == name {
			return ms[i].Value, true
		}
	}
	return nil, false
}

// TableKey is the reference's type key: "node:<Type>" or "edge:<Edge>".
func (r *Record) TableKey() string {
	if r.Kind == EdgeRecord {
		return "edge:" + r.Type
	}
	return "node:" + r.Type
}

// AppendJSON appends the record's canonical line (no newline): envelope members in the
// order of docs/omnigraph-format.md §5.1, "data" always present with its members sorted by name and "id"
// among them. Parsing the result yields the same record.
func (r *Record) AppendJSON(dst []byte) []byte {
	if r.Kind == EdgeRecord {
		dst = append(dst, `{"edge":`...)
		dst = AppendJSONString(dst, r.Type)
		dst = append(dst, `,"from":`...)
		dst = AppendJSONString(dst, r.From)
		dst = append(dst, `,"to":`...)
		dst = AppendJSONString(dst, r.To)
	} else {
		dst = append(dst, `{"type":`...)
		dst = AppendJSONString(dst, r.Type)
	}
	dst = append(dst, `,"data":{`...)
	// Members sorted by name, "id" (the supplied id) among them.
	sorted := make([]Member, 0, len(r.Data)+1)
	for _, m := range r.Data {
		if m.Name != "id" {
			sorted = append(sorted, m)
		}
	}
	if r.ID != nil {
		sorted = append(sorted, Member{Name: "id"})
	}
	slices.SortFunc(sorted, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	for i, m := range sorted {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendJSONString(dst, m.Name)
		dst = append(dst, ':')
		if m.Name == "id" && m.Value == nil {
			dst = AppendJSONString(dst, *r.ID)
		} else {
			dst = append(dst, m.Value...)
		}
	}
	return append(dst, "}}"...)
}

// MarshalJSON returns AppendJSON(nil).
func (r Record) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }

// reservedPhysical reports the field names refused at the top level and inside "data"
// because they are reserved physical state (docs/omnigraph-format.md §5.1).
func reservedPhysical(name string) bool {
	switch name {
	case "_tombstone", "_rowid", "_rowaddr", "_rowoffset", "_row_created_at_version", "_row_last_updated_at_version":
		return true
	}
	return false
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as a JSON string with serde_json's escaping (`"` and `\`, the
// short escapes \b \f \n \r \t, other control characters as \u00XX in lowercase hex, the rest
// as is). Invalid UTF-8, which validated input never holds, is written as \ufffd.
func AppendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

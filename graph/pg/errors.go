package pg

import "fmt"

// DefaultFileName is the file name used in error messages when the caller
// does not name the source (Parse, Compile).
const DefaultFileName = "schema.pg"

// Pos is a 1-based source position. Column counts Unicode code points (a tab
// is one column).
type Pos struct {
	Line   int
	Column int
}

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Column) }

// ParseError is a syntax error: the parser expected one thing and found
// another. Its message reads `schema.pg:12:7: expected ')' after enum values,
// found '}'`.
type ParseError struct {
	File     string
	Line     int
	Column   int
	Expected string
	Found    string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("%s:%d:%d: expected %s, found %s", fileOr(e.File), e.Line, e.Column, e.Expected, e.Found)
}

// Code classifies a SemanticError.
type Code string

// Semantic error codes.
const (
	CodeUnknownType       Code = "unknown_type"        // a base type name that does not exist
	CodeDuplicateType     Code = "duplicate_type"      // two declarations of one kind share a name
	CodeEdgeNameCollision Code = "edge_name_collision" // edge names equal after lower-casing
	CodeDuplicateProperty Code = "duplicate_property"
	CodeReservedName      Code = "reserved_name"     // _rowid…, id, src/dst on edges
	CodeUnknownInterface  Code = "unknown_interface" // implements an undeclared interface
	CodeUnknownEndpoint   Code = "unknown_endpoint"  // edge endpoint is not a node type
	CodeUnknownProperty   Code = "unknown_property"  // constraint/@embed names a missing property
	CodeInterfaceConflict Code = "interface_conflict"
	CodeInvalidKey        Code = "invalid_key"    // @key on optional/list/vector/blob, on an edge, or twice
	CodeInvalidVector     Code = "invalid_vector" // Vector(0), Vector(> i32::MAX)
	CodeInvalidCard       Code = "invalid_card"   // @card min > max, out of u32 range
	CodeInvalidEnum       Code = "invalid_enum"   // duplicate enum values
	CodeInvalidType       Code = "invalid_type"   // [Blob]
	CodeInvalidConstraint Code = "invalid_constraint"
	CodeInvalidAnnotation Code = "invalid_annotation"
	CodeInvalidString     Code = "invalid_string" // unsupported escape sequence
	CodeUnsupported       Code = "unsupported"    // valid in the grammar, refused by this implementation
)

// SemanticError is a well-formed schema that breaks a rule of the schema
// language (unknown type, duplicate name, bad endpoint, …).
type SemanticError struct {
	File    string
	Line    int
	Column  int
	Code    Code
	Message string
}

func (e *SemanticError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", fileOr(e.File), e.Line, e.Column, e.Message)
}

// IdentityError is a failure to resolve stable identities (a bad
// @rename_from, an exhausted allocator) or a malformed accepted SchemaIR.
type IdentityError struct {
	// InvalidIR is true when an accepted SchemaIR failed validation.
	InvalidIR bool
	Message   string
}

func (e *IdentityError) Error() string {
	if e.InvalidIR {
		return "invalid schema IR: " + e.Message
	}
	return "schema identity: " + e.Message
}

func fileOr(f string) string {
	if f == "" {
		return DefaultFileName
	}
	return f
}

func identityErr(format string, args ...any) error {
	return &IdentityError{Message: fmt.Sprintf(format, args...)}
}

func invalidIR(format string, args ...any) error {
	return &IdentityError{InvalidIR: true, Message: fmt.Sprintf(format, args...)}
}

package pg

// The syntax tree produced by Parse. Positions point at the first character
// of the construct they describe; Analyze turns a File into a checked Shape.

// File is one parsed `.pg` source.
type File struct {
	Name  string // file name used in error messages
	Decls []Decl
}

// Decl is an *InterfaceDecl, *NodeDecl or *EdgeDecl.
type Decl interface{ declPos() Pos }

// InterfaceDecl is `interface Name { prop* }`.
type InterfaceDecl struct {
	Pos        Pos
	Name       string
	NamePos    Pos
	Properties []*PropDecl
}

// NodeDecl is `node Name @ann* [implements A, B] { (prop | constraint)* }`.
type NodeDecl struct {
	Pos         Pos
	Name        string
	NamePos     Pos
	Annotations []*Annotation
	Implements  []TypeRef
	Properties  []*PropDecl
	Constraints []*Constraint // body constraints only (property annotations are desugared later)
}

// EdgeDecl is `edge Name: From -> To [@card(min..max)] @ann* [{ … }]`.
type EdgeDecl struct {
	Pos         Pos
	Name        string
	NamePos     Pos
	From, To    TypeRef
	Card        Cardinality
	CardPos     Pos
	Annotations []*Annotation
	Properties  []*PropDecl
	Constraints []*Constraint
}

func (d *InterfaceDecl) declPos() Pos { return d.Pos }
func (d *NodeDecl) declPos() Pos      { return d.Pos }
func (d *EdgeDecl) declPos() Pos      { return d.Pos }

// TypeRef is a type name used in `implements` or an edge endpoint.
type TypeRef struct {
	Name string
	Pos  Pos
}

// PropDecl is `name: Type annotation*`.
type PropDecl struct {
	Pos         Pos
	Name        string
	Type        PropType
	TypePos     Pos
	Annotations []*Annotation
}

// Annotation is `@name`, `@name(value)` or `@name(value, k = literal, …)`.
// Value holds the decoded positional argument (string literals unquoted and
// unescaped; identifiers and numbers verbatim).
type Annotation struct {
	Pos      Pos
	Name     string
	Value    *string
	Kwargs   map[string]string
	KwargPos map[string]Pos
}

// ConstraintKind names a body constraint.
type ConstraintKind string

// The body constraint kinds (their source spelling).
const (
	KeyConstraint    ConstraintKind = "key"
	UniqueConstraint ConstraintKind = "unique"
	IndexConstraint  ConstraintKind = "index"
	RangeConstraint  ConstraintKind = "range"
	CheckConstraint  ConstraintKind = "check"
)

// Constraint is a body constraint (`@key(a, b)`, `@range(p, 0..10)`, …) or a
// property-level `@key`/`@unique`/`@index` desugared into one.
type Constraint struct {
	Pos      Pos
	Kind     ConstraintKind
	Columns  []string // key/unique/index
	ColPos   []Pos
	Property string // range/check
	PropPos  Pos
	Min, Max *Bound // range; nil = open
	Pattern  string // check
}

// Bound is a numeric @range bound: an integer when the literal fits an i64,
// otherwise a float.
type Bound struct {
	IsFloat bool
	Int     int64
	Float   float64
}

// Cardinality is an edge's `@card(min..max)`; Max nil means unbounded.
// The default is 0..*.
type Cardinality struct {
	Min uint32
	Max *uint32
}

package pg

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Shape is the canonical, identity-free meaning of a schema (the reference's
// SchemaShape): declarations and properties sorted by name, constraints
// canonicalized, rename hints kept aside. Comments, whitespace and
// declaration order do not change it; its Hash is `schema_shape_hash`.
type Shape struct {
	Interfaces []*InterfaceShape
	Nodes      []*NodeShape
	Edges      []*EdgeShape
}

// InterfaceShape is one interface.
type InterfaceShape struct {
	Name       string
	Properties []*PropertyShape
}

// NodeShape is one node type with its effective (interface-merged)
// properties.
type NodeShape struct {
	Name        string
	RenameFrom  *string // @rename_from hint; not part of the shape hash
	Annotations []Annot
	Implements  []string
	Properties  []*PropertyShape
	Constraints []Constr
}

// EdgeShape is one edge type.
type EdgeShape struct {
	Name        string
	RenameFrom  *string
	From, To    string
	Card        Cardinality
	Annotations []Annot
	Properties  []*PropertyShape
	Constraints []Constr
}

// PropertyShape is one effective property.
type PropertyShape struct {
	Name       string
	RenameFrom *string
	Type       PropType
	// Annotations are the opaque ones (@description, custom…); @key, @unique,
	// @index, @embed and @rename_from are represented by typed fields.
	Annotations []Annot
	// PropertyConstraints holds "key", "unique", "index" (in that order) for
	// property-level annotations.
	PropertyConstraints []string
	Embed               *EmbedSpec
	// DeclaredDirectly is false only for node properties injected from an
	// interface.
	DeclaredDirectly bool
	// Satisfies lists the interface properties this node property fulfils,
	// sorted by (interface, property).
	Satisfies []InterfacePropRef
}

// InterfacePropRef names an interface property.
type InterfacePropRef struct{ Interface, Property string }

// EmbedSpec is `@embed("source"[, model="…"])` on a Vector property.
type EmbedSpec struct {
	Source string
	Model  *string
}

// Annot is an opaque annotation value.
type Annot struct {
	Name   string
	Value  *string
	Kwargs map[string]string
}

// Constr is a canonical constraint (no positions).
type Constr struct {
	Kind     ConstraintKind
	Columns  []string // key/unique/index
	Property string   // range/check
	Min, Max *Bound   // range
	Pattern  string   // check
}

// propertyConstraintOrder is the reference enum order Key < Unique < Index.
var propertyConstraintOrder = map[string]int{"key": 0, "unique": 1, "index": 2}

func (a Annot) json() jv {
	o := obj("name", a.Name, "value", optStr(a.Value))
	if len(a.Kwargs) > 0 {
		kw := &jobject{}
		for _, k := range slices.Sorted(maps.Keys(a.Kwargs)) {
			kw.add(k, a.Kwargs[k])
		}
		o.add("kwargs", kw)
	}
	return o
}

func optStr(s *string) jv {
	if s == nil {
		return nil
	}
	return *s
}

func (b *Bound) json() jv {
	if b == nil {
		return nil
	}
	if b.IsFloat {
		return obj("Float", b.Float)
	}
	return obj("Integer", b.Int)
}

// debug renders Option<ConstraintBound> like Rust's `{:?}`.
func (b *Bound) debug() string {
	switch {
	case b == nil:
		return "None"
	case b.IsFloat:
		return "Some(Float(" + formatFloatRustDebug(b.Float) + "))"
	}
	return "Some(Integer(" + strconv.FormatInt(b.Int, 10) + "))"
}

func (b *Bound) equal(o *Bound) bool {
	if b == nil || o == nil {
		return b == o
	}
	return *b == *o
}

// sortKey is the reference's canonical constraint ordering key.
func (c Constr) sortKey() string {
	switch c.Kind {
	case RangeConstraint:
		return "range:" + c.Property + ":" + c.Min.debug() + ":" + c.Max.debug()
	case CheckConstraint:
		return "check:" + c.Property + ":" + c.Pattern
	}
	return string(c.Kind) + ":" + strings.Join(c.Columns, ",")
}

func (c Constr) equal(o Constr) bool {
	return c.Kind == o.Kind && slices.Equal(c.Columns, o.Columns) && c.Property == o.Property &&
		c.Min.equal(o.Min) && c.Max.equal(o.Max) && c.Pattern == o.Pattern
}

// json renders the AST Constraint enum (externally tagged) used by the shape.
func (c Constr) json() jv {
	switch c.Kind {
	case RangeConstraint:
		return obj("Range", obj("property", c.Property, "min", c.Min.json(), "max", c.Max.json()))
	case CheckConstraint:
		return obj("Check", obj("property", c.Property, "pattern", c.Pattern))
	}
	tag := map[ConstraintKind]string{KeyConstraint: "Key", UniqueConstraint: "Unique", IndexConstraint: "Index"}[c.Kind]
	return obj(tag, strs(c.Columns))
}

func (c Cardinality) json() jv {
	var max jv
	if c.Max != nil {
		max = uint64(*c.Max)
	}
	return obj("min", uint64(c.Min), "max", max)
}

// canonicalConstraints sorts/dedups key/unique/index columns, orders the
// constraints by sort key and drops consecutive duplicates.
func canonicalConstraints(in []Constr) []Constr {
	out := make([]Constr, 0, len(in))
	for _, c := range in {
		if c.Columns != nil {
			c.Columns = slices.Compact(slices.Sorted(slices.Values(c.Columns)))
		}
		out = append(out, c)
	}
	slices.SortStableFunc(out, func(a, b Constr) int { return cmp.Compare(a.sortKey(), b.sortKey()) })
	return slices.CompactFunc(out, Constr.equal)
}

// canonicalAnnotations drops the typed annotations, then sorts the rest by
// their compact JSON and removes duplicates.
func canonicalAnnotations(in []*Annotation) []Annot {
	var out []Annot
	for _, a := range in {
		switch a.Name {
		case "rename_from", "embed", "key", "unique", "index":
			continue
		}
		out = append(out, Annot{Name: a.Name, Value: a.Value, Kwargs: a.Kwargs})
	}
	slices.SortStableFunc(out, func(a, b Annot) int { return cmp.Compare(compactJSON(a.json()), compactJSON(b.json())) })
	return slices.CompactFunc(out, func(a, b Annot) bool { return compactJSON(a.json()) == compactJSON(b.json()) })
}

func annotsJSON(as []Annot) []jv { return list(as, func(a Annot) jv { return a.json() }) }

func (p *PropertyShape) json() jv {
	var embed jv
	if p.Embed != nil {
		embed = obj("property_name", p.Embed.Source, "model", optStr(p.Embed.Model))
	}
	return obj("name", p.Name, "prop_type", p.Type.json(), "annotations", annotsJSON(p.Annotations),
		"property_constraints", strs(p.PropertyConstraints), "embed_source", embed,
		"declared_directly", p.DeclaredDirectly,
		"satisfies_interface_properties", list(p.Satisfies, func(r InterfacePropRef) jv {
			return obj("owner_name", r.Interface, "property_name", r.Property)
		}))
}

func propsJSON(ps []*PropertyShape) []jv {
	return list(ps, func(p *PropertyShape) jv { return p.json() })
}

func consJSON(cs []Constr) []jv { return list(cs, func(c Constr) jv { return c.json() }) }

func (s *Shape) json() jv {
	return obj(
		"interfaces", list(s.Interfaces, func(i *InterfaceShape) jv {
			return obj("name", i.Name, "properties", propsJSON(i.Properties))
		}),
		"nodes", list(s.Nodes, func(n *NodeShape) jv {
			return obj("name", n.Name, "annotations", annotsJSON(n.Annotations), "implements", strs(n.Implements),
				"properties", propsJSON(n.Properties), "constraints", consJSON(n.Constraints))
		}),
		"edges", list(s.Edges, func(e *EdgeShape) jv {
			return obj("name", e.Name, "from_type", e.From, "to_type", e.To, "cardinality", e.Card.json(),
				"annotations", annotsJSON(e.Annotations), "properties", propsJSON(e.Properties),
				"constraints", consJSON(e.Constraints))
		}),
	)
}

// JSON is the compact canonical encoding of the shape (serde_json of the
// reference SchemaShape; rename hints omitted).
func (s *Shape) JSON() string { return compactJSON(s.json()) }

// Hash is `schema_shape_hash`: "sha256:" + lowercase hex SHA-256 of JSON().
func (s *Shape) Hash() string { return sha256Hash(s.JSON()) }

// Node returns the node shape with the given name, or nil.
func (s *Shape) Node(name string) *NodeShape {
	for _, n := range s.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Edge returns the edge shape with the given name, or nil.
func (s *Shape) Edge(name string) *EdgeShape {
	for _, e := range s.Edges {
		if e.Name == name {
			return e
		}
	}
	return nil
}

package migrate

import (
	"slices"
	"strings"

	"github.com/omnigraph/omnigraph-worker/graph/pg"
)

// TypeKind is the kind of declaration a step is about (JSON "type_kind").
type TypeKind string

// The declaration kinds.
const (
	Interface TypeKind = "interface"
	Node      TypeKind = "node"
	Edge      TypeKind = "edge"
)

// DropMode says what a drop does to stored data (JSON "mode").
type DropMode string

// The drop modes. The planner emits Soft; WithDataLoss promotes every drop to Hard.
const (
	// Soft removes the type or property from the current graph version only: the table or
	// column stays on disk and earlier versions still read it until cleanup.
	Soft DropMode = "soft"
	// Hard also removes the data (the dataset, or the column's earlier versions) at apply
	// time: irreversible, applied only with --allow-data-loss.
	Hard DropMode = "hard"
)

// StepKind is a step's JSON "kind".
type StepKind string

// The step kinds, in the order the reference declares them.
const (
	AddType        StepKind = "add_type"
	RenameType     StepKind = "rename_type"
	AddProperty    StepKind = "add_property"
	RenameProperty StepKind = "rename_property"
	AddConstraint  StepKind = "add_constraint"
	// DropConstraint removes an @index: this project's step, not the reference's (whose
	// planner refuses every constraint removal). Only an index is ever dropped.
	DropConstraint         StepKind = "drop_constraint"
	ExtendEnum             StepKind = "extend_enum"
	UpdateTypeMetadata     StepKind = "update_type_metadata"
	UpdatePropertyMetadata StepKind = "update_property_metadata"
	DropType               StepKind = "drop_type"
	DropProperty           StepKind = "drop_property"
	UnsupportedChange      StepKind = "unsupported_change"
)

// StepKinds lists every step kind in declaration order.
var StepKinds = []StepKind{AddType, RenameType, AddProperty, RenameProperty, AddConstraint, DropConstraint, ExtendEnum,
	UpdateTypeMetadata, UpdatePropertyMetadata, DropType, DropProperty, UnsupportedChange}

// Step is one migration step. Which fields a kind uses (and so its JSON keys, in this order):
//
//	add_type                  type_kind, name
//	rename_type               type_kind, from, to
//	add_property              type_kind, type_name, property_name, property_type
//	rename_property           type_kind, type_name, from, to
//	add_constraint            type_kind, type_name, constraint
//	extend_enum               type_kind, type_name, property_name, added_values
//	update_type_metadata      type_kind, name, annotations
//	update_property_metadata  type_kind, type_name, property_name, annotations
//	drop_type                 type_kind, name, mode
//	drop_property             type_kind, type_name, property_name, mode
//	unsupported_change        entity, reason, code (only when the refusal has one)
//
// Names are the desired schema's, except a drop's (the accepted name of what goes) and a
// rename's From. Steps apply in order: a property step after a rename_type names the new
// type, an extend_enum after a rename_property names the new property.
type Step struct {
	Kind     StepKind
	TypeKind TypeKind

	Name         string // add_type, drop_type, update_type_metadata: the type
	TypeName     string // the owning type of property steps and add_constraint
	From, To     string // rename_type (types), rename_property (properties)
	PropertyName string
	PropertyType *pg.PropType
	Constraint   *pg.Constr
	AddedValues  []string
	Annotations  []pg.Annot // the type's or property's complete @description/@instruction set
	Mode         DropMode

	Entity string // unsupported_change: "node:Person.age", "edge:Knows", "schema", …
	Reason string
	Code   string // a Codes entry, or "" when the refusal has none

	// Identity is what the step touches by stable identity. It is not part of the JSON: a
	// plan read back from JSON has none.
	Identity Identity
}

// Identity is a step's stable identities, for an apply to address tables and columns by id
// rather than by name. Zero where it does not apply.
type Identity struct {
	// TypeID is the type's stable id (a node's or edge's stable_table_id). A rename keeps it.
	TypeID uint64
	// IncarnationID is a node's or edge's table_incarnation_id (0 for an interface).
	IncarnationID uint64
	// PropertyID is the property's stable id, on property steps. A rename keeps it.
	PropertyID uint64
}

// TableKey is the node or edge table a step concerns, as named once it has applied
// ("node:Person"; for a rename_type the new name, for a drop the dropped one); "" for an
// interface, an unsupported change or an add_constraint of an unknown kind.
func (s Step) TableKey() string {
	if s.TypeKind != Node && s.TypeKind != Edge {
		return ""
	}
	switch s.Kind {
	case AddType, DropType, UpdateTypeMetadata:
		return string(s.TypeKind) + ":" + s.Name
	case RenameType:
		return string(s.TypeKind) + ":" + s.To
	case UnsupportedChange:
		return ""
	}
	return string(s.TypeKind) + ":" + s.TypeName
}

// IsDrop reports whether the step removes a type or a property.
func (s Step) IsDrop() bool { return s.Kind == DropType || s.Kind == DropProperty }

// UnsupportedMessage is an unsupported_change's message, "[code] reason" when it has a code;
// "" for every other kind.
func (s Step) UnsupportedMessage() string {
	switch {
	case s.Kind != UnsupportedChange:
		return ""
	case s.Code != "":
		return "[" + s.Code + "] " + s.Reason
	}
	return s.Reason
}

// Equal compares two steps field by field (Identity included).
func (s Step) Equal(o Step) bool {
	return s.Kind == o.Kind && s.TypeKind == o.TypeKind && s.Name == o.Name && s.TypeName == o.TypeName &&
		s.From == o.From && s.To == o.To && s.PropertyName == o.PropertyName &&
		propTypeEqual(s.PropertyType, o.PropertyType) && constrEqual(s.Constraint, o.Constraint) &&
		slices.Equal(s.AddedValues, o.AddedValues) && annotsEqual(s.Annotations, o.Annotations) &&
		s.Mode == o.Mode && s.Entity == o.Entity && s.Reason == o.Reason && s.Code == o.Code &&
		s.Identity == o.Identity
}

func propTypeEqual(a, b *pg.PropType) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

func boundEqual(a, b *pg.Bound) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func constrEqual(a, b *pg.Constr) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Kind == b.Kind && slices.Equal(a.Columns, b.Columns) && a.Property == b.Property &&
		boundEqual(a.Min, b.Min) && boundEqual(a.Max, b.Max) && a.Pattern == b.Pattern
}

func strPtrEqual(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func annotEqual(a, b pg.Annot) bool {
	if a.Name != b.Name || !strPtrEqual(a.Value, b.Value) || len(a.Kwargs) != len(b.Kwargs) {
		return false
	}
	for k, v := range a.Kwargs {
		if w, ok := b.Kwargs[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func annotsEqual(a, b []pg.Annot) bool { return slices.EqualFunc(a, b, annotEqual) }

// Plan is a migration plan: the ordered steps from the accepted schema to the desired one,
// and whether every one of them is supported.
type Plan struct {
	Supported bool
	Steps     []Step
	// Accepted and Desired are the identity-bearing schemas the plan was made from (nil for a
	// plan read from JSON): an apply writes Desired as the new accepted schema.
	Accepted, Desired *pg.SchemaIR
}

// Unsupported returns the plan's unsupported_change steps.
func (p *Plan) Unsupported() []Step {
	var out []Step
	for _, s := range p.Steps {
		if s.Kind == UnsupportedChange {
			out = append(out, s)
		}
	}
	return out
}

// Err is nil for a supported plan, and an *UnsupportedError naming its first refusal
// otherwise: what an apply refuses the plan with.
func (p *Plan) Err() error {
	u := p.Unsupported()
	if len(u) == 0 {
		return nil
	}
	return &UnsupportedError{Step: u[0], Steps: u}
}

// WithDataLoss returns a copy of the plan with every drop promoted to Hard: the plan as an
// apply with --allow-data-loss would run it.
func (p *Plan) WithDataLoss() *Plan {
	q := *p
	q.Steps = slices.Clone(p.Steps)
	for i := range q.Steps {
		if q.Steps[i].IsDrop() {
			q.Steps[i].Mode = Hard
		}
	}
	return &q
}

// WithBackfill returns the plan as an apply that backfills the named required properties
// runs it. names are "<Type>.<property>" of node or edge types; each refusal OG-MF-103
// (adding a required property) on such a name becomes an add_property step of the property's
// required type, its rows to be filled with a value the apply is given. The reference has no
// such option: without one the plan is the reference's. Names no such refusal matches are
// returned and the plan keeps them out.
func (p *Plan) WithBackfill(names []string) (*Plan, []string) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	q := *p
	q.Steps = slices.Clone(p.Steps)
	q.Supported = true
	used := map[string]bool{}
	for i, s := range q.Steps {
		kind, rest, _ := strings.Cut(s.Entity, ":")
		if s.Kind == UnsupportedChange && s.Code == CodeRequiredProperty && (kind == string(Node) || kind == string(Edge)) && want[rest] {
			typeName, prop, _ := strings.Cut(rest, ".")
			if t := desiredProperty(p.Desired, TypeKind(kind), s.Identity); t != nil {
				pt := t.Type
				q.Steps[i] = Step{Kind: AddProperty, TypeKind: TypeKind(kind), TypeName: typeName, PropertyName: prop, PropertyType: &pt, Identity: s.Identity}
				used[rest] = true
			}
		}
		if q.Steps[i].Kind == UnsupportedChange {
			q.Supported = false
		}
	}
	var unused []string
	for _, n := range names {
		if !used[n] {
			unused = append(unused, n)
		}
	}
	return &q, unused
}

func desiredProperty(ir *pg.SchemaIR, kind TypeKind, id Identity) *pg.PropertyIR {
	var props []*pg.PropertyIR
	switch kind {
	case Node:
		for _, n := range ir.Nodes {
			if n.TypeID == id.TypeID {
				props = n.Properties
			}
		}
	case Edge:
		for _, e := range ir.Edges {
			if e.TypeID == id.TypeID {
				props = e.Properties
			}
		}
	}
	for _, q := range props {
		if q.PropertyID == id.PropertyID {
			return q
		}
	}
	return nil
}

package pg

import (
	"cmp"
	"math"
	"slices"
	"strings"
)

// IRVersion is `ir_version` of `_schema.ir.json`.
const IRVersion = 2

// SchemaIR is the accepted, identity-bearing schema (`_schema.ir.json`).
// Type ids, property ids and table incarnation ids share one never-reused,
// monotonically increasing sequence; NextIdentityID is its next value.
type SchemaIR struct {
	IRVersion      uint32
	Domain         string // schema_identity_domain: canonical uppercase ULID
	NextIdentityID uint64
	Interfaces     []*InterfaceIR
	Nodes          []*NodeIR
	Edges          []*EdgeIR
}

// InterfaceIR is an interface with identities.
type InterfaceIR struct {
	Name       string
	TypeID     uint64
	Properties []*PropertyIR
}

// NodeIR is a node type with identities. TypeID is the table's
// stable_table_id.
type NodeIR struct {
	Name          string
	TypeID        uint64
	IncarnationID uint64 // table_incarnation_id
	Annotations   []Annot
	Implements    []TypeRefIR // sorted by (type id, name)
	Properties    []*PropertyIR
	Constraints   []ConstraintIR
}

// EdgeIR is an edge type with identities.
type EdgeIR struct {
	Name          string
	TypeID        uint64
	IncarnationID uint64
	From, To      TypeRefIR
	Card          Cardinality
	Annotations   []Annot
	Properties    []*PropertyIR
	Constraints   []ConstraintIR
}

// PropertyIR is a property with its stable property id.
type PropertyIR struct {
	Name                string
	PropertyID          uint64
	Type                PropType
	Annotations         []Annot
	PropertyConstraints []string
	Embed               *EmbedIR
	DeclaredDirectly    bool
	Satisfies           []PropertyRef // sorted
}

// TypeRefIR references a type by id (and, for diagnostics, name).
type TypeRefIR struct {
	TypeID uint64
	Name   string
}

// PropertyRef references a property of an owner type.
type PropertyRef struct {
	OwnerTypeID  uint64
	OwnerName    string
	PropertyID   uint64
	PropertyName string
}

// EmbedIR is a resolved @embed source.
type EmbedIR struct {
	Source PropertyRef
	Model  *string
}

// System field roles.
const (
	RoleID  = "id"
	RoleSrc = "src"
	RoleDst = "dst"
)

// FieldRef is a constraint member: a property, or a system column
// (id, or src/dst on edges).
type FieldRef struct {
	Property *PropertyRef // nil for system fields
	// System field (Property == nil):
	StableTableID uint64
	TableTypeName string
	IncarnationID uint64
	Role          string
}

// Name is the column name the field refers to.
func (f FieldRef) Name() string {
	if f.Property != nil {
		return f.Property.PropertyName
	}
	return f.Role
}

// ConstraintIR is a constraint with identity-bearing field references.
type ConstraintIR struct {
	Kind     ConstraintKind
	Fields   []FieldRef // key/unique/index
	Field    FieldRef   // range/check
	Min, Max *Bound
	Pattern  string
}

// Diagnostic reports an inert or ignored @rename_from hint.
type Diagnostic struct {
	Kind   string // "inert_initialization_rename_hint" | "ignored_exact_match_rename_hint"
	Entity string // "node:Person" or "node:Person.name"
	Hint   string
}

type typeKind int

const (
	kindInterface typeKind = iota
	kindNode
	kindEdge
)

func (k typeKind) label() string { return [...]string{"interface", "node", "edge"}[k] }

type typeKey struct {
	kind typeKind
	name string
}

func cmpTypeKey(a, b typeKey) int {
	if c := cmp.Compare(a.kind, b.kind); c != 0 {
		return c
	}
	return strings.Compare(a.name, b.name)
}

// acceptedType is a uniform view of an accepted IR declaration.
type acceptedType struct {
	key         typeKey
	typeID      uint64
	incarnation uint64 // 0 for interfaces
	props       []*PropertyIR
}

func (ir *SchemaIR) types() []acceptedType {
	var out []acceptedType
	for _, i := range ir.Interfaces {
		out = append(out, acceptedType{typeKey{kindInterface, i.Name}, i.TypeID, 0, i.Properties})
	}
	for _, n := range ir.Nodes {
		out = append(out, acceptedType{typeKey{kindNode, n.Name}, n.TypeID, n.IncarnationID, n.Properties})
	}
	for _, e := range ir.Edges {
		out = append(out, acceptedType{typeKey{kindEdge, e.Name}, e.TypeID, e.IncarnationID, e.Properties})
	}
	return out
}

// shapeDecl is a uniform view of a desired shape declaration.
type shapeDecl struct {
	key    typeKey
	rename *string
	props  []*PropertyShape
}

func (s *Shape) decls() []shapeDecl {
	var out []shapeDecl
	for _, i := range s.Interfaces {
		out = append(out, shapeDecl{typeKey{kindInterface, i.Name}, nil, i.Properties})
	}
	for _, n := range s.Nodes {
		out = append(out, shapeDecl{typeKey{kindNode, n.Name}, n.RenameFrom, n.Properties})
	}
	for _, e := range s.Edges {
		out = append(out, shapeDecl{typeKey{kindEdge, e.Name}, e.RenameFrom, e.Properties})
	}
	return out
}

type assigned struct {
	typeID      uint64
	incarnation uint64
	matched     bool
}

type allocator struct{ next uint64 }

func (a *allocator) allocate() (uint64, error) {
	if a.next == math.MaxUint64 {
		return 0, identityErr("identity allocator exhausted")
	}
	a.next++
	return a.next - 1, nil
}

// Initialize mints the identities of a brand-new graph: ids start at 1, in
// the reference's canonical order (types by (kind, name) with interfaces <
// nodes < edges; then new properties by (owner id, name); then table
// incarnations by type id). Rename hints are inert and reported.
func Initialize(domain string, shape *Shape) (*SchemaIR, []Diagnostic, error) {
	if err := checkDomain(domain); err != nil {
		return nil, nil, err
	}
	return resolve(domain, 1, nil, shape)
}

// Resolve evolves an accepted SchemaIR to a desired shape: identities survive
// exact-name matches and explicit same-kind, same-owner @rename_from hints;
// everything else gets fresh ids (a drop + re-add never reuses one).
func Resolve(accepted *SchemaIR, shape *Shape) (*SchemaIR, []Diagnostic, error) {
	if err := accepted.Validate(); err != nil {
		return nil, nil, err
	}
	return resolve(accepted.Domain, accepted.NextIdentityID, accepted, shape)
}

func resolve(domain string, next uint64, accepted *SchemaIR, shape *Shape) (*SchemaIR, []Diagnostic, error) {
	if next == 0 {
		return nil, nil, identityErr("next_identity_id must be nonzero")
	}
	var acc []acceptedType
	if accepted != nil {
		acc = accepted.types()
	}
	evolving := accepted != nil
	var diags []Diagnostic
	assignments := map[typeKey]*assigned{}
	consumed := map[uint64]bool{}
	for _, d := range shape.decls() {
		var match *acceptedType
		for i := range acc {
			if acc[i].key == d.key {
				match = &acc[i]
			}
		}
		entity := d.key.kind.label() + ":" + d.key.name
		switch {
		case match != nil && d.rename != nil:
			diags = append(diags, Diagnostic{"ignored_exact_match_rename_hint", entity, *d.rename})
		case match == nil && d.rename != nil && !evolving:
			diags = append(diags, Diagnostic{"inert_initialization_rename_hint", entity, *d.rename})
		case match == nil && d.rename != nil:
			hint, found, same := *d.rename, false, []*acceptedType{}
			for i := range acc {
				if acc[i].key.name == hint {
					found = true
					if acc[i].key.kind == d.key.kind {
						same = append(same, &acc[i])
					}
				}
			}
			if !found {
				return nil, nil, identityErr("%s '%s' declares @rename_from(\"%s\") but no accepted declaration has that name", d.key.kind.label(), d.key.name, hint)
			}
			if len(same) != 1 {
				return nil, nil, identityErr("%s '%s' cannot rename accepted '%s' across declaration kinds", d.key.kind.label(), d.key.name, hint)
			}
			match = same[0]
		}
		if match == nil {
			assignments[d.key] = &assigned{}
			continue
		}
		if consumed[match.typeID] {
			return nil, nil, identityErr("accepted %s '%s' is consumed by more than one desired declaration", match.key.kind.label(), match.key.name)
		}
		consumed[match.typeID] = true
		assignments[d.key] = &assigned{typeID: match.typeID, incarnation: match.incarnation, matched: true}
	}
	alloc := &allocator{next: next}
	keys := slices.SortedFunc(func(yield func(typeKey) bool) {
		for k := range assignments {
			if !yield(k) {
				return
			}
		}
	}, cmpTypeKey)
	for _, k := range keys {
		if a := assignments[k]; !a.matched {
			id, err := alloc.allocate()
			if err != nil {
				return nil, nil, err
			}
			a.typeID = id
		}
	}

	type propKey struct {
		owner uint64
		name  string
	}
	propIDs := map[propKey]uint64{}
	consumedProps := map[uint64]bool{}
	var pending []propKey
	for _, d := range shape.decls() {
		owner := assignments[d.key]
		var accOwner *acceptedType
		for i := range acc {
			if acc[i].typeID == owner.typeID {
				accOwner = &acc[i]
			}
		}
		for _, p := range d.props {
			entity := d.key.kind.label() + ":" + d.key.name + "." + p.Name
			var match *PropertyIR
			switch {
			case accOwner != nil:
				for _, ap := range accOwner.props {
					if ap.Name == p.Name {
						match = ap
					}
				}
				if match != nil && p.RenameFrom != nil {
					diags = append(diags, Diagnostic{"ignored_exact_match_rename_hint", entity, *p.RenameFrom})
				}
				if match != nil || p.RenameFrom == nil {
					break
				}
				var local []*PropertyIR
				for _, ap := range accOwner.props {
					if ap.Name == *p.RenameFrom {
						local = append(local, ap)
					}
				}
				if len(local) != 1 {
					detail := "no accepted property with that name exists under the stable owner"
					for _, t := range acc {
						if t.typeID != accOwner.typeID && slices.ContainsFunc(t.props, func(x *PropertyIR) bool { return x.Name == *p.RenameFrom }) {
							detail = "property moves across stable owners are not supported"
						}
					}
					return nil, nil, identityErr("property '%s.%s' declares @rename_from(\"%s\"): %s", d.key.name, p.Name, *p.RenameFrom, detail)
				}
				match = local[0]
			case p.RenameFrom != nil && evolving:
				return nil, nil, identityErr("new owner '%s:%s' cannot import property identity with @rename_from(\"%s\")", d.key.kind.label(), d.key.name, *p.RenameFrom)
			case p.RenameFrom != nil:
				diags = append(diags, Diagnostic{"inert_initialization_rename_hint", entity, *p.RenameFrom})
			}
			k := propKey{owner.typeID, p.Name}
			if match == nil {
				pending = append(pending, k)
				continue
			}
			if consumedProps[match.PropertyID] {
				return nil, nil, identityErr("accepted property id %d is consumed more than once", match.PropertyID)
			}
			consumedProps[match.PropertyID] = true
			propIDs[k] = match.PropertyID
		}
	}
	slices.SortFunc(pending, func(a, b propKey) int {
		if c := cmp.Compare(a.owner, b.owner); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	for _, k := range pending {
		id, err := alloc.allocate()
		if err != nil {
			return nil, nil, err
		}
		propIDs[k] = id
	}
	var needInc []*assigned
	for _, k := range keys {
		if a := assignments[k]; k.kind != kindInterface && a.incarnation == 0 {
			needInc = append(needInc, a)
		}
	}
	slices.SortFunc(needInc, func(a, b *assigned) int { return cmp.Compare(a.typeID, b.typeID) })
	for _, a := range needInc {
		id, err := alloc.allocate()
		if err != nil {
			return nil, nil, err
		}
		a.incarnation = id
	}

	b := &irBuilder{assignments: assignments, propIDs: func(owner uint64, name string) (uint64, bool) {
		id, ok := propIDs[propKey{owner, name}]
		return id, ok
	}}
	ir := &SchemaIR{IRVersion: IRVersion, Domain: domain, NextIdentityID: alloc.next,
		Interfaces: []*InterfaceIR{}, Nodes: []*NodeIR{}, Edges: []*EdgeIR{}}
	for _, i := range shape.Interfaces {
		a := assignments[typeKey{kindInterface, i.Name}]
		ir.Interfaces = append(ir.Interfaces, &InterfaceIR{Name: i.Name, TypeID: a.typeID, Properties: b.props(a.typeID, i.Name, i.Properties)})
	}
	for _, n := range shape.Nodes {
		a := assignments[typeKey{kindNode, n.Name}]
		impl := []TypeRefIR{}
		for _, name := range n.Implements {
			impl = append(impl, b.typeRef(kindInterface, name))
		}
		slices.SortFunc(impl, func(x, y TypeRefIR) int {
			return cmp.Or(cmp.Compare(x.TypeID, y.TypeID), strings.Compare(x.Name, y.Name))
		})
		ir.Nodes = append(ir.Nodes, &NodeIR{Name: n.Name, TypeID: a.typeID, IncarnationID: a.incarnation,
			Annotations: n.Annotations, Implements: impl, Properties: b.props(a.typeID, n.Name, n.Properties),
			Constraints: b.constraints(kindNode, a, n.Name, n.Constraints)})
	}
	for _, e := range shape.Edges {
		a := assignments[typeKey{kindEdge, e.Name}]
		ir.Edges = append(ir.Edges, &EdgeIR{Name: e.Name, TypeID: a.typeID, IncarnationID: a.incarnation,
			From: b.typeRef(kindNode, e.From), To: b.typeRef(kindNode, e.To), Card: e.Card,
			Annotations: e.Annotations, Properties: b.props(a.typeID, e.Name, e.Properties),
			Constraints: b.constraints(kindEdge, a, e.Name, e.Constraints)})
	}
	if b.err != nil {
		return nil, nil, b.err
	}
	if err := ir.Validate(); err != nil {
		return nil, nil, err
	}
	return ir, diags, nil
}

// irBuilder turns shape declarations into IR, remembering the first error.
type irBuilder struct {
	assignments map[typeKey]*assigned
	propIDs     func(owner uint64, name string) (uint64, bool)
	err         error
}

func (b *irBuilder) typeRef(k typeKind, name string) TypeRefIR {
	a := b.assignments[typeKey{k, name}]
	if a == nil {
		if b.err == nil {
			b.err = identityErr("unknown %s '%s'", k.label(), name)
		}
		return TypeRefIR{Name: name}
	}
	return TypeRefIR{TypeID: a.typeID, Name: name}
}

func (b *irBuilder) propRef(owner uint64, ownerName, name string) PropertyRef {
	id, ok := b.propIDs(owner, name)
	if !ok && b.err == nil {
		b.err = identityErr("unknown property reference '%s.%s'", ownerName, name)
	}
	return PropertyRef{OwnerTypeID: owner, OwnerName: ownerName, PropertyID: id, PropertyName: name}
}

func (b *irBuilder) props(owner uint64, ownerName string, ps []*PropertyShape) []*PropertyIR {
	out := []*PropertyIR{}
	for _, p := range ps {
		id, _ := b.propIDs(owner, p.Name)
		pir := &PropertyIR{Name: p.Name, PropertyID: id, Type: p.Type, Annotations: p.Annotations,
			PropertyConstraints: p.PropertyConstraints, DeclaredDirectly: p.DeclaredDirectly, Satisfies: []PropertyRef{}}
		if p.Embed != nil {
			pir.Embed = &EmbedIR{Source: b.propRef(owner, ownerName, p.Embed.Source), Model: p.Embed.Model}
		}
		for _, s := range p.Satisfies {
			iface := b.typeRef(kindInterface, s.Interface)
			pir.Satisfies = append(pir.Satisfies, b.propRef(iface.TypeID, s.Interface, s.Property))
		}
		slices.SortFunc(pir.Satisfies, cmpPropertyRef)
		out = append(out, pir)
	}
	return out
}

func cmpPropertyRef(x, y PropertyRef) int {
	return cmp.Or(cmp.Compare(x.OwnerTypeID, y.OwnerTypeID), strings.Compare(x.OwnerName, y.OwnerName),
		cmp.Compare(x.PropertyID, y.PropertyID), strings.Compare(x.PropertyName, y.PropertyName))
}

func (b *irBuilder) field(k typeKind, a *assigned, owner, name string) FieldRef {
	if name == RoleID || (k == kindEdge && (name == RoleSrc || name == RoleDst)) {
		return FieldRef{StableTableID: a.typeID, TableTypeName: owner, IncarnationID: a.incarnation, Role: name}
	}
	r := b.propRef(a.typeID, owner, name)
	return FieldRef{Property: &r}
}

func (b *irBuilder) constraints(k typeKind, a *assigned, owner string, cs []Constr) []ConstraintIR {
	out := []ConstraintIR{}
	for _, c := range cs {
		ci := ConstraintIR{Kind: c.Kind, Min: c.Min, Max: c.Max, Pattern: c.Pattern}
		switch c.Kind {
		case KeyConstraint, UniqueConstraint, IndexConstraint:
			ci.Fields = []FieldRef{}
			for _, col := range c.Columns {
				ci.Fields = append(ci.Fields, b.field(k, a, owner, col))
			}
		default:
			ci.Field = b.field(k, a, owner, c.Property)
		}
		out = append(out, ci)
	}
	return out
}

// Package migrate plans a schema migration: given a graph's accepted schema (its
// identity-bearing SchemaIR) and a desired one, the ordered steps that turn the first into
// the second, and whether every one of them is supported — the reference engine's
// `schema plan`, step for step.
//
// Renames are told by stable identity, never guessed from names: pg.Resolve carries a type's
// or property's id over to a desired declaration of the same name, or to one that names it
// in @rename_from; a declaration left without an accepted id is new (add_*), an accepted one
// no desired declaration took is dropped (drop_*, soft). The plan visits interfaces, then
// nodes, then edges, each in the desired schema's order (by name) and then the accepted
// declarations no desired one took; within a type: rename, type-level checks, metadata,
// each property (rename, type, @embed, property constraints, provenance, metadata) then the
// dropped properties, then table constraints. Changes outside the migration rules become
// unsupported_change steps, and the plan is supported only without them.
//
// Planning writes nothing and reads nothing but its arguments. docs/schema-evolution.md
// lists the steps, their JSON and every refusal.
package migrate

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/omnigraph/omnigraph-worker/graph/pg"
)

// PlanSchema compiles src (named file in errors) and plans the migration from accepted to
// it: the desired schema's identities are resolved from accepted (pg.Resolve), whose
// diagnostics (ignored @rename_from hints) are returned beside the plan.
func PlanSchema(accepted *pg.SchemaIR, file, src string) (*Plan, []pg.Diagnostic, error) {
	shape, err := pg.CompileFile(file, src)
	if err != nil {
		return nil, nil, err
	}
	desired, diags, err := pg.Resolve(accepted, shape)
	if err != nil {
		return nil, nil, err
	}
	p, err := PlanIR(accepted, desired)
	return p, diags, err
}

// PlanIR plans the migration from accepted to desired, two valid SchemaIRs of one identity
// domain, desired evolved from accepted (pg.Resolve): no id of desired may move to another
// kind, owner or table incarnation, and a new id must come from above accepted's
// next_identity_id. A violation is a *pg.IdentityError; a change the rules refuse is not an
// error but an unsupported_change step.
func PlanIR(accepted, desired *pg.SchemaIR) (*Plan, error) {
	if accepted == nil || desired == nil {
		return nil, &pg.IdentityError{Message: "migration planning needs an accepted and a desired schema IR"}
	}
	if err := accepted.Validate(); err != nil {
		return nil, err
	}
	if err := desired.Validate(); err != nil {
		return nil, err
	}
	if accepted.Domain != desired.Domain {
		return nil, &pg.IdentityError{Message: "migration planning requires accepted and desired IR in the same identity domain"}
	}
	if err := checkEvolution(accepted, desired); err != nil {
		return nil, err
	}
	var p planner
	p.interfaces(accepted.Interfaces, desired.Interfaces)
	p.nodes(accepted.Nodes, desired.Nodes)
	p.edges(accepted.Edges, desired.Edges)
	if len(p.steps) == 0 && accepted.Hash() != desired.Hash() {
		// A difference none of the rules names (a bare next_identity_id bump, say) is refused
		// rather than recorded as no change.
		p.add(Step{Kind: UnsupportedChange, Entity: "schema", Reason: "schema migration contains an unclassified semantic IR change"})
	}
	plan := &Plan{Supported: true, Steps: p.steps, Accepted: accepted, Desired: desired}
	for _, s := range plan.Steps {
		if s.Kind == UnsupportedChange {
			plan.Supported = false
		}
	}
	return plan, nil
}

func identityErr(format string, args ...any) error {
	return &pg.IdentityError{Message: fmt.Sprintf(format, args...)}
}

// checkEvolution refuses a desired IR whose identities do not descend from accepted's.
func checkEvolution(accepted, desired *pg.SchemaIR) error {
	if desired.NextIdentityID < accepted.NextIdentityID {
		return identityErr("desired next_identity_id %d regresses accepted high-water mark %d", desired.NextIdentityID, accepted.NextIdentityID)
	}
	type typeInfo struct {
		kind        TypeKind
		incarnation uint64 // 0 for an interface
	}
	type declared struct {
		id   uint64
		info typeInfo
	}
	types := func(ir *pg.SchemaIR) []declared {
		var out []declared
		for _, i := range ir.Interfaces {
			out = append(out, declared{i.TypeID, typeInfo{Interface, 0}})
		}
		for _, n := range ir.Nodes {
			out = append(out, declared{n.TypeID, typeInfo{Node, n.IncarnationID}})
		}
		for _, e := range ir.Edges {
			out = append(out, declared{e.TypeID, typeInfo{Edge, e.IncarnationID}})
		}
		return out
	}
	acc := map[uint64]typeInfo{}
	for _, t := range types(accepted) {
		acc[t.id] = t.info
	}
	for _, t := range types(desired) {
		prev, known := acc[t.id]
		switch {
		case known && prev != t.info:
			return identityErr("stable type id %d changes declaration kind or table incarnation", t.id)
		case !known && t.id < accepted.NextIdentityID:
			return identityErr("new stable type id %d reuses retired allocator space", t.id)
		case !known && t.info.incarnation != 0 && t.info.incarnation < accepted.NextIdentityID:
			return identityErr("new table incarnation id %d reuses retired allocator space", t.info.incarnation)
		}
	}
	// Each property's id and its owner's.
	props := func(ir *pg.SchemaIR) [][2]uint64 {
		var out [][2]uint64
		add := func(owner uint64, ps []*pg.PropertyIR) {
			for _, p := range ps {
				out = append(out, [2]uint64{p.PropertyID, owner})
			}
		}
		for _, i := range ir.Interfaces {
			add(i.TypeID, i.Properties)
		}
		for _, n := range ir.Nodes {
			add(n.TypeID, n.Properties)
		}
		for _, e := range ir.Edges {
			add(e.TypeID, e.Properties)
		}
		return out
	}
	owner := map[uint64]uint64{}
	for _, p := range props(accepted) {
		owner[p[0]] = p[1]
	}
	for _, p := range props(desired) {
		prev, known := owner[p[0]]
		switch {
		case known && prev != p[1]:
			return identityErr("stable property id %d moves across owners", p[0])
		case !known && p[0] < accepted.NextIdentityID:
			return identityErr("new stable property id %d reuses retired allocator space", p[0])
		}
	}
	return nil
}

// planner accumulates the steps in order.
type planner struct{ steps []Step }

func (p *planner) add(s Step) { p.steps = append(p.steps, s) }

// addOnce adds s unless an equal step (identities aside) is already planned: a property-level
// @index and the table constraint it desugars to are one add_constraint.
func (p *planner) addOnce(s Step) {
	bare := s
	bare.Identity = Identity{}
	for _, t := range p.steps {
		t.Identity = Identity{}
		if t.Equal(bare) {
			return
		}
	}
	p.add(s)
}

// owner is the type whose parts are being planned.
type owner struct {
	kind TypeKind
	name string // the desired name
	id   Identity
}

func (o owner) entity() string { return string(o.kind) + ":" + o.name }

func (o owner) propEntity(prop string) string { return o.entity() + "." + prop }

func (o owner) unsupported(entity, code, format string, args ...any) Step {
	return Step{Kind: UnsupportedChange, Entity: entity, Reason: fmt.Sprintf(format, args...), Code: code, Identity: o.id}
}

func (p *planner) interfaces(accepted, desired []*pg.InterfaceIR) {
	byID := map[uint64]*pg.InterfaceIR{}
	for _, i := range accepted {
		byID[i.TypeID] = i
	}
	taken := map[uint64]bool{}
	for _, i := range desired {
		o := owner{Interface, i.Name, Identity{TypeID: i.TypeID}}
		prev := byID[i.TypeID]
		if prev == nil {
			p.add(Step{Kind: AddType, TypeKind: Interface, Name: i.Name, Identity: o.id})
			continue
		}
		taken[i.TypeID] = true
		if prev.Name != i.Name {
			p.add(o.unsupported(o.entity(), "", "renaming interfaces is not supported in schema migration v1"))
		}
		p.properties(o, prev.Properties, i.Properties)
	}
	for _, i := range accepted {
		if !taken[i.TypeID] {
			o := owner{Interface, i.Name, Identity{TypeID: i.TypeID}}
			p.add(o.unsupported(o.entity(), "", "removing interface '%s' is not supported in schema migration v1", i.Name))
		}
	}
}

func (p *planner) nodes(accepted, desired []*pg.NodeIR) {
	byID := map[uint64]*pg.NodeIR{}
	for _, n := range accepted {
		byID[n.TypeID] = n
	}
	taken := map[uint64]bool{}
	for _, n := range desired {
		o := owner{Node, n.Name, Identity{TypeID: n.TypeID, IncarnationID: n.IncarnationID}}
		prev := byID[n.TypeID]
		if prev == nil {
			p.add(Step{Kind: AddType, TypeKind: Node, Name: n.Name, Identity: o.id})
			continue
		}
		taken[n.TypeID] = true
		if prev.Name != n.Name {
			p.add(Step{Kind: RenameType, TypeKind: Node, From: prev.Name, To: n.Name, Identity: o.id})
		}
		if !slices.Equal(typeIDSet(prev.Implements), typeIDSet(n.Implements)) {
			p.add(o.unsupported(o.entity(), "", "changing implemented interfaces on node '%s' is not supported in schema migration v1", n.Name))
		}
		p.typeMetadata(o, prev.Annotations, n.Annotations)
		p.properties(o, prev.Properties, n.Properties)
		p.constraints(o, prev.Constraints, n.Constraints)
	}
	for _, n := range accepted {
		if !taken[n.TypeID] {
			p.add(Step{Kind: DropType, TypeKind: Node, Name: n.Name, Mode: Soft,
				Identity: Identity{TypeID: n.TypeID, IncarnationID: n.IncarnationID}})
		}
	}
}

func (p *planner) edges(accepted, desired []*pg.EdgeIR) {
	byID := map[uint64]*pg.EdgeIR{}
	for _, e := range accepted {
		byID[e.TypeID] = e
	}
	taken := map[uint64]bool{}
	for _, e := range desired {
		o := owner{Edge, e.Name, Identity{TypeID: e.TypeID, IncarnationID: e.IncarnationID}}
		prev := byID[e.TypeID]
		if prev == nil {
			p.add(Step{Kind: AddType, TypeKind: Edge, Name: e.Name, Identity: o.id})
			continue
		}
		taken[e.TypeID] = true
		if prev.Name != e.Name {
			p.add(Step{Kind: RenameType, TypeKind: Edge, From: prev.Name, To: e.Name, Identity: o.id})
		}
		if prev.From.TypeID != e.From.TypeID || prev.To.TypeID != e.To.TypeID {
			p.add(o.unsupported(o.entity(), "", "changing edge endpoints on '%s' is not supported in schema migration v1", e.Name))
		}
		if !cardEqual(prev.Card, e.Card) {
			p.add(o.unsupported(o.entity(), "", "changing cardinality on edge '%s' is not supported in schema migration v1", e.Name))
		}
		p.typeMetadata(o, prev.Annotations, e.Annotations)
		p.properties(o, prev.Properties, e.Properties)
		p.constraints(o, prev.Constraints, e.Constraints)
	}
	for _, e := range accepted {
		if !taken[e.TypeID] {
			p.add(Step{Kind: DropType, TypeKind: Edge, Name: e.Name, Mode: Soft,
				Identity: Identity{TypeID: e.TypeID, IncarnationID: e.IncarnationID}})
		}
	}
}

func typeIDSet(refs []pg.TypeRefIR) []uint64 {
	out := make([]uint64, 0, len(refs))
	for _, r := range refs {
		out = append(out, r.TypeID)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func cardEqual(a, b pg.Cardinality) bool {
	if a.Min != b.Min || (a.Max == nil) != (b.Max == nil) {
		return false
	}
	return a.Max == nil || *a.Max == *b.Max
}

func (p *planner) properties(o owner, accepted, desired []*pg.PropertyIR) {
	byID := map[uint64]*pg.PropertyIR{}
	for _, q := range accepted {
		byID[q.PropertyID] = q
	}
	taken := map[uint64]bool{}
	for _, q := range desired {
		id := o.id
		id.PropertyID = q.PropertyID
		po := owner{o.kind, o.name, id}
		entity := o.propEntity(q.Name)
		prev := byID[q.PropertyID]
		if prev == nil {
			if q.Type.Nullable {
				t := q.Type
				p.add(Step{Kind: AddProperty, TypeKind: o.kind, TypeName: o.name, PropertyName: q.Name, PropertyType: &t, Identity: id})
			} else {
				p.add(po.unsupported(entity, CodeRequiredProperty,
					"adding required property '%s.%s' requires a backfill and is not supported in schema migration v1", o.name, q.Name))
			}
			continue
		}
		taken[q.PropertyID] = true
		if prev.Name != q.Name {
			p.add(Step{Kind: RenameProperty, TypeKind: o.kind, TypeName: o.name, From: prev.Name, To: q.Name, Identity: id})
		}
		if added, ok := enumWidening(prev.Type, q.Type); ok {
			p.add(Step{Kind: ExtendEnum, TypeKind: o.kind, TypeName: o.name, PropertyName: q.Name, AddedValues: added, Identity: id})
		} else if !prev.Type.Equal(q.Type) {
			p.add(po.unsupported(entity, CodeTypeChange,
				"changing property type for '%s.%s' is not supported in schema migration v1", o.name, q.Name))
		}
		if !embedEqual(prev.Embed, q.Embed) {
			p.add(po.unsupported(entity, "",
				"changing @embed source or model for '%s.%s' is not supported in schema migration v1; rebuild the graph so stored vectors and their declared embedding space cannot diverge", o.name, q.Name))
		}
		p.propertyConstraints(po, q.Name, prev.PropertyConstraints, q.PropertyConstraints)
		if prev.DeclaredDirectly != q.DeclaredDirectly {
			p.add(po.unsupported(entity, "", "changing declaration provenance for '%s.%s' is not supported in schema migration v1", o.name, q.Name))
		}
		if !slices.Equal(satisfiesSet(prev.Satisfies), satisfiesSet(q.Satisfies)) {
			p.add(po.unsupported(entity, "", "changing interface-property satisfaction links for '%s.%s' is not supported in schema migration v1", o.name, q.Name))
		}
		switch meta, unsupported := annotationChange(prev.Annotations, q.Annotations); {
		case unsupported != "":
			p.add(Step{Kind: UnsupportedChange, Entity: entity, Reason: unsupported, Identity: id})
		case meta != nil:
			p.add(Step{Kind: UpdatePropertyMetadata, TypeKind: o.kind, TypeName: o.name, PropertyName: q.Name, Annotations: meta, Identity: id})
		}
	}
	for _, q := range accepted {
		if !taken[q.PropertyID] {
			id := o.id
			id.PropertyID = q.PropertyID
			p.add(Step{Kind: DropProperty, TypeKind: o.kind, TypeName: o.name, PropertyName: q.Name, Mode: Soft, Identity: id})
		}
	}
}

// enumWidening returns the values desired adds when it is a pure widening of accepted: both
// enums of one shape and nullability, every accepted value kept, at least one new. Enum
// values are sorted and unique in the IR, so a reordering is no change at all.
func enumWidening(accepted, desired pg.PropType) ([]string, bool) {
	if !accepted.IsEnum() || !desired.IsEnum() || accepted.Scalar != desired.Scalar || accepted.VectorDim != desired.VectorDim ||
		accepted.Nullable != desired.Nullable || accepted.List != desired.List || slices.Equal(accepted.EnumValues, desired.EnumValues) {
		return nil, false
	}
	for _, v := range accepted.EnumValues {
		if !slices.Contains(desired.EnumValues, v) {
			return nil, false // narrowed, or a value renamed
		}
	}
	var added []string
	for _, v := range desired.EnumValues {
		if !slices.Contains(accepted.EnumValues, v) {
			added = append(added, v)
		}
	}
	return added, true
}

// embedEqual compares @embed bindings by the source's identity and the model: renaming the
// source property (or its type) is no change.
func embedEqual(a, b *pg.EmbedIR) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Source.OwnerTypeID == b.Source.OwnerTypeID && a.Source.PropertyID == b.Source.PropertyID && strPtrEqual(a.Model, b.Model)
}

func satisfiesSet(refs []pg.PropertyRef) [][2]uint64 {
	out := make([][2]uint64, 0, len(refs))
	for _, r := range refs {
		out = append(out, [2]uint64{r.OwnerTypeID, r.PropertyID})
	}
	slices.SortFunc(out, func(a, b [2]uint64) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	return slices.Compact(out)
}

// propertyConstraintOrder is the order property-level constraints are considered in.
var propertyConstraintOrder = []string{"key", "unique", "index"}

func (p *planner) propertyConstraints(o owner, prop string, accepted, desired []string) {
	removed := slices.DeleteFunc(slices.Clone(accepted), func(c string) bool { return slices.Contains(desired, c) })
	switch {
	case len(removed) == 1 && removed[0] == "index":
		// An @index alone may go (this project's rule; the reference refuses every removal).
		id := o.id
		id.PropertyID = 0 // the same step as the table constraint it desugars to
		p.addOnce(Step{Kind: DropConstraint, TypeKind: o.kind, TypeName: o.name,
			Constraint: &pg.Constr{Kind: pg.IndexConstraint, Columns: []string{prop}}, Identity: id})
	case len(removed) > 0:
		p.add(o.unsupported(o.propEntity(prop), "", "removing property constraints from '%s.%s' is not supported in schema migration v1", o.name, prop))
	}
	for _, c := range propertyConstraintOrder {
		if !slices.Contains(desired, c) || slices.Contains(accepted, c) {
			continue
		}
		if c == "index" {
			id := o.id
			id.PropertyID = 0 // the same step as the table constraint it desugars to
			p.addOnce(Step{Kind: AddConstraint, TypeKind: o.kind, TypeName: o.name,
				Constraint: &pg.Constr{Kind: pg.IndexConstraint, Columns: []string{prop}}, Identity: id})
			continue
		}
		p.add(o.unsupported(o.propEntity(prop), "", "adding a property-level @%s constraint to '%s.%s' is not supported in schema migration v1", c, o.name, prop))
	}
}

func (p *planner) constraints(o owner, accepted, desired []pg.ConstraintIR) {
	acc := map[string]pg.ConstraintIR{}
	for _, c := range accepted {
		acc[constraintKey(c)] = c
	}
	des := map[string]pg.ConstraintIR{}
	for _, c := range desired {
		des[constraintKey(c)] = c
	}
	var dropped []string
	onlyIndices := true
	for k, c := range acc {
		if _, ok := des[k]; !ok {
			dropped = append(dropped, k)
			onlyIndices = onlyIndices && c.Kind == pg.IndexConstraint
		}
	}
	slices.Sort(dropped)
	switch {
	case len(dropped) > 0 && onlyIndices:
		for _, k := range dropped {
			p.addOnce(Step{Kind: DropConstraint, TypeKind: o.kind, TypeName: o.name, Constraint: constrOf(acc[k]), Identity: o.id})
		}
	case len(dropped) > 0:
		p.add(o.unsupported(o.entity(), "", "removing constraints from '%s' is not supported in schema migration v1", o.name))
	}
	keys := make([]string, 0, len(des))
	for k := range des {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if _, ok := acc[k]; ok {
			continue
		}
		c := des[k]
		if c.Kind != pg.IndexConstraint {
			p.add(o.unsupported(o.entity(), "", "adding constraint '%s' to '%s' is not supported in schema migration v1", k, o.name))
			continue
		}
		p.addOnce(Step{Kind: AddConstraint, TypeKind: o.kind, TypeName: o.name, Constraint: constrOf(c), Identity: o.id})
	}
}

// constraintKey identifies a constraint by kind and the stable identities of its fields
// (order-insensitive), so that renaming a member property changes nothing.
func constraintKey(c pg.ConstraintIR) string {
	switch c.Kind {
	case pg.RangeConstraint:
		return "range:" + fieldKey(c.Field) + ":" + boundDebug(c.Min) + ":" + boundDebug(c.Max)
	case pg.CheckConstraint:
		return "check:" + fieldKey(c.Field) + ":" + c.Pattern
	}
	keys := make([]string, len(c.Fields))
	for i, f := range c.Fields {
		keys[i] = fieldKey(f)
	}
	slices.Sort(keys)
	return string(c.Kind) + ":" + strings.Join(keys, ",")
}

func fieldKey(f pg.FieldRef) string {
	if f.Property != nil {
		return "property:" + strconv.FormatUint(f.Property.OwnerTypeID, 10) + ":" + strconv.FormatUint(f.Property.PropertyID, 10)
	}
	return "system:" + strconv.FormatUint(f.StableTableID, 10) + ":" + strconv.FormatUint(f.IncarnationID, 10) + ":" + f.Role
}

// boundDebug spells a range bound the way the reference's constraint key does:
// Some(Integer(5)), Some(Float(0.5)), None.
func boundDebug(b *pg.Bound) string {
	switch {
	case b == nil:
		return "None"
	case b.IsFloat:
		return "Some(Float(" + floatDebug(b.Float) + "))"
	}
	return "Some(Integer(" + strconv.FormatInt(b.Int, 10) + "))"
}

// floatDebug is a float as Rust's {:?} prints it: shortest round-trip digits, ".0" on whole
// numbers, exponent form below 1e-4 and from 1e16.
func floatDebug(f float64) string {
	if a := max(f, -f); a != 0 && (a < 1e-4 || a >= 1e16) {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		mant, exp, _ := strings.Cut(s, "e")
		n, _ := strconv.Atoi(exp)
		return mant + "e" + strconv.Itoa(n)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".NI") {
		s += ".0"
	}
	return s
}

// constrOf is a constraint named by its fields' current names, in the IR's order.
func constrOf(c pg.ConstraintIR) *pg.Constr {
	out := &pg.Constr{Kind: c.Kind, Min: c.Min, Max: c.Max, Pattern: c.Pattern}
	switch c.Kind {
	case pg.RangeConstraint, pg.CheckConstraint:
		out.Property = c.Field.Name()
	default:
		out.Columns = make([]string, len(c.Fields))
		for i, f := range c.Fields {
			out.Columns[i] = f.Name()
		}
	}
	return out
}

func (p *planner) typeMetadata(o owner, accepted, desired []pg.Annot) {
	switch meta, unsupported := annotationChange(accepted, desired); {
	case unsupported != "":
		p.add(Step{Kind: UnsupportedChange, Entity: o.entity(), Reason: unsupported, Identity: o.id})
	case meta != nil:
		p.add(Step{Kind: UpdateTypeMetadata, TypeKind: o.kind, Name: o.name, Annotations: meta, Identity: o.id})
	}
}

// metadataAnnotations are the annotations a migration may change freely.
var metadataAnnotations = []string{"description", "instruction"}

// typedAnnotations are carried by typed IR fields, never among the opaque annotations.
var typedAnnotations = []string{"rename_from", "key", "unique", "index"}

// annotationChange classifies an annotation change: a non-nil meta (the desired metadata
// annotations, possibly empty) for a metadata-only change, a reason for an unsupported one,
// neither for none.
func annotationChange(accepted, desired []pg.Annot) (meta []pg.Annot, unsupported string) {
	other := func(as []pg.Annot) []pg.Annot {
		var out []pg.Annot
		for _, a := range as {
			if !slices.Contains(metadataAnnotations, a.Name) && !slices.Contains(typedAnnotations, a.Name) {
				out = append(out, a)
			}
		}
		return out
	}
	metadata := func(as []pg.Annot) []pg.Annot {
		out := []pg.Annot{}
		for _, a := range as {
			if slices.Contains(metadataAnnotations, a.Name) {
				out = append(out, a)
			}
		}
		return out
	}
	if !annotsEqual(other(accepted), other(desired)) {
		return nil, "changing annotations beyond @description/@instruction is not supported in schema migration v1"
	}
	if a, d := metadata(accepted), metadata(desired); !annotsEqual(a, d) {
		return d, ""
	}
	return nil, ""
}

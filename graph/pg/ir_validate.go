package pg

import (
	"slices"
	"strings"

	"github.com/oklog/ulid/v2"
)

// checkDomain requires a canonical (uppercase, 26-char Crockford) ULID.
func checkDomain(s string) error {
	id, err := ulid.ParseStrict(s)
	if err != nil {
		return invalidIR("schema_identity_domain '%s': %v", s, err)
	}
	if id.String() != s {
		return invalidIR("schema_identity_domain '%s' is not a canonical uppercase ULID (expected '%s')", s, id.String())
	}
	return nil
}

func strictlySorted(names []string, what string) error {
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			return invalidIR("%s are not sorted and unique", what)
		}
	}
	return nil
}

func validateAnnots(as []Annot, entity string) error {
	keys := make([]string, len(as))
	for i, a := range as {
		switch a.Name {
		case "rename_from", "embed", "key", "unique", "index":
			return invalidIR("typed annotation @%s leaked into opaque annotations for '%s'", a.Name, entity)
		}
		keys[i] = compactJSON(a.json())
	}
	return strictlySorted(keys, "annotations for '"+entity+"'")
}

type irOwner struct {
	t    acceptedType
	decl any // *InterfaceIR | *NodeIR | *EdgeIR
}

// Validate fails closed on malformed or hand-authored identity authority,
// with the reference's rules: version, canonical domain, globally unique
// nonzero ids below next_identity_id, canonical ordering everywhere, and
// consistent name/id references.
func (ir *SchemaIR) Validate() error {
	if ir.IRVersion != IRVersion {
		return invalidIR("unsupported ir_version %d (expected %d)", ir.IRVersion, IRVersion)
	}
	if err := checkDomain(ir.Domain); err != nil {
		return err
	}
	if ir.NextIdentityID == 0 {
		return invalidIR("next_identity_id must be nonzero")
	}
	types := ir.types()
	ids := map[uint64]string{}
	var maxID uint64
	claim := func(id uint64, entity string) error {
		if id == 0 {
			return invalidIR("%s has a zero identity", entity)
		}
		if prev, ok := ids[id]; ok {
			return invalidIR("identity value %d is reused by '%s' and '%s'", id, prev, entity)
		}
		ids[id], maxID = entity, max(maxID, id)
		return nil
	}
	byID := map[uint64]acceptedType{}
	propByID := map[uint64]struct {
		owner acceptedType
		prop  *PropertyIR
	}{}
	seenKeys := map[typeKey]bool{}
	for _, t := range types {
		if err := claim(t.typeID, t.key.kind.label()+" type '"+t.key.name+"'"); err != nil {
			return err
		}
		if seenKeys[t.key] {
			return invalidIR("duplicate %s name '%s'", t.key.kind.label(), t.key.name)
		}
		seenKeys[t.key], byID[t.typeID] = true, t
		if t.key.kind != kindInterface {
			if err := claim(t.incarnation, "table incarnation for '"+t.key.name+"'"); err != nil {
				return err
			}
		}
		names := make([]string, len(t.props))
		for i, p := range t.props {
			entity := t.key.name + "." + p.Name
			if reservedStorageColumns[p.Name] {
				return invalidIR("property '%s' uses a name reserved for a virtual storage system column", entity)
			}
			if err := claim(p.PropertyID, "property '"+entity+"'"); err != nil {
				return err
			}
			propByID[p.PropertyID] = struct {
				owner acceptedType
				prop  *PropertyIR
			}{t, p}
			if err := validateAnnots(p.Annotations, entity); err != nil {
				return err
			}
			if p.Type.EnumValues != nil {
				if err := strictlySorted(p.Type.EnumValues, "enum values"); err != nil {
					return err
				}
			}
			for j, c := range p.PropertyConstraints {
				o, ok := propertyConstraintOrder[c]
				if !ok || (j > 0 && propertyConstraintOrder[p.PropertyConstraints[j-1]] >= o) {
					return invalidIR("property constraints for '%s' are not sorted and unique", entity)
				}
			}
			names[i] = p.Name
		}
		if err := strictlySorted(names, "properties of '"+t.key.name+"'"); err != nil {
			return err
		}
	}
	if ir.NextIdentityID <= maxID {
		return invalidIR("next_identity_id %d does not exceed allocated id %d", ir.NextIdentityID, maxID)
	}
	for _, l := range [][]string{
		mapSlice(ir.Interfaces, func(i *InterfaceIR) string { return i.Name }),
		mapSlice(ir.Nodes, func(n *NodeIR) string { return n.Name }),
		mapSlice(ir.Edges, func(e *EdgeIR) string { return e.Name }),
	} {
		if err := strictlySorted(l, "declarations"); err != nil {
			return err
		}
	}
	checkRef := func(r PropertyRef, owner uint64) error {
		p, ok := propByID[r.PropertyID]
		if !ok {
			return invalidIR("property reference %d points to a missing ID", r.PropertyID)
		}
		if (owner != 0 && owner != r.OwnerTypeID) || p.owner.typeID != r.OwnerTypeID ||
			p.owner.key.name != r.OwnerName || p.prop.Name != r.PropertyName {
			return invalidIR("property reference name/id/owner mismatch for '%s.%s'", r.OwnerName, r.PropertyName)
		}
		return nil
	}
	checkType := func(r TypeRefIR, k typeKind) error {
		t, ok := byID[r.TypeID]
		if !ok {
			return invalidIR("type reference %d points to a missing ID", r.TypeID)
		}
		if t.key.kind != k || t.key.name != r.Name {
			return invalidIR("type reference name/id mismatch for '%s'", r.Name)
		}
		return nil
	}
	for _, t := range types {
		for _, p := range t.props {
			entity := t.key.name + "." + p.Name
			switch {
			case t.key.kind == kindInterface && (!p.DeclaredDirectly || len(p.Satisfies) > 0):
				return invalidIR("interface property '%s' has invalid concrete provenance", entity)
			case t.key.kind == kindNode && !p.DeclaredDirectly && len(p.Satisfies) == 0:
				return invalidIR("injected node property '%s' has no interface provenance", entity)
			case t.key.kind == kindEdge && (!p.DeclaredDirectly || len(p.Satisfies) > 0 || p.Embed != nil):
				return invalidIR("edge property '%s' has invalid interface provenance", entity)
			}
			if p.Embed != nil {
				if err := checkRef(p.Embed.Source, t.typeID); err != nil {
					return err
				}
			}
			for i, r := range p.Satisfies {
				if err := checkRef(r, 0); err != nil {
					return err
				}
				if byID[r.OwnerTypeID].key.kind != kindInterface {
					return invalidIR("property '%s' satisfaction target is not an interface property", entity)
				}
				if i > 0 && cmpPropertyRef(p.Satisfies[i-1], r) >= 0 {
					return invalidIR("interface satisfaction links for '%s' are not sorted and unique", entity)
				}
			}
		}
	}
	for _, n := range ir.Nodes {
		if err := validateAnnots(n.Annotations, n.Name); err != nil {
			return err
		}
		implemented := map[uint64]bool{}
		for i, r := range n.Implements {
			if err := checkType(r, kindInterface); err != nil {
				return err
			}
			if i > 0 && (n.Implements[i-1].TypeID > r.TypeID ||
				(n.Implements[i-1].TypeID == r.TypeID && n.Implements[i-1].Name >= r.Name)) {
				return invalidIR("type references are not sorted and unique")
			}
			implemented[r.TypeID] = true
		}
		for _, p := range n.Properties {
			for _, r := range p.Satisfies {
				if !implemented[r.OwnerTypeID] {
					return invalidIR("node property '%s.%s' satisfies an interface the node does not implement", n.Name, p.Name)
				}
				if !propByID[r.PropertyID].prop.Type.Equal(p.Type) {
					return invalidIR("node property '%s.%s' is incompatible with satisfied interface property '%s.%s'", n.Name, p.Name, r.OwnerName, r.PropertyName)
				}
			}
		}
		for id := range implemented {
			for _, ip := range byID[id].props {
				if !slices.ContainsFunc(n.Properties, func(p *PropertyIR) bool {
					return slices.ContainsFunc(p.Satisfies, func(r PropertyRef) bool { return r.OwnerTypeID == id && r.PropertyID == ip.PropertyID })
				}) {
					return invalidIR("node '%s' does not link an effective property to interface contract '%s.%s'", n.Name, byID[id].key.name, ip.Name)
				}
			}
		}
		if err := validateConstraintsIR(kindNode, n.TypeID, n.IncarnationID, n.Name, n.Constraints, checkRef); err != nil {
			return err
		}
	}
	for _, e := range ir.Edges {
		if err := validateAnnots(e.Annotations, e.Name); err != nil {
			return err
		}
		for _, r := range []TypeRefIR{e.From, e.To} {
			if err := checkType(r, kindNode); err != nil {
				return err
			}
		}
		if err := validateConstraintsIR(kindEdge, e.TypeID, e.IncarnationID, e.Name, e.Constraints, checkRef); err != nil {
			return err
		}
	}
	return nil
}

func validateConstraintsIR(k typeKind, owner, inc uint64, name string, cs []ConstraintIR, checkRef func(PropertyRef, uint64) error) error {
	keys := make([]string, len(cs))
	for i, c := range cs {
		keys[i] = c.spec().sortKey()
		fields := c.Fields
		if c.Kind == RangeConstraint || c.Kind == CheckConstraint {
			fields = []FieldRef{c.Field}
		}
		for _, f := range fields {
			if f.Property != nil {
				if err := checkRef(*f.Property, owner); err != nil {
					return err
				}
				continue
			}
			okRole := f.Role == RoleID || (k == kindEdge && (f.Role == RoleSrc || f.Role == RoleDst))
			if f.StableTableID != owner || f.IncarnationID != inc || f.TableTypeName != name || !okRole {
				return invalidIR("invalid system-field reference in '%s'", name)
			}
		}
	}
	if err := strictlySorted(keys, "constraints for '"+name+"'"); err != nil {
		return err
	}
	return nil
}

// spec projects an IR constraint back to names.
func (c ConstraintIR) spec() Constr {
	out := Constr{Kind: c.Kind, Min: c.Min, Max: c.Max, Pattern: c.Pattern}
	switch c.Kind {
	case RangeConstraint, CheckConstraint:
		out.Property = c.Field.Name()
	default:
		out.Columns = mapSlice(c.Fields, FieldRef.Name)
	}
	return out
}

// Shape projects the accepted IR back to its canonical identity-free shape
// (the reference's schema_shape_from_ir); its Hash is the recorded
// schema_shape_hash.
func (ir *SchemaIR) Shape() *Shape {
	prop := func(p *PropertyIR) *PropertyShape {
		ps := &PropertyShape{Name: p.Name, Type: p.Type, Annotations: p.Annotations,
			PropertyConstraints: p.PropertyConstraints, DeclaredDirectly: p.DeclaredDirectly}
		if p.Embed != nil {
			ps.Embed = &EmbedSpec{Source: p.Embed.Source.PropertyName, Model: p.Embed.Model}
		}
		ps.Satisfies = mapSlice(p.Satisfies, func(r PropertyRef) InterfacePropRef {
			return InterfacePropRef{Interface: r.OwnerName, Property: r.PropertyName}
		})
		slices.SortFunc(ps.Satisfies, func(x, y InterfacePropRef) int {
			return strings.Compare(x.Interface+"\x00"+x.Property, y.Interface+"\x00"+y.Property)
		})
		ps.Satisfies = slices.Compact(ps.Satisfies)
		return ps
	}
	props := func(ps []*PropertyIR) []*PropertyShape { return mapSlice(ps, prop) }
	cons := func(cs []ConstraintIR) []Constr { return mapSlice(cs, ConstraintIR.spec) }
	s := &Shape{}
	for _, i := range ir.Interfaces {
		s.Interfaces = append(s.Interfaces, &InterfaceShape{Name: i.Name, Properties: props(i.Properties)})
	}
	for _, n := range ir.Nodes {
		impl := mapSlice(n.Implements, func(r TypeRefIR) string { return r.Name })
		slices.Sort(impl)
		s.Nodes = append(s.Nodes, &NodeShape{Name: n.Name, Annotations: n.Annotations, Implements: slices.Compact(impl),
			Properties: props(n.Properties), Constraints: cons(n.Constraints)})
	}
	for _, e := range ir.Edges {
		s.Edges = append(s.Edges, &EdgeShape{Name: e.Name, From: e.From.Name, To: e.To.Name, Card: e.Card,
			Annotations: e.Annotations, Properties: props(e.Properties), Constraints: cons(e.Constraints)})
	}
	return s
}

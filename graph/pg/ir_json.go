package pg

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// JSON encoding of the SchemaIR, key for key the reference's serde layout
// (internally tagged "kind" for constraints and field references, externally
// tagged {"Integer": n} / {"Float": f} for range bounds, {"Vector": n} for
// vector scalars, kwargs only when non-empty).

func (r TypeRefIR) json() jv { return obj("type_id", r.TypeID, "type_name", r.Name) }

func (r PropertyRef) json() jv {
	return obj("owner_type_id", r.OwnerTypeID, "owner_type_name", r.OwnerName,
		"property_id", r.PropertyID, "property_name", r.PropertyName)
}

func (f FieldRef) json() jv {
	if f.Property != nil {
		o := obj("kind", "property")
		p := f.Property.json().(*jobject)
		o.keys, o.vals = append(o.keys, p.keys...), append(o.vals, p.vals...)
		return o
	}
	return obj("kind", "system", "stable_table_id", f.StableTableID, "table_type_name", f.TableTypeName,
		"table_incarnation_id", f.IncarnationID, "role", f.Role)
}

func (c ConstraintIR) json() jv {
	o := obj("kind", string(c.Kind))
	switch c.Kind {
	case RangeConstraint:
		return o.add("field", c.Field.json()).add("min", c.Min.json()).add("max", c.Max.json())
	case CheckConstraint:
		return o.add("field", c.Field.json()).add("pattern", c.Pattern)
	}
	return o.add("fields", list(c.Fields, FieldRef.json))
}

func (p *PropertyIR) json() jv {
	var embed jv
	if p.Embed != nil {
		embed = obj("source", p.Embed.Source.json(), "model", optStr(p.Embed.Model))
	}
	return obj("name", p.Name, "property_id", p.PropertyID, "prop_type", p.Type.json(),
		"annotations", annotsJSON(p.Annotations), "property_constraints", strs(p.PropertyConstraints),
		"embed_source", embed, "declared_directly", p.DeclaredDirectly,
		"satisfies_interface_properties", list(p.Satisfies, PropertyRef.json))
}

func irPropsJSON(ps []*PropertyIR) []jv { return list(ps, func(p *PropertyIR) jv { return p.json() }) }

func (ir *SchemaIR) json() jv {
	return obj("ir_version", uint64(ir.IRVersion), "schema_identity_domain", ir.Domain,
		"next_identity_id", ir.NextIdentityID,
		"interfaces", list(ir.Interfaces, func(i *InterfaceIR) jv {
			return obj("name", i.Name, "type_id", i.TypeID, "properties", irPropsJSON(i.Properties))
		}),
		"nodes", list(ir.Nodes, func(n *NodeIR) jv {
			return obj("name", n.Name, "type_id", n.TypeID, "table_incarnation_id", n.IncarnationID,
				"annotations", annotsJSON(n.Annotations), "implements", list(n.Implements, TypeRefIR.json),
				"properties", irPropsJSON(n.Properties), "constraints", list(n.Constraints, ConstraintIR.json))
		}),
		"edges", list(ir.Edges, func(e *EdgeIR) jv {
			return obj("name", e.Name, "type_id", e.TypeID, "table_incarnation_id", e.IncarnationID,
				"from_type", e.From.json(), "to_type", e.To.json(), "cardinality", e.Card.json(),
				"annotations", annotsJSON(e.Annotations), "properties", irPropsJSON(e.Properties),
				"constraints", list(e.Constraints, ConstraintIR.json))
		}))
}

// CompactJSON is the compact serde encoding the identity hash is taken over.
func (ir *SchemaIR) CompactJSON() string { return compactJSON(ir.json()) }

// PrettyJSON is the content of `_schema.ir.json` (serde_json pretty form,
// two-space indent, no trailing newline).
func (ir *SchemaIR) PrettyJSON() string { return prettyJSON(ir.json()) }

// Hash is the accepted schema identity `schema_ir_hash`:
// "sha256:" + lowercase hex SHA-256 of CompactJSON (not of the pretty file).
func (ir *SchemaIR) Hash() string { return sha256Hash(ir.CompactJSON()) }

// ---- decoding ----

type rawScalar struct {
	Name   string
	Vector *uint64
}

func (s *rawScalar) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &s.Name)
	}
	var v struct {
		Vector *uint64 `json:"Vector"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.Vector == nil {
		return fmt.Errorf("invalid scalar %s", b)
	}
	s.Vector = v.Vector
	return nil
}

type rawPropType struct {
	Scalar     rawScalar `json:"scalar"`
	Nullable   bool      `json:"nullable"`
	List       bool      `json:"list"`
	EnumValues []string  `json:"enum_values"`
}

type rawBound struct{ b *Bound }

func (r *rawBound) UnmarshalJSON(b []byte) error {
	var v struct {
		Integer *int64   `json:"Integer"`
		Float   *float64 `json:"Float"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch {
	case v.Integer != nil && v.Float == nil:
		r.b = &Bound{Int: *v.Integer}
	case v.Float != nil && v.Integer == nil:
		r.b = &Bound{IsFloat: true, Float: *v.Float}
	default:
		return fmt.Errorf("invalid range bound %s", b)
	}
	return nil
}

type rawPropRef struct {
	OwnerTypeID  uint64 `json:"owner_type_id"`
	OwnerName    string `json:"owner_type_name"`
	PropertyID   uint64 `json:"property_id"`
	PropertyName string `json:"property_name"`
}

type rawFieldRef struct {
	Kind string `json:"kind"`
	rawPropRef
	StableTableID uint64 `json:"stable_table_id"`
	TableTypeName string `json:"table_type_name"`
	IncarnationID uint64 `json:"table_incarnation_id"`
	Role          string `json:"role"`
}

type rawAnnot struct {
	Name   string            `json:"name"`
	Value  *string           `json:"value"`
	Kwargs map[string]string `json:"kwargs"`
}

type rawProp struct {
	Name        string      `json:"name"`
	PropertyID  uint64      `json:"property_id"`
	Type        rawPropType `json:"prop_type"`
	Annotations []rawAnnot  `json:"annotations"`
	PropCons    []string    `json:"property_constraints"`
	Embed       *struct {
		Source rawPropRef `json:"source"`
		Model  *string    `json:"model"`
	} `json:"embed_source"`
	DeclaredDirectly bool         `json:"declared_directly"`
	Satisfies        []rawPropRef `json:"satisfies_interface_properties"`
}

type rawTypeRef struct {
	TypeID uint64 `json:"type_id"`
	Name   string `json:"type_name"`
}

type rawConstraint struct {
	Kind    string        `json:"kind"`
	Fields  []rawFieldRef `json:"fields"`
	Field   *rawFieldRef  `json:"field"`
	Min     *rawBound     `json:"min"`
	Max     *rawBound     `json:"max"`
	Pattern string        `json:"pattern"`
}

type rawDecl struct {
	Name          string          `json:"name"`
	TypeID        uint64          `json:"type_id"`
	IncarnationID uint64          `json:"table_incarnation_id"`
	Annotations   []rawAnnot      `json:"annotations"`
	Implements    []rawTypeRef    `json:"implements"`
	From          rawTypeRef      `json:"from_type"`
	To            rawTypeRef      `json:"to_type"`
	Card          rawCard         `json:"cardinality"`
	Properties    []rawProp       `json:"properties"`
	Constraints   []rawConstraint `json:"constraints"`
}

type rawCard struct {
	Min uint32  `json:"min"`
	Max *uint32 `json:"max"`
}

type rawIR struct {
	IRVersion  uint32    `json:"ir_version"`
	Domain     string    `json:"schema_identity_domain"`
	Next       uint64    `json:"next_identity_id"`
	Interfaces []rawDecl `json:"interfaces"`
	Nodes      []rawDecl `json:"nodes"`
	Edges      []rawDecl `json:"edges"`
}

// ParseSchemaIR decodes `_schema.ir.json` (pretty or compact) and validates
// it like the reference does before trusting it.
func ParseSchemaIR(data []byte) (*SchemaIR, error) {
	var r rawIR
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&r); err != nil {
		return nil, invalidIR("decode: %v", err)
	}
	if dec.More() {
		return nil, invalidIR("trailing data after the schema IR")
	}
	ir := &SchemaIR{IRVersion: r.IRVersion, Domain: r.Domain, NextIdentityID: r.Next,
		Interfaces: []*InterfaceIR{}, Nodes: []*NodeIR{}, Edges: []*EdgeIR{}}
	var err error
	conv := func(d rawDecl) []*PropertyIR {
		out := []*PropertyIR{}
		for _, p := range d.Properties {
			t, e := propTypeFromJSON(p.Type)
			if e != nil && err == nil {
				err = e
			}
			pir := &PropertyIR{Name: p.Name, PropertyID: p.PropertyID, Type: t, Annotations: annots(p.Annotations),
				PropertyConstraints: orEmpty(p.PropCons), DeclaredDirectly: p.DeclaredDirectly, Satisfies: []PropertyRef{}}
			if p.Embed != nil {
				pir.Embed = &EmbedIR{Source: PropertyRef(p.Embed.Source), Model: p.Embed.Model}
			}
			for _, s := range p.Satisfies {
				pir.Satisfies = append(pir.Satisfies, PropertyRef(s))
			}
			out = append(out, pir)
		}
		return out
	}
	for _, d := range r.Interfaces {
		ir.Interfaces = append(ir.Interfaces, &InterfaceIR{Name: d.Name, TypeID: d.TypeID, Properties: conv(d)})
	}
	for _, d := range r.Nodes {
		n := &NodeIR{Name: d.Name, TypeID: d.TypeID, IncarnationID: d.IncarnationID, Annotations: annots(d.Annotations),
			Implements: []TypeRefIR{}, Properties: conv(d), Constraints: constraintsFromRaw(d.Constraints, &err)}
		for _, t := range d.Implements {
			n.Implements = append(n.Implements, TypeRefIR(t))
		}
		ir.Nodes = append(ir.Nodes, n)
	}
	for _, d := range r.Edges {
		ir.Edges = append(ir.Edges, &EdgeIR{Name: d.Name, TypeID: d.TypeID, IncarnationID: d.IncarnationID,
			From: TypeRefIR(d.From), To: TypeRefIR(d.To), Card: Cardinality{Min: d.Card.Min, Max: d.Card.Max},
			Annotations: annots(d.Annotations), Properties: conv(d), Constraints: constraintsFromRaw(d.Constraints, &err)})
	}
	if err != nil {
		return nil, err
	}
	if err := ir.Validate(); err != nil {
		return nil, err
	}
	return ir, nil
}

func annots(in []rawAnnot) []Annot {
	out := []Annot{}
	for _, a := range in {
		out = append(out, Annot(a))
	}
	return out
}

func fieldFromRaw(f rawFieldRef, err *error) FieldRef {
	switch f.Kind {
	case "property":
		r := PropertyRef(f.rawPropRef)
		return FieldRef{Property: &r}
	case "system":
		return FieldRef{StableTableID: f.StableTableID, TableTypeName: f.TableTypeName, IncarnationID: f.IncarnationID, Role: f.Role}
	}
	if *err == nil {
		*err = invalidIR("unknown field reference kind %q", f.Kind)
	}
	return FieldRef{}
}

func constraintsFromRaw(in []rawConstraint, err *error) []ConstraintIR {
	out := []ConstraintIR{}
	for _, c := range in {
		ci := ConstraintIR{Kind: ConstraintKind(c.Kind), Pattern: c.Pattern}
		switch ci.Kind {
		case KeyConstraint, UniqueConstraint, IndexConstraint:
			ci.Fields = []FieldRef{}
			for _, f := range c.Fields {
				ci.Fields = append(ci.Fields, fieldFromRaw(f, err))
			}
		case RangeConstraint, CheckConstraint:
			if c.Field == nil {
				if *err == nil {
					*err = invalidIR("%s constraint without a field", c.Kind)
				}
				continue
			}
			ci.Field = fieldFromRaw(*c.Field, err)
			if c.Min != nil {
				ci.Min = c.Min.b
			}
			if c.Max != nil {
				ci.Max = c.Max.b
			}
		default:
			if *err == nil {
				*err = invalidIR("unknown constraint kind %q", c.Kind)
			}
		}
		out = append(out, ci)
	}
	return out
}

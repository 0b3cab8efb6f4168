package pg

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// reservedStorageColumns are Lance's virtual row-address/version columns.
var reservedStorageColumns = map[string]bool{
	"_rowid": true, "_rowaddr": true, "_rowoffset": true,
	"_row_created_at_version": true, "_row_last_updated_at_version": true,
}

// Compile parses and analyzes `.pg` source into its canonical Shape.
func Compile(src string) (*Shape, error) { return CompileFile(DefaultFileName, src) }

// CompileFile is Compile with the file name used in error messages.
func CompileFile(name, src string) (*Shape, error) {
	f, err := ParseFile(name, src)
	if err != nil {
		return nil, err
	}
	return Analyze(f)
}

// Analyze checks a parsed file against the rules of the schema language and
// returns its canonical Shape. Every error is a *SemanticError (or a
// *ParseError for a decoding problem).
func Analyze(f *File) (shape *Shape, err error) {
	a := &analyzer{file: f.Name}
	defer func() {
		if r := recover(); r != nil {
			b, ok := r.(bailout)
			if !ok {
				panic(r)
			}
			shape, err = nil, b.err
		}
	}()
	return a.run(f), nil
}

type analyzer struct {
	file       string
	interfaces map[string]*InterfaceDecl
	nodes      map[string]*NodeDecl
}

func (a *analyzer) fail(pos Pos, code Code, format string, args ...any) {
	panic(bailout{&SemanticError{File: a.file, Line: pos.Line, Column: pos.Column, Code: code,
		Message: fmt.Sprintf(format, args...)}})
}

func (a *analyzer) run(f *File) *Shape {
	a.interfaces, a.nodes = map[string]*InterfaceDecl{}, map[string]*NodeDecl{}
	edges := map[string]*EdgeDecl{}
	folded := map[string]*EdgeDecl{}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *InterfaceDecl:
			if prev := a.interfaces[d.Name]; prev != nil {
				a.fail(d.NamePos, CodeDuplicateType, "duplicate interface %s (first declared at %s)", d.Name, prev.NamePos)
			}
			a.interfaces[d.Name] = d
		case *NodeDecl:
			if prev := a.nodes[d.Name]; prev != nil {
				a.fail(d.NamePos, CodeDuplicateType, "duplicate node type %s (first declared at %s)", d.Name, prev.NamePos)
			}
			a.nodes[d.Name] = d
		case *EdgeDecl:
			if prev := edges[d.Name]; prev != nil {
				a.fail(d.NamePos, CodeDuplicateType, "duplicate edge type %s (first declared at %s)", d.Name, prev.NamePos)
			}
			if prev := folded[strings.ToLower(d.Name)]; prev != nil {
				a.fail(d.NamePos, CodeEdgeNameCollision, "edge name collision after case folding: '%s' conflicts with '%s'", d.Name, prev.Name)
			}
			edges[d.Name], folded[strings.ToLower(d.Name)] = d, d
		}
	}
	s := &Shape{}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *InterfaceDecl:
			a.checkPropNames(d.Properties, "interface "+d.Name, false)
			for _, p := range d.Properties {
				a.renameFrom(p.Annotations, "property "+d.Name+"."+p.Name)
			}
			s.Interfaces = append(s.Interfaces, &InterfaceShape{Name: d.Name,
				Properties: sortProps(mapSlice(d.Properties, func(p *PropDecl) *PropertyShape { return propShape(p, true) }))})
		case *NodeDecl:
			s.Nodes = append(s.Nodes, a.node(d))
		case *EdgeDecl:
			s.Edges = append(s.Edges, a.edge(d))
		}
	}
	byName := func(x, y string) int { return strings.Compare(x, y) }
	slices.SortFunc(s.Interfaces, func(x, y *InterfaceShape) int { return byName(x.Name, y.Name) })
	slices.SortFunc(s.Nodes, func(x, y *NodeShape) int { return byName(x.Name, y.Name) })
	slices.SortFunc(s.Edges, func(x, y *EdgeShape) int { return byName(x.Name, y.Name) })
	return s
}

func mapSlice[T, U any](in []T, f func(T) U) []U {
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

func sortProps(ps []*PropertyShape) []*PropertyShape {
	slices.SortFunc(ps, func(x, y *PropertyShape) int { return strings.Compare(x.Name, y.Name) })
	return ps
}

// checkPropNames refuses duplicate and reserved property names.
func (a *analyzer) checkPropNames(props []*PropDecl, owner string, edge bool) {
	seen := map[string]*PropDecl{}
	for _, p := range props {
		switch {
		case reservedStorageColumns[p.Name]:
			a.fail(p.Pos, CodeReservedName, "property name '%s' is reserved for a virtual storage system column", p.Name)
		case p.Name == "id", edge && (p.Name == "src" || p.Name == "dst"):
			a.fail(p.Pos, CodeReservedName, "property name '%s' is reserved for the implicit %s column of %s", p.Name, p.Name, owner)
		case seen[p.Name] != nil:
			a.fail(p.Pos, CodeDuplicateProperty, "duplicate property '%s' in %s (first declared at %s)", p.Name, owner, seen[p.Name].Pos)
		}
		seen[p.Name] = p
	}
}

// propShape projects a declaration to its shape (without provenance).
func propShape(p *PropDecl, direct bool) *PropertyShape {
	ps := &PropertyShape{Name: p.Name, Type: p.Type, DeclaredDirectly: direct,
		Annotations: canonicalAnnotations(p.Annotations), PropertyConstraints: []string{}}
	for _, an := range p.Annotations {
		switch an.Name {
		case "key", "unique", "index":
			if an.Value == nil && !slices.Contains(ps.PropertyConstraints, an.Name) {
				ps.PropertyConstraints = append(ps.PropertyConstraints, an.Name)
			}
		case "embed":
			if ps.Embed == nil && an.Value != nil {
				e := &EmbedSpec{Source: *an.Value}
				if m, ok := an.Kwargs["model"]; ok {
					e.Model = &m
				}
				ps.Embed = e
			}
		case "rename_from":
			if ps.RenameFrom == nil && an.Value != nil {
				v := *an.Value
				ps.RenameFrom = &v
			}
		}
	}
	slices.SortFunc(ps.PropertyConstraints, func(x, y string) int {
		return propertyConstraintOrder[x] - propertyConstraintOrder[y]
	})
	return ps
}

// effProp is one effective node property with its provenance.
type effProp struct {
	decl      *PropDecl // the semantic source (node's own, or first contributing interface's)
	direct    bool
	satisfies []InterfacePropRef
}

func (a *analyzer) node(d *NodeDecl) *NodeShape {
	owner := "node " + d.Name
	a.checkPropNames(d.Properties, owner, false)
	a.typeAnnotations(d.Annotations, owner, false)
	eff := map[string]*effProp{}
	var order []string
	for _, p := range d.Properties {
		eff[p.Name] = &effProp{decl: p, direct: true}
		order = append(order, p.Name)
	}
	var implements []string
	for _, ref := range d.Implements {
		iface := a.interfaces[ref.Name]
		if iface == nil {
			a.fail(ref.Pos, CodeUnknownInterface, "node %s implements unknown interface '%s'", d.Name, ref.Name)
		}
		if !slices.Contains(implements, ref.Name) {
			implements = append(implements, ref.Name)
		}
		for _, ip := range iface.Properties {
			e := eff[ip.Name]
			link := InterfacePropRef{Interface: iface.Name, Property: ip.Name}
			if e == nil {
				eff[ip.Name] = &effProp{decl: ip, satisfies: []InterfacePropRef{link}}
				order = append(order, ip.Name)
				continue
			}
			if slices.Contains(e.satisfies, link) {
				continue
			}
			if !e.decl.Type.Equal(ip.Type) {
				pos := e.decl.TypePos
				if !e.direct {
					pos = ref.Pos
				}
				a.fail(pos, CodeInterfaceConflict, "node %s property '%s' has type %s but interface %s declares it as %s",
					d.Name, ip.Name, e.decl.Type, iface.Name, ip.Type)
			}
			if !e.direct && compactJSON(propShape(e.decl, false).json()) != compactJSON(propShape(ip, false).json()) {
				a.fail(ref.Pos, CodeInterfaceConflict, "interfaces contributing '%s.%s' have incompatible property semantics (annotations or constraints differ)", d.Name, ip.Name)
			}
			e.satisfies = append(e.satisfies, link)
		}
	}
	slices.Sort(implements)
	props := map[string]*PropDecl{}
	for _, n := range order {
		props[n] = eff[n].decl
	}
	ns := &NodeShape{Name: d.Name, RenameFrom: a.renameFrom(d.Annotations, owner),
		Annotations: canonicalAnnotations(d.Annotations), Implements: orEmpty(implements)}
	// Source constraints (body + direct property annotations), then the
	// property-level constraints of injected interface properties.
	cons := append(slices.Clone(d.Constraints), desugar(d.Properties)...)
	for _, n := range order {
		e := eff[n]
		a.propAnnotations(e.decl, d.Name, props, false)
		ps := propShape(e.decl, e.direct)
		if !e.direct {
			// As in the reference, an injected property carries its interface
			// property's @rename_from hint (both keep their identities).
			cons = append(cons, desugar([]*PropDecl{e.decl})...)
		}
		slices.SortFunc(e.satisfies, func(x, y InterfacePropRef) int {
			return strings.Compare(x.Interface+"\x00"+x.Property, y.Interface+"\x00"+y.Property)
		})
		ps.Satisfies = orEmpty(e.satisfies)
		ns.Properties = append(ns.Properties, ps)
	}
	a.constraints(cons, props, owner, false)
	ns.Properties = sortProps(orEmpty(ns.Properties))
	ns.Constraints = orEmpty(canonicalConstraints(mapSlice(cons, (*Constraint).spec)))
	return ns
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// desugar turns property-level @key/@unique/@index into body constraints.
func desugar(props []*PropDecl) []*Constraint {
	var out []*Constraint
	for _, p := range props {
		for _, an := range p.Annotations {
			switch an.Name {
			case "key", "unique", "index":
				if an.Value == nil {
					out = append(out, &Constraint{Pos: an.Pos, Kind: ConstraintKind(an.Name),
						Columns: []string{p.Name}, ColPos: []Pos{an.Pos}})
				}
			}
		}
	}
	return out
}

func (c *Constraint) spec() Constr {
	return Constr{Kind: c.Kind, Columns: slices.Clone(c.Columns), Property: c.Property,
		Min: c.Min, Max: c.Max, Pattern: c.Pattern}
}

func (a *analyzer) edge(d *EdgeDecl) *EdgeShape {
	owner := "edge " + d.Name
	for _, ref := range []TypeRef{d.From, d.To} {
		if a.nodes[ref.Name] == nil {
			what := "node type"
			if a.interfaces[ref.Name] != nil {
				what = "node type (interfaces cannot be edge endpoints)"
			}
			a.fail(ref.Pos, CodeUnknownEndpoint, "edge %s references unknown %s: %s", d.Name, what, ref.Name)
		}
	}
	a.checkPropNames(d.Properties, owner, true)
	a.typeAnnotations(d.Annotations, owner, true)
	props := map[string]*PropDecl{}
	for _, p := range d.Properties {
		props[p.Name] = p
	}
	es := &EdgeShape{Name: d.Name, RenameFrom: a.renameFrom(d.Annotations, owner), From: d.From.Name,
		To: d.To.Name, Card: d.Card, Annotations: canonicalAnnotations(d.Annotations), Properties: []*PropertyShape{}}
	for _, p := range d.Properties {
		a.propAnnotations(p, d.Name, props, true)
		ps := propShape(p, true)
		ps.RenameFrom = a.renameFrom(p.Annotations, "property "+d.Name+"."+p.Name)
		ps.Satisfies = []InterfacePropRef{}
		es.Properties = append(es.Properties, ps)
	}
	cons := append(slices.Clone(d.Constraints), desugar(d.Properties)...)
	a.constraints(cons, props, owner, true)
	es.Properties = sortProps(es.Properties)
	es.Constraints = orEmpty(canonicalConstraints(mapSlice(cons, (*Constraint).spec)))
	return es
}

// renameFrom validates @rename_from (at most once, one non-empty positional
// value, no kwargs) and returns its hint.
func (a *analyzer) renameFrom(anns []*Annotation, target string) *string {
	var hint *string
	for _, an := range anns {
		if an.Name != "rename_from" {
			continue
		}
		switch {
		case hint != nil:
			a.fail(an.Pos, CodeInvalidAnnotation, "%s declares @rename_from multiple times", target)
		case an.Value == nil || strings.TrimSpace(*an.Value) == "":
			a.fail(an.Pos, CodeInvalidAnnotation, "@rename_from on %s requires exactly one non-empty positional value", target)
		case len(an.Kwargs) > 0:
			a.fail(an.Pos, CodeInvalidAnnotation, "@rename_from on %s does not accept keyword arguments", target)
		}
		v := *an.Value
		hint = &v
	}
	return hint
}

// onceNonEmpty validates @description/@instruction: at most once, non-empty.
func (a *analyzer) onceNonEmpty(anns []*Annotation, name, target string) {
	seen := false
	for _, an := range anns {
		if an.Name != name {
			continue
		}
		if seen {
			a.fail(an.Pos, CodeInvalidAnnotation, "%s declares @%s multiple times", target, name)
		}
		if an.Value == nil || strings.TrimSpace(*an.Value) == "" {
			a.fail(an.Pos, CodeInvalidAnnotation, "@%s on %s requires a non-empty value", name, target)
		}
		seen = true
	}
}

func (a *analyzer) typeAnnotations(anns []*Annotation, target string, edge bool) {
	a.renameFrom(anns, target)
	for _, an := range anns {
		switch an.Name {
		case "key", "unique", "index", "embed":
			code := CodeInvalidAnnotation
			if an.Name == "key" {
				code = CodeInvalidKey
			}
			if edge {
				a.fail(an.Pos, code, "@%s is not supported on edges (%s)", an.Name, target)
			}
			a.fail(an.Pos, code, "@%s is only supported on node properties or as body constraint (%s)", an.Name, target)
		}
	}
	a.onceNonEmpty(anns, "description", target)
	a.onceNonEmpty(anns, "instruction", target)
}

// propAnnotations applies the property-level annotation rules.
func (a *analyzer) propAnnotations(p *PropDecl, typeName string, all map[string]*PropDecl, edge bool) {
	target := "property " + typeName + "." + p.Name
	a.onceNonEmpty(p.Annotations, "description", target)
	a.renameFrom(p.Annotations, target)
	seen := map[string]bool{}
	t := p.Type
	for _, an := range p.Annotations {
		n := an.Name
		code := CodeInvalidAnnotation
		if n == "key" {
			code = CodeInvalidKey
		}
		isRel := n == "key" || n == "unique" || n == "index" || n == "embed"
		switch {
		case t.List && isRel:
			a.fail(an.Pos, code, "@%s is not supported on list %s", n, target)
		case t.IsVector() && (n == "key" || n == "unique"):
			a.fail(an.Pos, code, "@%s is not supported on vector %s", n, target)
		case t.IsBlob() && isRel:
			a.fail(an.Pos, code, "@%s is not supported on blob %s", n, target)
		case n == "instruction":
			a.fail(an.Pos, code, "@instruction is only supported on node and edge types (%s)", target)
		case edge && (n == "key" || n == "embed"):
			a.fail(an.Pos, code, "@%s is not supported on edge properties (edge %s.%s)", n, typeName, p.Name)
		case !isRel:
			continue
		case seen[n]:
			a.fail(an.Pos, code, "%s declares @%s multiple times", target, n)
		case n != "embed" && an.Value != nil:
			a.fail(an.Pos, code, "@%s on %s does not accept a value", n, target)
		}
		seen[n] = true
		if n != "embed" {
			continue
		}
		switch {
		case !t.IsVector():
			a.fail(an.Pos, code, "@embed is only supported on vector properties (%s)", target)
		case an.Value == nil || strings.TrimSpace(*an.Value) == "":
			a.fail(an.Pos, code, "@embed on %s requires a source property name", target)
		}
		src := all[*an.Value]
		if src == nil {
			a.fail(an.Pos, CodeUnknownProperty, "@embed on %s references unknown source property %s", target, *an.Value)
		}
		if src.Type.List || src.Type.Scalar != String {
			a.fail(an.Pos, code, "@embed source property %s.%s must be String", typeName, src.Name)
		}
		for k := range an.Kwargs {
			if k != "model" {
				a.fail(an.KwargPos[k], code, "@embed on %s has unknown argument '%s=' (only 'model' is supported)", target, k)
			}
		}
	}
}

// constraints applies the body-constraint rules of one node or edge.
func (a *analyzer) constraints(cons []*Constraint, props map[string]*PropDecl, owner string, edge bool) {
	// Report in source order.
	cons = slices.Clone(cons)
	slices.SortStableFunc(cons, func(x, y *Constraint) int {
		return cmp.Or(cmp.Compare(x.Pos.Line, y.Pos.Line), cmp.Compare(x.Pos.Column, y.Pos.Column))
	})
	var firstKey *Constraint
	lookup := func(c *Constraint, name string, pos Pos) *PropDecl {
		p := props[name]
		if p == nil {
			a.fail(pos, CodeUnknownProperty, "@%s on %s references unknown property '%s'", c.Kind, owner, name)
		}
		return p
	}
	for _, c := range cons {
		switch c.Kind {
		case KeyConstraint:
			if edge {
				a.fail(c.Pos, CodeInvalidKey, "@key constraint is not supported on edges (%s)", owner)
			}
			if firstKey != nil {
				a.fail(c.Pos, CodeInvalidKey, "%s has multiple @key constraints (first at %s); only one is supported", owner, firstKey.Pos)
			}
			firstKey = c
			for i, col := range c.Columns {
				p := lookup(c, col, c.ColPos[i])
				switch {
				case p.Type.Nullable:
					a.fail(c.ColPos[i], CodeInvalidKey, "@key property %s.%s cannot be nullable (declared %s)", strings.TrimPrefix(owner, "node "), col, p.Type)
				case p.Type.List, p.Type.IsVector(), p.Type.IsBlob():
					a.fail(c.ColPos[i], CodeInvalidKey, "@key is not supported on %s property %s.%s", kindWord(p.Type), strings.TrimPrefix(owner, "node "), col)
				}
			}
		case UniqueConstraint, IndexConstraint:
			for i, col := range c.Columns {
				if edge && (col == "src" || col == "dst") {
					continue
				}
				if p := lookup(c, col, c.ColPos[i]); p.Type.IsBlob() {
					a.fail(c.ColPos[i], CodeInvalidConstraint, "@%s is not supported on blob property %s", c.Kind, col)
				}
			}
		case RangeConstraint, CheckConstraint:
			if edge {
				a.fail(c.Pos, CodeInvalidConstraint, "@%s constraint is not supported on edges (%s)", c.Kind, owner)
			}
			p := lookup(c, c.Property, c.PropPos)
			if c.Kind == RangeConstraint && !p.Type.Scalar.IsNumeric() {
				a.fail(c.PropPos, CodeInvalidConstraint, "@range on %s.%s requires a numeric type, got %s", owner, c.Property, p.Type)
			}
			if c.Kind == CheckConstraint && p.Type.Scalar != String {
				a.fail(c.PropPos, CodeInvalidConstraint, "@check on %s.%s requires String type, got %s", owner, c.Property, p.Type)
			}
		}
	}
}

func kindWord(t PropType) string {
	switch {
	case t.List:
		return "list"
	case t.IsVector():
		return "vector"
	}
	return "blob"
}

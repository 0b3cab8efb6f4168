package migrate

import (
	"slices"
	"strconv"
	"strings"

	"github.com/omnigraph/omnigraph-worker/graph/pg"
)

// String renders the step as one line, in the reference CLI's words:
//
//	add property 'Person.nickname' (String?) on node 'Person'
//	unsupported change on node:Person.age [OG-MF-106, destructive]: changing property type …
func (s Step) String() string {
	k := string(s.TypeKind)
	switch s.Kind {
	case AddType:
		return "add " + k + " type '" + s.Name + "'"
	case RenameType:
		return "rename " + k + " type '" + s.From + "' -> '" + s.To + "'"
	case AddProperty:
		return "add property '" + s.TypeName + "." + s.PropertyName + "' (" + renderPropType(s.PropertyType) + ") on " + k + " '" + s.TypeName + "'"
	case RenameProperty:
		return "rename property '" + s.TypeName + "." + s.From + "' -> '" + s.TypeName + "." + s.To + "' on " + k + " '" + s.TypeName + "'"
	case AddConstraint:
		return "add constraint " + renderConstr(s.Constraint) + " on " + k + " '" + s.TypeName + "'"
	case DropConstraint:
		return "drop constraint " + renderConstr(s.Constraint) + " on " + k + " '" + s.TypeName + "'"
	case ExtendEnum:
		return "extend enum '" + s.TypeName + "." + s.PropertyName + "' (+" + strings.Join(s.AddedValues, ", +") + ") on " + k + " '" + s.TypeName + "'"
	case UpdateTypeMetadata:
		return "update metadata on " + k + " '" + s.Name + "' (" + renderAnnots(s.Annotations) + ")"
	case UpdatePropertyMetadata:
		return "update metadata on property '" + s.TypeName + "." + s.PropertyName + "' of " + k + " '" + s.TypeName + "' (" + renderAnnots(s.Annotations) + ")"
	case DropType:
		return "drop " + k + " type '" + s.Name + "' (" + string(s.Mode) + " mode)"
	case DropProperty:
		return "drop property '" + s.TypeName + "." + s.PropertyName + "' of " + k + " '" + s.TypeName + "' (" + string(s.Mode) + " mode)"
	case UnsupportedChange:
		if c, ok := LookupCode(s.Code); ok {
			return "unsupported change on " + s.Entity + " [" + c.Code + ", " + string(c.Tier) + "]: " + s.Reason
		}
		return "unsupported change on " + s.Entity + ": " + s.Reason
	}
	return string(s.Kind)
}

// renderPropType spells a type as the reference CLI does: String?, [I32], Enum(a|b), Vector(3).
func renderPropType(t *pg.PropType) string {
	if t == nil {
		return "?"
	}
	base := string(t.Scalar)
	switch {
	case t.IsEnum():
		base = "Enum(" + strings.Join(t.EnumValues, "|") + ")"
	case t.Scalar == pg.Vector:
		base = "Vector(" + strconv.FormatUint(uint64(t.VectorDim), 10) + ")"
	}
	if t.List {
		base = "[" + base + "]"
	}
	if t.Nullable {
		base += "?"
	}
	return base
}

func renderConstr(c *pg.Constr) string {
	if c == nil {
		return "?"
	}
	switch c.Kind {
	case pg.RangeConstraint:
		return "@range(" + c.Property + ", " + boundDebug(c.Min) + ", " + boundDebug(c.Max) + ")"
	case pg.CheckConstraint:
		return "@check(" + c.Property + ", " + strconv.Quote(c.Pattern) + ")"
	}
	return "@" + string(c.Kind) + "(" + strings.Join(c.Columns, ", ") + ")"
}

// renderAnnots spells annotations as source would: @description("x"), @embed("a", model="m").
func renderAnnots(as []pg.Annot) string {
	out := make([]string, len(as))
	for i, a := range as {
		var args []string
		if a.Value != nil {
			args = append(args, `"`+*a.Value+`"`)
		}
		keys := make([]string, 0, len(a.Kwargs))
		for k := range a.Kwargs {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			args = append(args, k+`="`+a.Kwargs[k]+`"`)
		}
		out[i] = "@" + a.Name
		if len(args) > 0 {
			out[i] += "(" + strings.Join(args, ", ") + ")"
		}
	}
	return strings.Join(out, ", ")
}

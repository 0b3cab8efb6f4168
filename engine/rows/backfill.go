package rows

import (
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/pg"
)

// Backfill is the column of n rows that each hold raw, one JSON value of the required
// property prop of table tbl (node is its node type, nil for an edge): what a schema apply
// writes into rows stored before the property existed. The value is converted and checked as
// a batch's value is (type, null, enum values, @range, @check); a refusal is
// *errs.InvalidInput naming the field default.<Type>.<prop>.
func Backfill(mem memory.Allocator, tbl *pg.Table, node *pg.NodeType, prop string, raw []byte, n int) (arrow.Array, error) {
	field := "default." + tbl.Name + "." + prop
	p := tbl.Property(prop)
	if p == nil {
		return nil, &errs.InvalidInput{Field: field, Reason: fmt.Sprintf("%s has no property %s", tbl.Name, prop)}
	}
	c := newColumn(mem, p, false)
	defer c.b.Release()
	if ce := c.appendCell(raw, true); ce != nil {
		return nil, &errs.InvalidInput{Field: field + ce.sub, Reason: ce.reason}
	}
	one := c.b.NewArray()
	defer one.Release()
	if err := checkDefault(tbl, node, p, one); err != nil {
		return nil, &errs.InvalidInput{Field: field, Reason: err.Error()}
	}
	for i := 0; i < n; i++ {
		c.appendCell(raw, true) // converted once already: it cannot fail now
	}
	return c.b.NewArray(), nil
}

// checkDefault applies the value rules checkValues applies to a batch's column.
func checkDefault(tbl *pg.Table, node *pg.NodeType, p *pg.Property, one arrow.Array) error {
	if v, ok := scalarString(one); ok && p.Type.IsEnum() && !slices.Contains(p.Type.EnumValues, v) {
		return fmt.Errorf("invalid enum value '%s' for %s.%s (expected: %s)", v, tbl.Name, p.Name, strings.Join(p.Type.EnumValues, ", "))
	}
	if node == nil {
		return nil
	}
	for _, rs := range node.Ranges {
		if rs.Property != p.Name {
			continue
		}
		if v, ok := numericAt(one, 0); ok && (v != v || rs.Min != nil && v < boundF64(rs.Min) || rs.Max != nil && v > boundF64(rs.Max)) {
			return fmt.Errorf("@range violation on %s.%s: value %s", tbl.Name, p.Name, rustFloat(v))
		}
	}
	for _, cs := range node.Checks {
		if cs.Property != p.Name {
			continue
		}
		v, ok := scalarString(one)
		if !ok {
			continue
		}
		re, err := compileCheck(cs.Pattern)
		if err != nil {
			return err
		}
		if !re.MatchString(v) {
			return fmt.Errorf("@check violation on %s.%s: value '%s' does not match pattern '%s'", tbl.Name, p.Name, v, cs.Pattern)
		}
	}
	return nil
}

func scalarString(a arrow.Array) (string, bool) {
	if s, ok := a.(interface{ Value(int) string }); ok && a.Len() == 1 && !a.IsNull(0) {
		return s.Value(0), true
	}
	return "", false
}

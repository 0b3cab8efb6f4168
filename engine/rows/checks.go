package rows

import (
	"bytes"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/pg"
)

// parsedEstimate is the reference's parse-time lower bound of a keyed record's Arrow
// payload: the data values (null 0, bool 1, number 4, string bytes — decoded bytes for
// "base64:" data —, arrays 4·(n+1) plus their items, objects their values), the supplied
// id, and an edge's from/to.
func parsedEstimate(r *framing.Record) int64 {
	var n int64
	for _, m := range r.Data {
		n += estimateJSON(m.Value)
	}
	if r.ID != nil {
		n += int64(len(*r.ID))
	}
	if r.Kind == framing.EdgeRecord {
		n += int64(len(r.From) + len(r.To))
	}
	return n
}

func estimateJSON(raw []byte) int64 {
	raw = trimWS(raw)
	switch kindOf(raw) {
	case jBool:
		return 1
	case jNumber:
		return 4
	case jString:
		if !bytes.HasPrefix(raw, []byte(`"base64:`)) && !containsBackslash(raw) {
			return int64(len(raw) - 2)
		}
		s, _ := decodeString(raw)
		if enc, ok := strings.CutPrefix(s, "base64:"); ok {
			return base64Estimate(enc)
		}
		return int64(len(s))
	case jArray:
		var n, items int64
		_ = eachItem(raw, func(_ int, item []byte) error {
			items++
			n += estimateJSON(item)
			return nil
		})
		return n + 4*(items+1)
	case jObject:
		var n int64
		_ = eachMember(raw, func(_, v []byte) error {
			n += estimateJSON(v)
			return nil
		})
		return n
	}
	return 0
}

// base64Estimate: the base64 crate's decoded_len_estimate (3 bytes per started 4-char
// quantum) less the trailing '=' padding.
func base64Estimate(enc string) int64 {
	n := int64((len(enc)+3)/4) * 3
	for i := len(enc) - 1; i >= 0 && enc[i] == '='; i-- {
		n--
	}
	return max(n, 0)
}

// arrayOverhead is the reference's per-cell buffer overhead in the projected size.
const arrayOverhead = 16

// preflight projects the declaration's Arrow size before anything is built, row by row and
// column by column, and refuses it once it passes limit (strict_input_arrow_bytes).
func (g *group) preflight(limit int64) error {
	var total int64
	over := func(r *framing.Record) error {
		if total > limit {
			return &errs.LineError{Line: r.Line, Err: &errs.ResourceLimitExceeded{
				Resource: ResourceStrictArrowBytes, Limit: uint64(limit), Actual: uint64(total)}}
		}
		return nil
	}
	cells := make([][]byte, len(g.tbl.Properties))
	for _, r := range g.recs {
		g.cells(r, cells)
		total += arrayOverhead
		if r.ID != nil {
			total += int64(len(*r.ID))
		}
		if err := over(r); err != nil {
			return err
		}
		if g.edge != nil {
			for _, end := range []string{r.From, r.To} {
				total += arrayOverhead + int64(len(end))
				if err := over(r); err != nil {
					return err
				}
			}
		}
		for i, p := range g.tbl.Properties {
			total += projectedCell(p.Type, trimWS(cells[i]))
			if err := over(r); err != nil {
				return err
			}
		}
	}
	return nil
}

func projectedCell(t pg.PropType, raw []byte) int64 {
	n := int64(arrayOverhead)
	switch {
	case t.IsBlob():
		return n + estimateJSON(raw)
	case t.IsVector():
		return n + int64(t.VectorDim)*5
	case t.List:
		if kindOf(raw) == jArray {
			_ = eachItem(raw, func(_ int, item []byte) error {
				if t.Scalar == pg.String {
					n += 8
					if kindOf(item) == jString {
						n += int64(stringLen(item))
					}
				} else {
					n += scalarWidth(t.Scalar) + 1
				}
				return nil
			})
		}
		return n
	case t.Scalar == pg.String:
		if kindOf(raw) == jString {
			n += int64(stringLen(raw))
		}
		return n
	}
	return n + scalarWidth(t.Scalar)
}

func scalarWidth(s pg.Scalar) int64 {
	switch s {
	case pg.Bool:
		return 1
	case pg.I64, pg.U64, pg.F64, pg.DateTime:
		return 8
	}
	return 4
}

// recordBytes is the Arrow memory of a record: the lengths of all its buffers.
func recordBytes(rec arrow.Record) int64 {
	var n int64
	for _, c := range rec.Columns() {
		n += dataBytes(c.Data())
	}
	return n
}

func dataBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += dataBytes(c)
	}
	return n
}

// column returns the record column holding a property or system column, and its field.
func (g *group) column(name string) (arrow.Array, string) {
	switch name {
	case "id":
		return g.rec.Column(0), "data.id"
	case "src", "dst":
		if g.edge != nil {
			if name == "src" {
				return g.rec.Column(1), "from"
			}
			return g.rec.Column(2), "to"
		}
	}
	i, ok := g.props[name]
	if !ok {
		return nil, "data." + name
	}
	return g.rec.Column(int(g.rec.NumCols()) - len(g.tbl.Properties) + i), "data." + name
}

// checkValues runs @range, @check (nodes) and enum membership over every input row.
func (g *group) checkValues() error {
	name := g.typeName()
	if g.node != nil {
		for _, rs := range g.node.Ranges {
			arr, field := g.column(rs.Property)
			if arr == nil {
				continue
			}
			for i := 0; i < arr.Len(); i++ {
				v, ok := numericAt(arr, i)
				if !ok {
					continue
				}
				line := g.recs[i].Line
				if v != v {
					return invalid(line, field, "@range violation on %s.%s: value is NaN", name, rs.Property)
				}
				if rs.Min != nil && v < boundF64(rs.Min) {
					return invalid(line, field, "@range violation on %s.%s: value %s < min %s",
						name, rs.Property, rustFloat(v), rustFloat(boundF64(rs.Min)))
				}
				if rs.Max != nil && v > boundF64(rs.Max) {
					return invalid(line, field, "@range violation on %s.%s: value %s > max %s",
						name, rs.Property, rustFloat(v), rustFloat(boundF64(rs.Max)))
				}
			}
		}
		for _, cs := range g.node.Checks {
			arr, field := g.column(cs.Property)
			strs, ok := arr.(*array.String)
			if !ok || strs.Len() == 0 {
				continue
			}
			re, err := compileCheck(cs.Pattern)
			if err != nil {
				return invalid(g.recs[0].Line, field, "@check on %s.%s has invalid regex '%s': %v", name, cs.Property, cs.Pattern, err)
			}
			for i := 0; i < strs.Len(); i++ {
				if strs.IsNull(i) {
					continue
				}
				if v := strs.Value(i); !re.MatchString(v) {
					return invalid(g.recs[i].Line, field, "@check violation on %s.%s: value '%s' does not match pattern '%s'",
						name, cs.Property, v, cs.Pattern)
				}
			}
		}
	}
	for _, p := range g.tbl.Properties {
		if !p.Type.IsEnum() {
			continue
		}
		arr, field := g.column(p.Name)
		strs, ok := arr.(*array.String)
		if !ok {
			continue
		}
		for i := 0; i < strs.Len(); i++ {
			if strs.IsNull(i) {
				continue
			}
			if v := strs.Value(i); !slices.Contains(p.Type.EnumValues, v) {
				return invalid(g.recs[i].Line, field, "invalid enum value '%s' for %s.%s (expected: %s)",
					v, name, p.Name, strings.Join(p.Type.EnumValues, ", "))
			}
		}
	}
	return nil
}

func numericAt(arr arrow.Array, i int) (float64, bool) {
	if arr.IsNull(i) {
		return 0, false
	}
	switch a := arr.(type) {
	case *array.Int32:
		return float64(a.Value(i)), true
	case *array.Int64:
		return float64(a.Value(i)), true
	case *array.Uint32:
		return float64(a.Value(i)), true
	case *array.Uint64:
		return float64(a.Value(i)), true
	case *array.Float32:
		return float64(a.Value(i)), true
	case *array.Float64:
		return a.Value(i), true
	}
	return 0, false
}

func boundF64(b *pg.Bound) float64 {
	if b.IsFloat {
		return b.Float
	}
	return float64(b.Int)
}

// uniqueGroups lists the table's uniqueness groups in evaluation order: a node's @key group
// first, then the @unique groups (one equal to the key is the key's).
func uniqueGroups(node *pg.NodeType, tbl *pg.Table) (groups [][]string, isKey []bool) {
	if node != nil && len(node.Key) > 0 {
		groups, isKey = append(groups, node.Key), append(isKey, true)
	}
	for _, u := range tbl.Unique {
		if node != nil && len(node.Key) > 0 && sameSet(u, node.Key) {
			continue
		}
		groups, isKey = append(groups, u), append(isKey, false)
	}
	return groups, isKey
}

func sameSet(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(s string) bool { return !slices.Contains(b, s) })
}

// checkUnique refuses two input rows holding the same tuple of a @key or @unique group
// (even with the same id: a batch has no order). Rows with a null member are exempt.
func (g *group) checkUnique() error {
	groups, _ := uniqueGroups(g.node, g.tbl)
	n := int(g.rec.NumRows())
	for _, cols := range groups {
		arrs := make([]arrow.Array, len(cols))
		fields := make([]string, len(cols))
		for j, c := range cols {
			arrs[j], fields[j] = g.column(c)
			if arrs[j] == nil {
				return invalid(0, fields[j], "graph type %s is missing unique property '%s'", g.key, c)
			}
		}
		field := strings.Join(fields, ",")
		seen := make(map[string]int, n)
		parts := make([]string, len(cols))
	rows:
		for i := 0; i < n; i++ {
			for j, a := range arrs {
				s, ok, err := canonicalScalar(a, i, false)
				if err != nil {
					return invalid(g.recs[i].Line, fields[j], "%v", err)
				}
				if !ok {
					continue rows
				}
				parts[j] = s
			}
			k := TupleID(parts)
			if prior, dup := seen[k]; dup {
				return invalid(g.recs[i].Line, field, "%s", UniqueViolation(g.typeName(), cols, parts, g.ids[prior], g.ids[i]))
			}
			seen[k] = i
		}
	}
	return nil
}

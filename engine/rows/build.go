package rows

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
)

// build converts every record of the declaration (row by row, columns in schema order),
// then derives the ids, into g.rec (all input rows, in input order) and g.ids.
func (g *group) build(opts Options) error {
	cols := g.newColumns(opts)
	defer releaseColumns(cols)
	cells := make([][]byte, len(cols))
	for _, r := range g.recs {
		g.cells(r, cells)
		for i, c := range cols {
			raw, present := cells[i], cells[i] != nil
			if c.key && (!present || kindOf(trimWS(raw)) == jNull) {
				return invalid(r.Line, c.field, "node %s is missing a non-null @key value", g.typeName())
			}
			if e := c.appendCell(raw, present); e != nil {
				return invalid(r.Line, c.field+e.sub, "%s", e.reason)
			}
		}
	}
	return g.assemble(cols, opts)
}

// buildFused is checkFields, preflight, build and the keyed ceilings in one pass over the
// records: each record's members are walked once, and each value is estimated, projected and
// converted from the same slice. It reports false, holding nothing, as soon as any of them
// would refuse the declaration; the exact checks then find which refusal comes first.
func (g *group) buildFused(opts Options, keyed bool) bool {
	props := g.tbl.Properties
	cols := g.newColumns(opts)
	defer releaseColumns(cols)
	cells := make([][]byte, len(props))
	members := newMemberProps(g.props)
	var parsed, projected int64
	for _, r := range g.recs {
		clear(cells)
		for j, m := range r.Data {
			i, ok := members.of(j, m.Name)
			if !ok {
				return false
			}
			cells[i] = m.Value
			if keyed {
				parsed += estimateJSON(m.Value)
			}
		}
		projected += arrayOverhead
		if r.ID != nil {
			parsed += int64(len(*r.ID))
			projected += int64(len(*r.ID))
		}
		if g.edge != nil {
			parsed += int64(len(r.From) + len(r.To))
			projected += 2*arrayOverhead + int64(len(r.From)+len(r.To))
		}
		for i, c := range cols {
			raw := trimWS(cells[i])
			present := cells[i] != nil
			projected += projectedCell(c.prop.Type, raw)
			if c.key && (!present || kindOf(raw) == jNull) {
				return false
			}
			if c.appendCell(raw, present) != nil {
				return false
			}
		}
	}
	// Both sums only grow, so a total within its ceiling was within it at every line.
	if keyed && parsed > opts.MaxKeyedBytes || projected > opts.MaxArrowBytes {
		return false
	}
	if g.assemble(cols, opts) != nil {
		return false
	}
	if keyed && recordBytes(g.rec) > opts.MaxKeyedBytes {
		g.release()
		return false
	}
	return true
}

func (g *group) newColumns(opts Options) []*column {
	props := g.tbl.Properties
	var key map[string]bool
	if g.node != nil && len(g.node.Key) > 0 {
		key = make(map[string]bool, len(g.node.Key))
		for _, k := range g.node.Key {
			key[k] = true
		}
	}
	cols := make([]*column, len(props))
	for i, p := range props {
		cols[i] = newColumn(opts.Mem, p, key[p.Name])
		cols[i].b.Reserve(len(g.recs))
	}
	g.reserveStrings(cols)
	return cols
}

// reserveStrings gives each string column's value buffer room for its cells' JSON text, a
// bound on the values (the quotes and escapes only shrink them), so that it is allocated once
// rather than doubled as it fills, each doubling copying and clearing what it held.
func (g *group) reserveStrings(cols []*column) {
	var strs []*array.StringBuilder // by column; nil for the others
	for i, c := range cols {
		if b, ok := c.b.(*array.StringBuilder); ok {
			if strs == nil {
				strs = make([]*array.StringBuilder, len(cols))
			}
			strs[i] = b
		}
	}
	if strs == nil {
		return
	}
	sizes := make([]int, len(cols))
	members := newMemberProps(g.props)
	for _, r := range g.recs {
		for j, m := range r.Data {
			if i, ok := members.of(j, m.Name); ok && strs[i] != nil {
				sizes[i] += len(m.Value)
			}
		}
	}
	for i, b := range strs {
		if b != nil && sizes[i] > 0 {
			b.ReserveData(sizes[i])
		}
	}
}

// memberProps finds the property of a record's j-th data member. Records of one type mostly
// list their members in the same order, so a member is looked up by name only when it
// differs from the j-th member of the record before.
type memberProps struct {
	props    map[string]int // property name -> index
	lastName []string
	lastProp []int
}

// newMemberProps is a memberProps of a table's properties, its record of the last member
// order sized for a record that lists them all.
func newMemberProps(props map[string]int) memberProps {
	return memberProps{props: props, lastName: make([]string, 0, len(props)), lastProp: make([]int, 0, len(props))}
}

func (m *memberProps) of(j int, name string) (int, bool) {
	if j < len(m.lastName) && m.lastName[j] == name {
		return m.lastProp[j], true
	}
	i, ok := m.props[name]
	if !ok {
		return 0, false
	}
	if j < len(m.lastName) {
		m.lastName[j], m.lastProp[j] = name, i
	} else {
		m.lastName, m.lastProp = append(m.lastName, name), append(m.lastProp, i)
	}
	return i, true
}

func releaseColumns(cols []*column) {
	for _, c := range cols {
		c.b.Release()
	}
}

// assemble derives the ids and puts the system columns and the converted properties together
// as g.rec.
func (g *group) assemble(cols []*column, opts Options) error {
	n := len(g.recs)
	system := 1
	if g.edge != nil {
		system = 3
	}
	arrs := make([]arrow.Array, system, system+len(cols))
	for _, c := range cols {
		arrs = append(arrs, c.b.NewArray())
	}
	defer func() {
		for _, a := range arrs {
			if a != nil {
				a.Release()
			}
		}
	}()
	var err error
	if g.ids, err = g.deriveIDs(arrs[system:], opts.NewID); err != nil {
		return err
	}
	arrs[0] = stringArray(opts.Mem, n, func(i int) string { return g.ids[i] })
	if g.edge != nil {
		arrs[1] = stringArray(opts.Mem, n, func(i int) string { return g.recs[i].From })
		arrs[2] = stringArray(opts.Mem, n, func(i int) string { return g.recs[i].To })
	}
	g.rec = array.NewRecordBatch(g.tbl.Arrow, arrs, int64(n))
	return nil
}

func stringArray(mem memory.Allocator, n int, value func(int) string) arrow.Array {
	// Built straight into its two buffers rather than through a StringBuilder, which zeroes
	// the room it reserves before each value is appended over it: a second pass over every
	// byte of a batch's ids and endpoints (BenchmarkBuildGraphBatch: 32 allocations and 5% of
	// the bytes fewer). A batch is bounded far below the 2 GiB its int32 offsets address.
	size := 0
	for i := range n {
		size += len(value(i))
	}
	offsets := memory.NewResizableBuffer(mem)
	defer offsets.Release()
	offsets.Resize(arrow.Int32Traits.BytesRequired(n + 1))
	values := memory.NewResizableBuffer(mem)
	defer values.Release()
	values.Resize(size)
	offs, vals := arrow.Int32Traits.CastFromBytes(offsets.Bytes()), values.Bytes()
	at := 0
	for i := range n {
		offs[i] = int32(at)
		at += copy(vals[at:], value(i))
	}
	offs[n] = int32(at)
	data := array.NewData(arrow.BinaryTypes.String, n, []*memory.Buffer{nil, offsets, values}, nil, 0, 0)
	defer data.Release()
	return array.NewStringData(data)
}

// tupleIDBytes is room for n rows' tuple ids over the key columns cols: a single string
// key's values exactly (its id is the value), otherwise an estimate the buffer may outgrow.
func tupleIDBytes(cols []arrow.Array, n int) int {
	size := 0
	for _, a := range cols {
		if s, ok := a.(*array.String); ok {
			if offs := s.ValueOffsets(); len(offs) > 1 {
				size += int(offs[len(offs)-1] - offs[0])
			}
		} else {
			size += 8 * n
		}
	}
	if len(cols) > 1 {
		size += n * (2 + 3*len(cols)) // brackets, commas and quotes
	}
	return size
}

// deriveIDs: a keyed node's id is its canonical key tuple (a supplied id must equal it
// exactly); any other record keeps its supplied id or gets newID().
func (g *group) deriveIDs(props []arrow.Array, newID func() string) ([]string, error) {
	out := make([]string, len(g.recs))
	if g.node == nil || len(g.node.Key) == 0 {
		for i, r := range g.recs {
			if r.ID != nil {
				out[i] = *r.ID
			} else {
				out[i] = newID()
			}
		}
		return out, nil
	}
	keyCols := make([]arrow.Array, len(g.node.Key))
	for j, name := range g.node.Key {
		keyCols[j] = props[g.props[name]]
	}
	// All ids are rendered into one buffer and sliced out of one string (one allocation).
	parts := make([]string, len(keyCols))
	buf := make([]byte, 0, tupleIDBytes(keyCols, len(g.recs)))
	ends := make([]int, len(g.recs))
	for i, r := range g.recs {
		for j, a := range keyCols {
			s, ok, err := canonicalScalar(a, i, false)
			if err != nil {
				return nil, invalid(r.Line, "data."+g.node.Key[j], "%v", err)
			}
			if !ok {
				return nil, invalid(r.Line, "data."+g.node.Key[j], "node %s is missing a non-null @key value", g.typeName())
			}
			parts[j] = s
		}
		start := len(buf)
		buf = appendTupleID(buf, parts)
		id := buf[start:]
		if r.ID != nil && *r.ID != string(id) {
			return nil, invalid(r.Line, "data.id", "node %s explicit id '%s' does not match its canonical @key id '%s'",
				g.typeName(), *r.ID, id)
		}
		ends[i] = len(buf)
	}
	all := string(buf)
	start := 0
	for i, end := range ends {
		out[i], start = all[start:end], end
	}
	return out, nil
}

// finish dedupes by id and hands the rows over as a TableBatch.
func (g *group) finish(mode Mode, mem memory.Allocator) (*TableBatch, error) {
	n := len(g.recs)
	var keep []int // nil: every row
	keyedNode := g.node != nil && len(g.node.Key) > 0
	switch {
	case keyedNode:
		// ids are the @key tuples, already proven distinct by the @key uniqueness check.
	case mode == Merge:
		last := make(map[string]int, n)
		for i, id := range g.ids {
			last[id] = i
		}
		if len(last) != n {
			keep = make([]int, 0, len(last))
			for i, id := range g.ids {
				if last[id] == i {
					keep = append(keep, i)
				}
			}
		}
	default:
		seen := make(map[string]struct{}, n)
		for i, id := range g.ids {
			if _, dup := seen[id]; dup {
				id := id
				return nil, &errs.LineError{Line: g.recs[i].Line, Err: &errs.KeyConflict{TypeKey: g.key, EntityID: &id}}
			}
			seen[id] = struct{}{}
		}
	}
	b := &TableBatch{TableKey: g.key, Node: g.node, Edge: g.edge, InputCount: n}
	rows := n
	if keep != nil {
		rows = len(keep)
	}
	at := func(i int) int {
		if keep == nil {
			return i
		}
		return keep[i]
	}
	b.IDs, b.Lines = make([]string, rows), make([]int, rows)
	if g.edge != nil {
		b.Src, b.Dst = make([]string, rows), make([]string, rows)
	}
	for i := 0; i < rows; i++ {
		j := at(i)
		b.IDs[i], b.Lines[i] = g.ids[j], g.recs[j].Line
		if g.edge != nil {
			b.Src[i], b.Dst[i] = g.recs[j].From, g.recs[j].To
		}
	}
	if keep == nil {
		b.Record, g.rec = g.rec, nil
		return b, nil
	}
	rec, err := takeRows(g.rec, keep, mem)
	if err != nil {
		return nil, err
	}
	g.release()
	b.Record = rec
	return b, nil
}

// takeRows copies the rows at the ascending indices keep into a new record.
func takeRows(rec arrow.Record, keep []int, mem memory.Allocator) (arrow.Record, error) {
	type run struct{ from, to int64 }
	var runs []run
	for _, k := range keep {
		if len(runs) > 0 && runs[len(runs)-1].to == int64(k) {
			runs[len(runs)-1].to++
			continue
		}
		runs = append(runs, run{int64(k), int64(k) + 1})
	}
	cols := make([]arrow.Array, 0, rec.NumCols())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for _, col := range rec.Columns() {
		parts := make([]arrow.Array, len(runs))
		for i, r := range runs {
			parts[i] = array.NewSlice(col, r.from, r.to)
		}
		joined, err := array.Concatenate(parts, mem)
		for _, p := range parts {
			p.Release()
		}
		if err != nil {
			return nil, err
		}
		cols = append(cols, joined)
	}
	return array.NewRecordBatch(rec.Schema(), cols, int64(len(keep))), nil
}

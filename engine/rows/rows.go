// Package rows turns the records of one strict graph batch (framing.Record) into one Arrow
// record per touched node/edge table, with every check that needs no stored data, and
// renders stored rows back as batch lines (Export).
//
// Build runs the reference loader's phases (docs/omnigraph-format.md §2) and returns
// the first violation:
//
//  1. per line, in line order: unknown node/edge type; in append and merge mode the keyed
//     ceilings per table, counted on input records (`keyed entities for <table_key>`, and the
//     parsed-size estimate `keyed parsed entity bytes for <table_key>`);
//  2. per declaration (node tables by name, then edge tables by name): unknown or reserved
//     data fields; the projected Arrow size (`strict_input_arrow_bytes`, every mode); value
//     conversion, row by row and column by column in schema order (JSON types, integer and
//     Float32 ranges, dates, lists, vectors, blobs, nulls, @key members); then ids (canonical
//     @key ids, supplied ids, generated ids); in append and merge mode the built Arrow size
//     (`keyed entity bytes for <table_key>`);
//  3. the batch evaluator, over every input row (before dedupe): per table @range, @check
//     and enum membership; then per table the @key group and the @unique groups (rows with
//     a null member exempt) — a keyed node listed twice is a @unique violation in every mode;
//  4. dedupe by id: merge keeps the last record of an id (at the last record's position);
//     append and overwrite refuse a repeated id with *errs.KeyConflict.
//
// Refusals are *errs.InvalidInput{Line, Field, Reason} with the reference's message as
// Reason; Field is "type"/"edge", "data.<prop>" (with "[i]" for a list or vector item),
// "data.id", or "from"/"to" for an edge's src/dst. Resource ceilings are
// *errs.ResourceLimitExceeded and key conflicts *errs.KeyConflict, wrapped in *errs.LineError
// when a line is known (errors.As finds them through it).
package rows

import (
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/graph/pg"
	"github.com/omnigraph/omnigraph-worker/internal/parallel"
)

// Mode is the load mode, spelled as on the wire.
type Mode string

const (
	Append    Mode = "append"    // strict insert: a repeated id is a KeyConflict
	Merge     Mode = "merge"     // upsert by id: the last record of an id wins
	Overwrite Mode = "overwrite" // replace each touched table: a repeated id is a KeyConflict
)

// Default ceilings (docs/omnigraph-format.md §2): KEYED_WRITE_MAX_ROWS and KEYED_WRITE_MAX_BYTES.
const (
	DefaultMaxKeyedRows        = 8192
	DefaultMaxKeyedBytes int64 = 32 << 20
	DefaultMaxArrowBytes int64 = 32 << 20
)

// Options bounds and parameterizes Build. Zero fields take their defaults.
type Options struct {
	// MaxKeyedRows: input records per table in append/merge mode (inclusive).
	MaxKeyedRows int
	// MaxKeyedBytes: per table in append/merge mode, both for the parse-time estimate and
	// for the built Arrow record (inclusive).
	MaxKeyedBytes int64
	// MaxArrowBytes: projected Arrow bytes per declaration, every mode (inclusive).
	MaxArrowBytes int64
	// NewID mints the id of a non-keyed node or edge record without data.id (a ULID).
	NewID func() string
	// Mem allocates the Arrow buffers (memory.DefaultAllocator when nil).
	Mem memory.Allocator
	// Parallel builds up to this many declarations at once (0 or 1: one at a time). NewID
	// must then be safe for concurrent use. Errors are still reported in declaration order.
	Parallel int
}

func (o Options) normalized() Options {
	if o.MaxKeyedRows <= 0 {
		o.MaxKeyedRows = DefaultMaxKeyedRows
	}
	if o.MaxKeyedBytes <= 0 {
		o.MaxKeyedBytes = DefaultMaxKeyedBytes
	}
	if o.MaxArrowBytes <= 0 {
		o.MaxArrowBytes = DefaultMaxArrowBytes
	}
	if o.NewID == nil {
		o.NewID = ids.NewULID
	}
	if o.Mem == nil {
		o.Mem = memory.DefaultAllocator
	}
	return o
}

// Resource strings (docs/omnigraph-format.md §2).
func resourceKeyedEntities(tableKey string) string { return "keyed entities for " + tableKey }
func resourceKeyedParsedBytes(tableKey string) string {
	return "keyed parsed entity bytes for " + tableKey
}
func resourceKeyedBytes(tableKey string) string { return "keyed entity bytes for " + tableKey }

// ResourceStrictArrowBytes is the projected-Arrow preflight's resource string.
const ResourceStrictArrowBytes = "strict_input_arrow_bytes"

// TableBatch is one table's rows, ready to stage.
type TableBatch struct {
	TableKey string       // "node:Person" / "edge:Knows"
	Node     *pg.NodeType // one of Node/Edge is set
	Edge     *pg.EdgeType //
	Record   arrow.Record // schema == the table's Arrow schema (same pointer)
	IDs      []string     // id of each row (after dedupe)
	Src, Dst []string     // edges: endpoints of each row
	Lines    []int        // source line of each row
	// InputCount is the number of input records for this declaration (before dedupe), the
	// receipt's entities_loaded.
	InputCount int
}

// group collects one declaration's records while Build runs.
type group struct {
	key   string
	tbl   *pg.Table
	node  *pg.NodeType
	edge  *pg.EdgeType
	recs  []*framing.Record
	n     int            // records found while grouping, before recs is filled
	props map[string]int // property name -> index in tbl.Properties

	// built (pre-dedupe)
	rec      arrow.Record
	ids      []string
	keyBytes int64 // parse-time keyed estimate
}

func (g *group) typeName() string { return g.tbl.Name }

func (g *group) release() {
	if g.rec != nil {
		g.rec.Release()
		g.rec = nil
	}
}

func invalid(line int, field, format string, args ...any) error {
	return &errs.InvalidInput{Line: line, Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Build converts one batch. All checks that need no stored data happen here, before any
// write; the first violation is returned (see the package doc for the order). On success
// the map holds one TableBatch per touched table, keyed by table key; the caller owns and
// releases their Records.
func Build(cat *pg.Catalog, recs []framing.Record, mode Mode, opts Options) (map[string]*TableBatch, error) {
	if cat == nil {
		return nil, fmt.Errorf("rows: nil catalog")
	}
	switch mode {
	case Append, Merge, Overwrite:
	default:
		return nil, invalid(0, "mode", "unknown load mode '%s' (expected append, merge or overwrite)", mode)
	}
	opts = opts.normalized()
	keyed := mode == Append || mode == Merge

	// Phases 1 and 2 first run fused: one pass per record that estimates, checks and converts
	// together. It gives up at the first problem of any kind, and the exact phases then run
	// from the start, so which violation is reported never depends on the fused pass.
	order, ok := fusedPhases(cat, recs, keyed, opts)
	if !ok {
		var err error
		if order, err = exactPhases(cat, recs, keyed, opts); err != nil {
			return nil, err
		}
	}
	return evaluate(order, mode, opts)
}

// fusedPhases is phases 1 and 2 for a batch that passes them: ok is false (and nothing is
// held) when any line or declaration would be refused.
func fusedPhases(cat *pg.Catalog, recs []framing.Record, keyed bool, opts Options) ([]*group, bool) {
	order, err := groupRecords(cat, recs, keyed, opts, false)
	if err != nil {
		return nil, false
	}
	err = buildEach(order, opts.Parallel, func(g *group) error {
		if !g.buildFused(opts, keyed) {
			return errFallback
		}
		return nil
	})
	if err != nil {
		return nil, false
	}
	return order, true
}

// buildEach runs build for every declaration, parallel at a time, and on the first error
// (in declaration order) releases what every declaration built.
func buildEach(order []*group, parallelism int, build func(*group) error) error {
	err := parallel.Each(order, parallelism, build)
	if err != nil {
		releaseAll(order)
	}
	return err
}

func releaseAll(order []*group) {
	for _, g := range order {
		g.release()
	}
}

// errFallback stops the fused pass; it never leaves Build.
var errFallback = errors.New("rows: fused pass gave up")

// exactPhases is phases 1 and 2 as the package doc orders them, check by check.
func exactPhases(cat *pg.Catalog, recs []framing.Record, keyed bool, opts Options) ([]*group, error) {
	order, err := groupRecords(cat, recs, keyed, opts, true)
	if err != nil {
		return nil, err
	}
	err = buildEach(order, opts.Parallel, func(g *group) error {
		if err := g.checkFields(); err != nil {
			return err
		}
		if err := g.preflight(opts.MaxArrowBytes); err != nil {
			return err
		}
		if err := g.build(opts); err != nil {
			return err
		}
		if keyed {
			if n := recordBytes(g.rec); n > opts.MaxKeyedBytes {
				return &errs.ResourceLimitExceeded{Resource: resourceKeyedBytes(g.key),
					Limit: uint64(opts.MaxKeyedBytes), Actual: uint64(n)}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return order, nil
}

// groupRecords is phase 1: records grouped by declaration, returned in declaration order.
// estimate also applies the parse-time keyed byte ceiling (the fused pass does it itself).
func groupRecords(cat *pg.Catalog, recs []framing.Record, keyed bool, opts Options, estimate bool) ([]*group, error) {
	groups := map[string]*group{}          // by table key
	byName := [2]map[string]*group{{}, {}} // node / edge groups by the name as written
	// Each record's group is found first and the groups' record lists filled after, each
	// allocated at its size: appending as they were found grew them by doubling, copying and
	// clearing as they went.
	of := make([]*group, len(recs))
	for i := range recs {
		r := &recs[i]
		g, err := groupFor(cat, r, groups, byName)
		if err != nil {
			return nil, err
		}
		of[i] = g
		g.n++
		if !keyed {
			continue
		}
		if n := g.n; n > opts.MaxKeyedRows {
			return nil, &errs.LineError{Line: r.Line, Err: &errs.ResourceLimitExceeded{
				Resource: resourceKeyedEntities(g.key), Limit: uint64(opts.MaxKeyedRows), Actual: uint64(n)}}
		}
		if !estimate {
			continue
		}
		g.keyBytes += parsedEstimate(r)
		if g.keyBytes > opts.MaxKeyedBytes {
			return nil, &errs.LineError{Line: r.Line, Err: &errs.ResourceLimitExceeded{
				Resource: resourceKeyedParsedBytes(g.key), Limit: uint64(opts.MaxKeyedBytes), Actual: uint64(g.keyBytes)}}
		}
	}
	for _, g := range groups {
		g.recs = make([]*framing.Record, 0, g.n)
	}
	for i, g := range of {
		g.recs = append(g.recs, &recs[i])
	}
	order := make([]*group, 0, len(groups))
	for _, n := range cat.Nodes {
		if g := groups["node:"+n.Name]; g != nil {
			order = append(order, g)
		}
	}
	for _, e := range cat.Edges {
		if g := groups["edge:"+e.Name]; g != nil {
			order = append(order, g)
		}
	}
	return order, nil
}

// evaluate is phases 3 and 4 over built declarations; it owns (and on error releases) them.
func evaluate(order []*group, mode Mode, opts Options) (map[string]*TableBatch, error) {
	ok := false
	defer func() {
		if !ok {
			releaseAll(order)
		}
	}()

	// Phase 3: the evaluator over every input row.
	if err := parallel.Each(order, opts.Parallel, (*group).checkValues); err != nil {
		return nil, err
	}
	if err := parallel.Each(order, opts.Parallel, (*group).checkUnique); err != nil {
		return nil, err
	}

	// Phase 4: dedupe by id.
	batches := make([]*TableBatch, len(order))
	err := parallel.Each(order, opts.Parallel, func(g *group) error {
		for i := range order {
			if order[i] == g {
				b, err := g.finish(mode, opts.Mem)
				batches[i] = b
				return err
			}
		}
		return nil
	})
	out := make(map[string]*TableBatch, len(order))
	for i, b := range batches {
		if b != nil {
			out[order[i].key] = b
		}
	}
	if err != nil {
		for _, done := range out {
			done.Release()
		}
		return nil, err
	}
	ok = true
	return out, nil
}

func groupFor(cat *pg.Catalog, r *framing.Record, groups map[string]*group, byName [2]map[string]*group) (*group, error) {
	if r.Kind == framing.NodeRecord || r.Kind == framing.EdgeRecord {
		if g := byName[r.Kind-1][r.Type]; g != nil {
			return g, nil
		}
	}
	var tbl *pg.Table
	var node *pg.NodeType
	var edge *pg.EdgeType
	var key string
	switch r.Kind {
	case framing.NodeRecord:
		if node = cat.Node(r.Type); node == nil {
			return nil, invalid(r.Line, "type", "unknown node type '%s'", r.Type)
		}
		tbl, key = &node.Table, node.TableKey()
	case framing.EdgeRecord:
		if edge = cat.Edge(r.Type); edge == nil {
			return nil, invalid(r.Line, "edge", "unknown edge type '%s'", r.Type)
		}
		tbl, key = &edge.Table, edge.TableKey()
	default:
		return nil, invalid(r.Line, "", "graph batch record must contain exactly one of 'type' or 'edge'")
	}
	g := groups[key]
	if g == nil {
		g = &group{key: key, tbl: tbl, node: node, edge: edge, props: make(map[string]int, len(tbl.Properties))}
		for i, p := range tbl.Properties {
			g.props[p.Name] = i
		}
		groups[key] = g
	}
	byName[r.Kind-1][r.Type] = g
	return g, nil
}

// checkFields refuses data members that are not properties of the table (smallest name
// first on a line).
func (g *group) checkFields() error {
	for _, r := range g.recs {
		var bad []string
		for _, m := range r.Data {
			if _, ok := g.props[m.Name]; !ok {
				bad = append(bad, m.Name)
			}
		}
		if len(bad) == 0 {
			continue
		}
		name := slices.Min(bad)
		switch {
		case reservedPhysical(name):
			return invalid(r.Line, "data."+name, "input field '%s' is reserved physical state", name)
		case g.edge != nil && (name == "src" || name == "dst"):
			return invalid(r.Line, "data."+name, "edge data field '%s' is reserved structural state", name)
		}
		return invalid(r.Line, "data."+name, "unknown input field '%s' for '%s'", name, g.key)
	}
	return nil
}

// cells puts a record's values in property order (nil where a property is absent); members
// that are not properties are left out.
func (g *group) cells(r *framing.Record, cells [][]byte) {
	clear(cells)
	for _, m := range r.Data {
		if i, ok := g.props[m.Name]; ok {
			cells[i] = m.Value
		}
	}
}

func reservedPhysical(name string) bool {
	switch name {
	case "_tombstone", "_rowid", "_rowaddr", "_rowoffset", "_row_created_at_version", "_row_last_updated_at_version":
		return true
	}
	return false
}

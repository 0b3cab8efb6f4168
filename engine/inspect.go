package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/omnigraph/omnigraph-worker/engine/rows"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/pg"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// The read side's inspection: one row by its id (Get, with a node's edges), the rows matching a
// where clause (Find), row counts from metadata (Count) and the commit log with each commit's
// receipt (CommitLog). Rows are printed as Export prints them, in the load envelope. A lookup
// on a column with a BTREE index (id on every table the worker optimised; src and dst on
// edges) reads the index's lookup and the pages that can hold the value, then only those rows
// (lance.Dataset.SearchBTree, Take), and scans just the fragments appended since the index was
// built; without one it scans the table with a filter. Access says which was done.

// ReadAt names the state a read sees: a branch ("" or "main" for main) at a __manifest version
// (0: the latest).
type ReadAt struct {
	Branch  string
	Version uint64
}

func (g *Graph) snapshotAt(ctx context.Context, at ReadAt) (*publisher.State, error) {
	pub := g.publisher(at.Branch)
	if at.Version == 0 {
		return pub.Snapshot(ctx)
	}
	return pub.SnapshotAt(ctx, at.Version)
}

// Access says how a read found one table's rows.
type Access struct {
	Table  string `json:"table"`
	Column string `json:"column,omitempty"` // the column the index was searched on
	// Index is the BTREE index used; "" for a scan of the whole table.
	Index     string `json:"index,omitempty"`
	Pages     int    `json:"pages,omitempty"`      // pages the index holds
	PagesRead int    `json:"pages_read,omitempty"` // pages of it read
	// Scanned are the fragments read with the filter: all of them for a scan, those the index
	// does not cover (appended since it was built) otherwise.
	Scanned   int `json:"fragments_scanned"`
	Fragments int `json:"fragments"`
	Rows      int `json:"rows"` // rows found
}

func (a Access) String() string {
	if a.Index == "" {
		return fmt.Sprintf("%s: filtered scan of %d fragments, %d rows", a.Table, a.Fragments, a.Rows)
	}
	return fmt.Sprintf("%s: BTREE index %s on %s (%d of %d pages read; %d of %d fragments unindexed, scanned), %d rows",
		a.Table, a.Index, a.Column, a.PagesRead, a.Pages, a.Scanned, a.Fragments, a.Rows)
}

// Indexed says whether the read used an index.
func (a Access) Indexed() bool { return a.Index != "" }

// Row is one row in the load envelope, as Export prints it (no newline).
type Row struct {
	TableKey string
	Line     []byte
}

// GetOptions say what Get reads.
type GetOptions struct {
	ReadAt
	// Edges also reads a node's edges, out (it is their src) and in (their dst).
	Edges bool
	// Scan reads without indices (the answer is the same; tests compare the two).
	Scan bool
}

// GetResult is one row and, for a node with GetOptions.Edges, its edges.
type GetResult struct {
	Row     Row
	Out, In []Row
	Access  []Access // each table read, the row's first
}

// typeRef is a node or edge type named on the command line.
type typeRef struct {
	key  string
	tbl  *pg.Table
	node *pg.NodeType
	edge *pg.EdgeType
}

func (g *Graph) resolveType(name string) (typeRef, error) {
	cat := g.Catalog()
	if n := cat.Node(name); n != nil {
		return typeRef{key: n.TableKey(), tbl: &n.Table, node: n}, nil
	}
	if e := cat.Edge(name); e != nil {
		return typeRef{key: e.TableKey(), tbl: &e.Table, edge: e}, nil
	}
	return typeRef{}, &errs.NotFound{Name: name}
}

// TypeNames lists the schema's node types, then its edge types, each by name.
func (g *Graph) TypeNames() []string {
	var out []string
	for _, n := range g.Catalog().Nodes {
		out = append(out, n.Name)
	}
	for _, e := range g.Catalog().Edges {
		out = append(out, e.Name)
	}
	return out
}

// Get reads the row of type typeName (a node or edge type) whose id is id. A node's id is its
// @key value (a composite key's canonical tuple), an edge's its id. No such row is an
// *errs.NotFound naming both, as is a type the schema does not declare.
func (g *Graph) Get(ctx context.Context, typeName, id string, o GetOptions) (*GetResult, error) {
	t, err := g.resolveType(typeName)
	if err != nil {
		return nil, err
	}
	st, err := g.snapshotAt(ctx, o.ReadAt)
	if err != nil {
		return nil, err
	}
	byID := []cond{{column: "id", op: "=", rng: lance.Equal(id)}}
	found, acc, err := g.selectRows(ctx, st, t, byID, o.Scan, 0)
	if err != nil {
		return nil, err
	}
	res := &GetResult{Access: []Access{acc}}
	if len(found) == 0 {
		return nil, &errs.NotFound{TypeKey: t.key, ID: &id}
	}
	if len(found) > 1 {
		return nil, fmt.Errorf("%s: %d rows have id %q", t.key, len(found), id)
	}
	res.Row = found[0]
	if t.node == nil || !o.Edges {
		return res, nil
	}
	for _, e := range g.Catalog().Edges {
		for _, dir := range []struct {
			endpoint string
			column   string
			into     *[]Row
		}{{e.From, "src", &res.Out}, {e.To, "dst", &res.In}} {
			if dir.endpoint != t.node.Name {
				continue
			}
			et := typeRef{key: e.TableKey(), tbl: &e.Table, edge: e}
			rs, acc, err := g.selectRows(ctx, st, et, []cond{{column: dir.column, op: "=", rng: lance.Equal(id)}}, o.Scan, 0)
			if err != nil {
				return nil, err
			}
			*dir.into = append(*dir.into, rs...)
			res.Access = append(res.Access, acc)
		}
	}
	return res, nil
}

// FindOptions say what Find reads.
type FindOptions struct {
	ReadAt
	Where []Condition // all must hold (ParseWhere)
	Limit int         // at most this many rows; 0: every one
	Scan  bool        // read without indices
}

// FindResult is the rows Find selected, in the table's order (as Export prints them).
type FindResult struct {
	Rows   []Row
	Access Access
}

// Find reads the rows of type typeName for which every condition holds. A condition on a
// property the type lacks, or whose value does not read as the property's type, is a
// *WhereError at its column in the clause.
func (g *Graph) Find(ctx context.Context, typeName string, o FindOptions) (*FindResult, error) {
	t, err := g.resolveType(typeName)
	if err != nil {
		return nil, err
	}
	conds, err := t.conditions(o.Where)
	if err != nil {
		return nil, err
	}
	st, err := g.snapshotAt(ctx, o.ReadAt)
	if err != nil {
		return nil, err
	}
	found, acc, err := g.selectRows(ctx, st, t, conds, o.Scan, o.Limit)
	if err != nil {
		return nil, err
	}
	return &FindResult{Rows: found, Access: acc}, nil
}

// cond is a Condition bound to a column: a range of its values, or (op "!=") any non-null
// value but the range's one.
type cond struct {
	column string
	op     string
	rng    lance.BTreeRange
}

func (c cond) match(a arrow.Array, i int) (bool, error) {
	if c.op == "!=" {
		if a.IsNull(i) {
			return false, nil
		}
		eq, err := c.rng.Contains(a, i)
		return !eq, err
	}
	return c.rng.Contains(a, i)
}

// conditions binds the where clause to t's columns.
func (t typeRef) conditions(where []Condition) ([]cond, error) {
	var out []cond
	for _, w := range where {
		col := w.Property
		if t.edge != nil {
			col = map[string]string{"from": "src", "to": "dst"}[col]
			if col == "" {
				col = w.Property
			}
		}
		idx := t.tbl.Arrow.FieldIndices(col)
		if len(idx) == 0 {
			return nil, &WhereError{Pos: w.Pos, Reason: fmt.Sprintf("%s has no property '%s' (it has %s)", typeSubject(t.key), w.Property, strings.Join(t.columns(), ", "))}
		}
		dt := t.tbl.Arrow.Field(idx[0]).Type
		v, err := literal(dt, w.Value)
		if err != nil {
			return nil, &WhereError{Pos: w.ValuePos, Reason: fmt.Sprintf("%s: %v", w.Property, err)}
		}
		if _, isBool := v.(bool); isBool && w.Op != "=" && w.Op != "!=" {
			return nil, &WhereError{Pos: w.Pos, Reason: fmt.Sprintf("%s is a Bool: only = and != compare it", w.Property)}
		}
		c := cond{column: col, op: w.Op}
		switch w.Op {
		case "=", "!=":
			c.rng = lance.Equal(v)
		case "<":
			c.rng = lance.BTreeRange{Hi: v, HiExcl: true}
		case "<=":
			c.rng = lance.BTreeRange{Hi: v}
		case ">":
			c.rng = lance.BTreeRange{Lo: v, LoExcl: true}
		case ">=":
			c.rng = lance.BTreeRange{Lo: v}
		default:
			return nil, &WhereError{Pos: w.Pos, Reason: fmt.Sprintf("operator %q", w.Op)}
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, &WhereError{Pos: 1, Reason: "no condition"}
	}
	return out, nil
}

// columns are the names a where clause may use on t.
func (t typeRef) columns() []string {
	out := []string{"id"}
	if t.edge != nil {
		out = append(out, "from", "to")
	}
	for _, p := range t.tbl.Properties {
		out = append(out, p.Name)
	}
	return out
}

func typeSubject(key string) string {
	if name, ok := strings.CutPrefix(key, "edge:"); ok {
		return "edge type '" + name + "'"
	}
	return "node type '" + strings.TrimPrefix(key, "node:") + "'"
}

// literal reads a where clause's value as a value of type dt, in the kind lance.BTreeRange
// takes.
func literal(dt arrow.DataType, v string) (any, error) {
	bad := func(what string) (any, error) { return nil, fmt.Errorf("%q is not %s", v, what) }
	switch dt.ID() {
	case arrow.STRING, arrow.LARGE_STRING:
		return v, nil
	case arrow.BOOL:
		switch v {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return bad("a Bool (true or false)")
	case arrow.INT32, arrow.INT64:
		bits := 64
		if dt.ID() == arrow.INT32 {
			bits = 32
		}
		n, err := strconv.ParseInt(v, 10, bits)
		if err != nil {
			return bad(fmt.Sprintf("an I%d", bits))
		}
		return n, nil
	case arrow.UINT32, arrow.UINT64:
		bits := 64
		if dt.ID() == arrow.UINT32 {
			bits = 32
		}
		n, err := strconv.ParseUint(v, 10, bits)
		if err != nil {
			return bad(fmt.Sprintf("a U%d", bits))
		}
		return n, nil
	case arrow.FLOAT32, arrow.FLOAT64:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return bad("a finite number")
		}
		if dt.ID() == arrow.FLOAT32 {
			f = float64(float32(f)) // compared at the stored width
		}
		return f, nil
	case arrow.DATE32:
		if n, err := strconv.ParseInt(v, 10, 32); err == nil {
			return n, nil
		}
		d, err := time.Parse(time.DateOnly, v)
		if err != nil {
			return bad("a Date (YYYY-MM-DD or epoch days)")
		}
		return int64(math.Floor(float64(d.Unix()) / 86400)), nil
	case arrow.DATE64:
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n, nil
		}
		d, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return bad("a DateTime (RFC 3339 or epoch milliseconds)")
		}
		return d.UnixMilli(), nil
	}
	return nil, fmt.Errorf("a %s property cannot be compared", dt)
}

// errLimit stops a scan that has found enough rows.
var errLimit = errors.New("limit reached")

// hit is a row found, with where it is for ordering.
type hit struct {
	frag int // the fragment's position in the table version
	off  uint32
	line []byte
}

// selectRows reads the rows of t in st for which every condition holds, through a BTREE on one
// of their columns unless scan (an equality first, then a range; != never: it selects nearly
// everything), else with a filtered scan. Rows come in the table's order; limit > 0 keeps that
// many.
func (g *Graph) selectRows(ctx context.Context, st *publisher.State, t typeRef, conds []cond, scan bool, limit int) ([]Row, Access, error) {
	acc := Access{Table: t.key}
	e, ok := st.Table(t.key)
	if !ok {
		return nil, acc, nil // a table the state does not hold has no rows
	}
	ds, err := lance.Open(ctx, g.root.Sub(e.Path), lance.WithBranch(derefOr(e.Branch)), lance.AtVersion(e.Version))
	if err != nil {
		return nil, acc, fmt.Errorf("%s: %w", t.key, err)
	}
	frags := ds.Manifest().Fragments
	acc.Fragments = len(frags)
	position := make(map[uint64]int, len(frags))
	for i := range frags {
		position[frags[i].ID] = i
	}
	var cols []string
	for _, c := range conds {
		if !slices.Contains(cols, c.column) {
			cols = append(cols, c.column)
		}
	}
	filter := lance.Filter{SQL: "(inspection)", Columns: cols, Match: func(rec arrow.Record) ([]bool, error) {
		out := make([]bool, rec.NumRows())
		for i := range out {
			out[i] = true
		}
		for _, c := range conds {
			col := rec.Column(rec.Schema().FieldIndices(c.column)[0])
			for i := range out {
				if !out[i] {
					continue
				}
				ok, err := c.match(col, i)
				if err != nil {
					return nil, err
				}
				out[i] = ok
			}
		}
		return out, nil
	}}
	var hits []hit
	var buf bytes.Buffer
	collect := func(rec arrow.Record) error {
		n := int(rec.NumCols()) - 1 // the last column is _rowaddr
		addrs := rec.Column(n).(*array.Uint64)
		data := array.NewRecord(t.tbl.Arrow, rec.Columns()[:n], rec.NumRows())
		defer data.Release()
		buf.Reset()
		if err := rows.Export(g.Catalog(), t.key, data, &buf); err != nil {
			return err
		}
		lines := bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n"))
		if len(lines) != int(rec.NumRows()) {
			return fmt.Errorf("%s: %d rows exported as %d lines", t.key, rec.NumRows(), len(lines))
		}
		for i, l := range lines {
			a := lance.RowAddress(addrs.Value(i))
			hits = append(hits, hit{frag: position[a.Fragment()], off: a.Offset(), line: bytes.Clone(l)})
		}
		if limit > 0 && len(hits) >= limit && acc.Index == "" {
			return errLimit // a scan reads in table order: the first rows are the ones kept
		}
		return nil
	}
	var pick *cond
	if !scan {
		for _, op := range []string{"=", "range"} {
			for i := range conds {
				c := &conds[i]
				if pick == nil && (c.op == op || op == "range" && c.op != "=" && c.op != "!=") && ds.BTree(c.column) != nil {
					pick = c
				}
			}
		}
	}
	opts := lance.ScanOptions{Filter: &filter, WithRowAddress: true}
	if pick == nil {
		acc.Scanned = len(frags)
		if err := ds.Each(ctx, opts, collect); err != nil && !errors.Is(err, errLimit) {
			return nil, acc, fmt.Errorf("%s: %w", t.key, err)
		}
	} else {
		addrs, s, err := ds.SearchBTree(ctx, pick.column, pick.rng)
		if err != nil {
			return nil, acc, fmt.Errorf("%s: %w", t.key, err)
		}
		acc.Column, acc.Index, acc.Pages, acc.PagesRead, acc.Scanned = pick.column, s.Index, s.Pages, s.PagesRead, len(s.Uncovered)
		recs, err := ds.Take(ctx, addrs, opts)
		if err != nil {
			return nil, acc, fmt.Errorf("%s: %w", t.key, err)
		}
		for _, r := range recs {
			if err == nil {
				err = collect(r)
			}
			r.Release()
		}
		if err != nil {
			return nil, acc, err
		}
		if len(s.Uncovered) > 0 {
			opts.Fragments = s.Uncovered
			if err := ds.Each(ctx, opts, collect); err != nil {
				return nil, acc, fmt.Errorf("%s: %w", t.key, err)
			}
		}
	}
	sort.SliceStable(hits, func(i, j int) bool {
		if hits[i].frag != hits[j].frag {
			return hits[i].frag < hits[j].frag
		}
		return hits[i].off < hits[j].off
	})
	if limit > 0 && len(hits) > limit {
		hits = hits[:limit]
	}
	out := make([]Row, len(hits))
	for i, h := range hits {
		out[i] = Row{TableKey: t.key, Line: h.line}
	}
	acc.Rows = len(out)
	return out, acc, nil
}

// TableCount is one table's rows, from its Lance manifest: each fragment's physical rows less
// its deletion file's count. Nothing is scanned.
type TableCount struct {
	Type         string `json:"type"`
	Kind         string `json:"kind"` // "node" or "edge"
	Rows         uint64 `json:"rows"`
	DeletedRows  uint64 `json:"deleted_rows"`
	Fragments    int    `json:"fragments"`
	TableVersion uint64 `json:"table_version"`
}

// CountResult is the row counts of a branch's tables at a manifest version.
type CountResult struct {
	Branch          string       `json:"branch"`
	ManifestVersion uint64       `json:"manifest_version"`
	Tables          []TableCount `json:"tables"`
}

// Count reads the row count of every table (or of type typeName alone) from metadata: the
// __manifest's table versions and their Lance manifests, no data file.
func (g *Graph) Count(ctx context.Context, typeName string, at ReadAt) (*CountResult, error) {
	var only string
	if typeName != "" {
		t, err := g.resolveType(typeName)
		if err != nil {
			return nil, err
		}
		only = t.key
	}
	st, err := g.snapshotAt(ctx, at)
	if err != nil {
		return nil, err
	}
	res := &CountResult{Branch: branchName(at.Branch), ManifestVersion: st.ManifestVersion, Tables: []TableCount{}}
	for _, e := range st.Tables() {
		if only != "" && e.TableKey != only {
			continue
		}
		ds, err := lance.Open(ctx, g.root.Sub(e.Path), lance.WithBranch(derefOr(e.Branch)), lance.AtVersion(e.Version))
		if err != nil {
			return nil, fmt.Errorf("count %s: %w", e.TableKey, err)
		}
		kind, name, _ := strings.Cut(e.TableKey, ":")
		c := TableCount{Type: name, Kind: kind, Rows: ds.CountRows(), Fragments: len(ds.Manifest().Fragments), TableVersion: e.Version}
		for _, f := range ds.Manifest().Fragments {
			c.DeletedRows += f.PhysicalRows - f.NumRows()
		}
		res.Tables = append(res.Tables, c)
	}
	slices.SortStableFunc(res.Tables, func(a, b TableCount) int {
		if a.Kind != b.Kind {
			return -strings.Compare(a.Kind, b.Kind) // nodes, then edges
		}
		return strings.Compare(a.Type, b.Type)
	})
	return res, nil
}

func branchName(b string) string {
	if b == "" {
		return "main"
	}
	return b
}

// CommitRecord is one graph commit with what applied it: the ingest receipt of the message
// (its producer's id, or the stream and sequence) when a message did.
type CommitRecord struct {
	CommitInfo
	Branch   string `json:"branch"` // the branch the commit was made on ("main" for main)
	MsgID    string `json:"msg_id,omitempty"`
	Receipt  string `json:"receipt,omitempty"` // the receipt's key: the message id, else <stream>[@<created>]:<sequence>
	Stream   string `json:"stream,omitempty"`
	Sequence uint64 `json:"sequence,omitempty"`
	Time     string `json:"time"` // created_at in RFC 3339, UTC
}

// CommitLog lists a branch's visible graph commits, newest first, each with its receipt.
func (g *Graph) CommitLog(ctx context.Context, at ReadAt) ([]CommitRecord, error) {
	st, err := g.snapshotAt(ctx, at)
	if err != nil {
		return nil, err
	}
	cs, err := st.AllCommits(ctx)
	if err != nil {
		return nil, err
	}
	rcs, err := st.AllReceipts(ctx)
	if err != nil {
		return nil, err
	}
	byCommit := make(map[string]publisher.Receipt, len(rcs))
	for _, rc := range rcs {
		byCommit[rc.GraphCommitID] = rc
	}
	out := make([]CommitRecord, 0, len(cs))
	for _, c := range cs {
		r := CommitRecord{CommitInfo: commitInfo(c), Branch: "main", Time: time.UnixMicro(c.Meta.CreatedAt).UTC().Format(time.RFC3339Nano)}
		if c.Branch != nil && *c.Branch != "" {
			r.Branch = *c.Branch
		}
		if rc, ok := byCommit[c.ID]; ok {
			r.MsgID, r.Receipt, r.Stream, r.Sequence = rc.MsgID, rc.ReceiptKey(), rc.Stream, rc.Sequence
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].GraphManifestVersion != out[j].GraphManifestVersion {
			return out[i].GraphManifestVersion > out[j].GraphManifestVersion
		}
		return out[i].GraphCommitID > out[j].GraphCommitID
	})
	return out, nil
}

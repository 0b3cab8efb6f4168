package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// inspectGraph is a graph of 60 people at three companies, some working at one, with the
// reference's BTREEs built (id; src, dst on edges), then a batch more that the indices do not
// cover yet: a get by id meets both an indexed fragment and an unindexed one.
func inspectGraph(t *testing.T) *Graph {
	t.Helper()
	g := testGraph(t)
	var lines []string
	for _, c := range []string{"acme.io", "globex.com", "initech.net"} {
		lines = append(lines, fmt.Sprintf(`{"type":"Company","data":{"domain":%q,"name":%q,"size":"smb"}}`, c, strings.ToUpper(c[:1])+c[1:]))
	}
	for i := range 60 {
		lines = append(lines, fmt.Sprintf(`{"type":"Person","data":{"handle":"p%02d","name":"Person %d","active":%v}}`, i, i, i%3 == 0))
		if i%2 == 0 {
			lines = append(lines, fmt.Sprintf(`{"edge":"WorksAt","from":"p%02d","to":%q,"data":{"id":"w%02d","role":"r%d"}}`, i, []string{"acme.io", "globex.com", "initech.net"}[i%3], i, i%4))
		}
	}
	if _, err := load(t, g, "merge", lines...); err != nil {
		t.Fatal(err)
	}
	optimize(t, g, OptimizeOptions{Indices: true})
	if _, err := load(t, g, "merge",
		`{"type":"Person","data":{"handle":"zoe","name":"Zoe","active":true}}`,
		`{"type":"Person","data":{"handle":"p01","name":"Person One again","active":true}}`,
		`{"edge":"WorksAt","from":"zoe","to":"acme.io","data":{"id":"w-zoe"}}`); err != nil {
		t.Fatal(err)
	}
	return g
}

func lines(rs []Row) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Line)
	}
	return out
}

// exportLine is the line Export prints for the row of tableKey with id.
func exportLine(t *testing.T, g *Graph, branch string, kind, typ, id string) string {
	t.Helper()
	for _, l := range strings.Split(export(t, g, branch), "\n") {
		if strings.HasPrefix(l, `{"`+kind+`":"`+typ+`"`) && strings.Contains(l, `"id":"`+id+`"`) {
			return l
		}
	}
	return ""
}

// Get by id answers exactly as the export prints the row, through the BTREE or a scan alike,
// with a node's edges out and in; the index path reads the index (and scans only the fragment
// loaded since it was built).
func TestGetIndexAndScanAgree(t *testing.T) {
	g := inspectGraph(t)
	ctx := context.Background()
	for _, c := range []struct{ typ, id string }{{"Person", "p00"}, {"Person", "p01"}, {"Person", "p59"}, {"Person", "zoe"},
		{"Company", "acme.io"}, {"WorksAt", "w10"}, {"WorksAt", "w-zoe"}} {
		idx, err := g.Get(ctx, c.typ, c.id, GetOptions{Edges: true})
		if err != nil {
			t.Fatalf("%s %s: %v", c.typ, c.id, err)
		}
		scan, err := g.Get(ctx, c.typ, c.id, GetOptions{Edges: true, Scan: true})
		if err != nil {
			t.Fatal(err)
		}
		if string(idx.Row.Line) != string(scan.Row.Line) || !slices.Equal(lines(idx.Out), lines(scan.Out)) || !slices.Equal(lines(idx.In), lines(scan.In)) {
			t.Fatalf("%s %s: index %s %v %v, scan %s %v %v", c.typ, c.id, idx.Row.Line, lines(idx.Out), lines(idx.In), scan.Row.Line, lines(scan.Out), lines(scan.In))
		}
		kind := "type"
		if c.typ == "WorksAt" {
			kind = "edge"
		}
		if want := exportLine(t, g, "", kind, c.typ, c.id); string(idx.Row.Line) != want {
			t.Fatalf("%s %s: got %s, export has %s", c.typ, c.id, idx.Row.Line, want)
		}
		for _, a := range idx.Access {
			if a.Fragments == 0 {
				continue // an empty table has no index
			}
			if !a.Indexed() || a.Index != a.Column+"_idx" || a.PagesRead > a.Pages || a.Scanned > 1 || a.Table != "node:Company" && a.Scanned != 1 {
				t.Fatalf("%s %s: index path %+v", c.typ, c.id, a)
			}
		}
		for _, a := range scan.Access {
			if a.Indexed() || a.Scanned != a.Fragments {
				t.Fatalf("%s %s: scan path %+v", c.typ, c.id, a)
			}
		}
	}
	p00, _ := g.Get(ctx, "Person", "p00", GetOptions{Edges: true})
	if len(p00.Out) != 1 || !strings.Contains(string(p00.Out[0].Line), `"id":"w00"`) || len(p00.In) != 0 || len(p00.Access) != 3 {
		t.Fatalf("p00's edges: out %v in %v, access %v", lines(p00.Out), lines(p00.In), p00.Access)
	}
	acme, _ := g.Get(ctx, "Company", "acme.io", GetOptions{Edges: true})
	if len(acme.In) != 11 || len(acme.Out) != 0 { // p00, p06, …, p54, and zoe
		t.Fatalf("acme.io's edges in: %d", len(acme.In))
	}
	if p01, _ := g.Get(ctx, "Person", "p01", GetOptions{}); !strings.Contains(string(p01.Row.Line), "Person One again") || len(p01.Access) != 1 {
		t.Fatalf("the upserted row: %s", p01.Row.Line)
	}
}

// Not found names the type and the id and is of kind not_found; so is an unknown type.
func TestGetNotFound(t *testing.T) {
	g := inspectGraph(t)
	ctx := context.Background()
	for _, scan := range []bool{false, true} {
		_, err := g.Get(ctx, "Person", "nobody", GetOptions{Scan: scan})
		var nf *errs.NotFound
		if !errors.As(err, &nf) || errs.Kind(err) != errs.KindNotFound || err.Error() != `node type 'Person' has no row with id "nobody"` {
			t.Fatalf("scan %v: %v", scan, err)
		}
	}
	_, err := g.Get(ctx, "Persn", "p00", GetOptions{})
	if errs.Kind(err) != errs.KindNotFound || err.Error() != "no node or edge type 'Persn'" {
		t.Fatalf("unknown type: %v", err)
	}
	if _, err := g.Count(ctx, "Persn", ReadAt{}); errs.Kind(err) != errs.KindNotFound {
		t.Fatalf("count of an unknown type: %v", err)
	}
	if _, err := g.Find(ctx, "Persn", FindOptions{}); errs.Kind(err) != errs.KindNotFound {
		t.Fatalf("find in an unknown type: %v", err)
	}
	if _, err := g.Get(ctx, "Person", "p00", GetOptions{ReadAt: ReadAt{Branch: "nope"}}); errs.Kind(err) != errs.KindBranchMissing {
		t.Fatalf("a missing branch: %v", err)
	}
}

// A branch reads its own rows; an old manifest version reads the rows as they were.
func TestGetBranchAndVersion(t *testing.T) {
	g := inspectGraph(t)
	ctx := context.Background()
	snap, err := g.Snapshot(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	before := snap.ManifestVersion // (the writer's state moves on with its commits)
	if err := g.CreateBranch(ctx, "b1", "main"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Load(ctx, LoadRequest{Branch: "b1", Mode: "merge", Records: records(t,
		`{"type":"Person","data":{"handle":"bee","name":"Bee","active":true}}`,
		`{"type":"Person","data":{"handle":"p00","name":"Renamed on b1","active":true}}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := load(t, g, "merge", `{"type":"Person","data":{"handle":"p02","name":"Renamed on main","active":true}}`); err != nil {
		t.Fatal(err)
	}
	for _, scan := range []bool{false, true} {
		b1 := ReadAt{Branch: "b1"}
		if r, err := g.Get(ctx, "Person", "bee", GetOptions{ReadAt: b1, Scan: scan}); err != nil || !strings.Contains(string(r.Row.Line), "Bee") {
			t.Fatalf("bee on b1: %v", err)
		}
		if r, _ := g.Get(ctx, "Person", "p00", GetOptions{ReadAt: b1, Scan: scan}); !strings.Contains(string(r.Row.Line), "Renamed on b1") {
			t.Fatalf("p00 on b1: %s", r.Row.Line)
		}
		if _, err := g.Get(ctx, "Person", "bee", GetOptions{Scan: scan}); errs.Kind(err) != errs.KindNotFound {
			t.Fatalf("bee on main: %v", err)
		}
		if r, _ := g.Get(ctx, "Person", "p02", GetOptions{Scan: scan}); !strings.Contains(string(r.Row.Line), "Renamed on main") {
			t.Fatalf("p02 on main: %s", r.Row.Line)
		}
		old := ReadAt{Version: before}
		if r, _ := g.Get(ctx, "Person", "p02", GetOptions{ReadAt: old, Scan: scan}); !strings.Contains(string(r.Row.Line), `"Person 2"`) {
			t.Fatalf("p02 at version %d: %s", old.Version, r.Row.Line)
		}
		if r, err := g.Find(ctx, "Person", FindOptions{ReadAt: old, Where: where(t, "name = 'Renamed on main'"), Scan: scan}); err != nil || len(r.Rows) != 0 {
			t.Fatalf("find at an old version: %v %v", r, err)
		}
	}
	c, err := g.Count(ctx, "Person", ReadAt{Branch: "b1"})
	if err != nil || len(c.Tables) != 1 || c.Tables[0].Rows != 62 || c.Branch != "b1" {
		t.Fatalf("count on b1: %+v %v", c, err)
	}
	c, err = g.Count(ctx, "Person", ReadAt{Version: before})
	if err != nil || c.Tables[0].Rows != 61 || c.ManifestVersion != before {
		t.Fatalf("count at an old version: %+v %v", c, err)
	}
}

func where(t *testing.T, s string) []Condition {
	t.Helper()
	c, err := ParseWhere(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Find selects the same rows through an index as by a scan, in the table's order, for each
// operator; a bad property or value is a WhereError at its column.
func TestFindIndexAndScanAgree(t *testing.T) {
	g := inspectGraph(t)
	ctx := context.Background()
	for _, c := range []struct {
		typ, where string
		n          int
		indexed    bool
	}{
		{"Person", "id = p07", 1, true},
		{"Person", "id == 'zoe'", 1, true},
		{"Person", "id >= p55", 6, true},                   // p55..p59, zoe
		{"Person", "id < p03 and active = true", 2, true},  // p00, p01 (upserted active)
		{"Person", "active = true and id <= p09", 5, true}, // p00, p01, p03, p06, p09
		{"Person", "active != true", 39, false},
		{"Person", "name = 'Person 5'", 1, false},
		{"Person", `name = "Person One again"`, 1, false},
		{"WorksAt", "from = p10", 1, true},
		{"WorksAt", "to = 'acme.io' and role = r0", 5, true}, // p00, p12, …, p48
		{"WorksAt", "src = zoe", 1, true},
		{"Company", "size = smb", 3, false},
	} {
		idx, err := g.Find(ctx, c.typ, FindOptions{Where: where(t, c.where)})
		if err != nil {
			t.Fatalf("%s: %v", c.where, err)
		}
		scan, err := g.Find(ctx, c.typ, FindOptions{Where: where(t, c.where), Scan: true})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(lines(idx.Rows), lines(scan.Rows)) {
			t.Fatalf("%s: index %v\nscan %v", c.where, lines(idx.Rows), lines(scan.Rows))
		}
		if idx.Access.Indexed() != c.indexed || scan.Access.Indexed() {
			t.Fatalf("%s: access %v / %v", c.where, idx.Access, scan.Access)
		}
		if len(idx.Rows) != c.n {
			t.Fatalf("%s: %d rows, want %d: %v", c.where, len(idx.Rows), c.n, lines(idx.Rows))
		}
		lim, err := g.Find(ctx, c.typ, FindOptions{Where: where(t, c.where), Limit: 2})
		if err != nil || !slices.Equal(lines(lim.Rows), lines(idx.Rows)[:min(2, len(idx.Rows))]) {
			t.Fatalf("%s limit 2: %v %v", c.where, lines(lim.Rows), err)
		}
		slim, _ := g.Find(ctx, c.typ, FindOptions{Where: where(t, c.where), Limit: 2, Scan: true})
		if !slices.Equal(lines(slim.Rows), lines(lim.Rows)) {
			t.Fatalf("%s limit 2: scan %v, index %v", c.where, lines(slim.Rows), lines(lim.Rows))
		}
	}
	for _, c := range []struct{ where, msg string }{
		{"agee = 3", "where clause, column 1: node type 'Person' has no property 'agee' (it has id, active, born, email, handle, name, skills)"},
		{"id = p01 and active = maybe", `where clause, column 23: active: "maybe" is not a Bool (true or false)`},
		{"born > yesterday", `where clause, column 8: born: "yesterday" is not a Date (YYYY-MM-DD or epoch days)`},
		{"active < true", "where clause, column 1: active is a Bool: only = and != compare it"},
		{"skills = x", "where clause, column 10: skills: a list<item: utf8, nullable> property cannot be compared"},
	} {
		_, err := g.Find(ctx, "Person", FindOptions{Where: where(t, c.where)})
		var we *WhereError
		if !errors.As(err, &we) || err.Error() != c.msg || errs.Kind(err) != errs.KindInvalid {
			t.Errorf("%s: %v, want %s", c.where, err, c.msg)
		}
	}
	r, err := g.Find(ctx, "Person", FindOptions{Where: where(t, "born >= 1990-01-01")})
	if err != nil || len(r.Rows) != 0 {
		t.Fatalf("a date bound: %v %v", r, err)
	}
}

// Count reads rows and deleted rows from metadata, equal to what the export holds.
func TestCount(t *testing.T) {
	g := inspectGraph(t)
	ctx := context.Background()
	c, err := g.Count(ctx, "", ReadAt{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	var deleted uint64
	for _, tc := range c.Tables {
		got[tc.Kind+":"+tc.Type] = tc.Rows
		deleted += tc.DeletedRows
		if tc.Fragments == 0 && tc.Rows > 0 || tc.TableVersion == 0 {
			t.Fatalf("table %+v", tc)
		}
	}
	want := map[string]uint64{}
	for _, l := range strings.Split(strings.TrimSpace(export(t, g, "")), "\n") {
		var typ string
		if _, err := fmt.Sscanf(l, `{"type":%q`, &typ); err == nil {
			want["node:"+strings.Split(typ, `"`)[0]]++
		} else if strings.HasPrefix(l, `{"edge":"WorksAt"`) {
			want["edge:WorksAt"]++
		}
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: count %d, export %d", k, got[k], n)
		}
	}
	if got["node:Person"] != 61 || got["edge:WorksAt"] != 31 || got["node:Doc"] != 0 || len(c.Tables) != 8 || deleted != 1 {
		t.Fatalf("counts %v, deleted %d", got, deleted)
	}
	if c.Tables[0].Kind != "node" || c.Tables[len(c.Tables)-1].Kind != "edge" {
		t.Fatalf("order %+v", c.Tables)
	}
}

// The commit log names each commit's branch, actor and the message id of its receipt.
func TestCommitLog(t *testing.T) {
	g := testGraph(t)
	ctx := context.Background()
	if _, err := g.Load(ctx, LoadRequest{Mode: "merge", Actor: "alice-bot", Receipt: &publisher.Receipt{MsgID: "batch-1"}, Records: records(t, people...)}); err != nil {
		t.Fatal(err)
	}
	if err := g.CreateBranch(ctx, "b1", "main"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Load(ctx, LoadRequest{Branch: "b1", Mode: "merge", Receipt: &publisher.Receipt{Stream: "OMNIGRAPH_DEMO", Sequence: 7}, Records: records(t, people[0])}); err != nil {
		t.Fatal(err)
	}
	main, err := g.CommitLog(ctx, ReadAt{})
	if err != nil {
		t.Fatal(err)
	}
	if len(main) != 2 || main[0].MsgID != "batch-1" || main[0].Receipt != "batch-1" || main[0].Branch != "main" || *main[0].ActorID != "alice-bot" || main[0].Time == "" {
		t.Fatalf("main log %+v", main)
	}
	b1, err := g.CommitLog(ctx, ReadAt{Branch: "b1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(b1) < 3 || b1[0].Branch != "b1" || b1[0].MsgID != "" || b1[0].Receipt != "OMNIGRAPH_DEMO:7" || b1[0].Sequence != 7 {
		t.Fatalf("b1 log %+v", b1)
	}
	old, err := g.CommitLog(ctx, ReadAt{Version: main[1].GraphManifestVersion})
	if err != nil || len(old) != 1 {
		t.Fatalf("log at version %d: %+v %v", main[1].GraphManifestVersion, old, err)
	}
}

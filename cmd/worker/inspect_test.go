package main

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
)

// captureStderr runs f with the process's standard error going to a file, and returns it.
func captureStderr(t *testing.T, f func() error) (string, error) {
	t.Helper()
	out, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	old := os.Stderr
	os.Stderr = out
	ferr := f()
	os.Stderr = old
	b, err := os.ReadFile(out.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(b), ferr
}

// inspectRoot is a graph with two loads on main (the first with a message id and an actor),
// the reference's indices built between them, and a branch b1 with a row of its own; version
// is main's manifest version after the first load.
func inspectRoot(t *testing.T) (root string, version string) {
	t.Helper()
	root = initGraph(t)
	first := writeTemp(t, "1.ndjson", strings.Join([]string{
		`{"type":"Person","data":{"handle":"alice","name":"Alice","active":true}}`,
		`{"type":"Person","data":{"handle":"bob","name":"Bob Smith","active":false}}`,
		`{"type":"Company","data":{"domain":"acme.io","name":"Acme","size":"smb"}}`,
		`{"edge":"WorksAt","from":"alice","to":"acme.io","data":{"id":"w1","role":"cto"}}`,
		`{"edge":"WorksAt","from":"bob","to":"acme.io","data":{"id":"w2","role":"dev"}}`,
	}, "\n")+"\n")
	second := writeTemp(t, "2.ndjson", `{"type":"Person","data":{"handle":"bob","name":"Robert","active":true}}`+"\n"+
		`{"type":"Person","data":{"handle":"carol","name":"Carol","active":true}}`+"\n")
	onB1 := writeTemp(t, "3.ndjson", `{"type":"Person","data":{"handle":"dave","name":"Dave","active":false}}`+"\n")
	for _, args := range [][]string{
		{"load", first, "--root", root, "--msg-id", "batch-1", "--actor", "loader"},
		{"optimize", "--root", root, "--indices"},
		{"load", second, "--root", root, "--msg-id", "batch-2"},
		{"branch", "create", "b1", "--root", root},
		{"load", onB1, "--root", root, "--branch", "b1", "--msg-id", "batch-b1"},
	} {
		if _, err := captureStdout(t, func() error { return run(args[0], args[1:]...) }); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	out, err := captureStdout(t, func() error { return run("commits", "--root", root, "-o", "json") })
	if err != nil {
		t.Fatal(err)
	}
	var cs []struct {
		Version uint64 `json:"graph_manifest_version"`
		MsgID   string `json:"msg_id"`
	}
	if err := json.Unmarshal([]byte(out), &cs); err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.MsgID == "batch-1" {
			version = jsonNumber(c.Version)
		}
	}
	if version == "" {
		t.Fatalf("no commit of batch-1: %s", out)
	}
	return root, version
}

func jsonNumber(v uint64) string { b, _ := json.Marshal(v); return string(b) }

// exportLines are the lines of `worker export` holding any of the substrings.
func exportLines(t *testing.T, root string, args []string, subs ...string) []string {
	t.Helper()
	out, err := captureStdout(t, func() error { return run("export", append([]string{"--root", root}, args...)...) })
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		for _, s := range subs {
			if strings.Contains(l, s) {
				keep = append(keep, l)
				break
			}
		}
	}
	return keep
}

// worker get prints the row as export does, then a node's edges; through the index or a scan
// alike (-v says which); -o table; a branch; an old version; not found and unknown types exit
// 11 naming what was asked.
func TestGetCommand(t *testing.T) {
	root, version := inspectRoot(t)
	get := func(args ...string) (string, string, error) {
		var stdout string
		stderr, err := captureStderr(t, func() error {
			var err error
			stdout, err = captureStdout(t, func() error { return run("get", append(args, "--root", root)...) })
			return err
		})
		return stdout, stderr, err
	}
	out, stderr, err := get("Person", "alice", "-v")
	if err != nil {
		t.Fatal(err)
	}
	want := exportLines(t, root, nil, `"id":"alice"`, `"id":"w1"`)
	if strings.Join(want, "\n")+"\n" != out || !strings.Contains(stderr, "node:Person: BTREE index id_idx on id") ||
		!strings.Contains(stderr, "edge:WorksAt: BTREE index src_idx on src") {
		t.Fatalf("get alice:\n%s\nwant\n%s\nstderr %s", out, strings.Join(want, "\n"), stderr)
	}
	for _, id := range []string{"alice", "bob", "carol"} {
		idx, _, err := get("Person", id)
		if err != nil {
			t.Fatal(err)
		}
		scan, stderr, err := get("Person", id, "--scan", "--verbose")
		if err != nil || idx != scan || !strings.Contains(stderr, "node:Person: filtered scan") || strings.Contains(stderr, "BTREE") {
			t.Fatalf("%s: index\n%s\nscan\n%s\n%s %v", id, idx, scan, stderr, err)
		}
	}
	if out, _, _ := get("Person", "bob", "--edges=false"); strings.Count(out, "\n") != 1 || !strings.Contains(out, "Robert") {
		t.Fatalf("bob without edges: %s", out)
	}
	if out, _, _ := get("WorksAt", "w2"); out != strings.Join(exportLines(t, root, nil, `"id":"w2"`), "\n")+"\n" {
		t.Fatalf("edge w2: %s", out)
	}
	out, _, err = get("Company", "acme.io", "-o", "table")
	if err != nil || !strings.Contains(out, "node Company") || !strings.Contains(out, "edges in:") || !strings.Contains(out, "w2  bob") {
		t.Fatalf("table: %v\n%s", err, out)
	}
	if out, _, err := get("Person", "dave", "--branch", "b1"); err != nil || !strings.Contains(out, `"name":"Dave"`) {
		t.Fatalf("dave on b1: %v %s", err, out)
	}
	if out, _, err := get("Person", "bob", "--version", version); err != nil || !strings.Contains(out, `"name":"Bob Smith"`) {
		t.Fatalf("bob at version %s: %v %s", version, err, out)
	}
	for _, c := range []struct {
		args []string
		msg  string
		code int
	}{
		{[]string{"Person", "dave"}, `node type 'Person' has no row with id "dave"`, 11},
		{[]string{"Person", "carol", "--version", version}, `node type 'Person' has no row with id "carol"`, 11},
		{[]string{"Person", "carol", "--scan", "--version", version}, `node type 'Person' has no row with id "carol"`, 11},
		{[]string{"Persn", "alice"}, "no node or edge type 'Persn'", 11},
		{[]string{"Person", "alice", "--branch", "nope"}, "branch 'nope' not found", 8},
		{[]string{"Person"}, "get takes TYPE ID", 2},
		{[]string{"Person", "alice", "-o", "yaml"}, `--output "yaml": the formats are json, table`, 2},
	} {
		_, _, err := get(c.args...)
		if err == nil || !strings.Contains(err.Error(), c.msg) || exitCode(err) != c.code {
			t.Errorf("get %v: %v (exit %d), want %q exit %d", c.args, err, exitCode(err), c.msg, c.code)
		}
	}
}

// worker find selects with a where clause, the index and a scan alike; a bad clause is a usage
// error naming its column.
func TestFindCommand(t *testing.T) {
	root, version := inspectRoot(t)
	find := func(args ...string) (string, string, error) {
		var stdout string
		stderr, err := captureStderr(t, func() error {
			var err error
			stdout, err = captureStdout(t, func() error { return run("find", append(args, "--root", root)...) })
			return err
		})
		return stdout, stderr, err
	}
	for _, c := range []struct {
		typ, where string
		ids        []string
		indexed    bool
	}{
		{"Person", "id = alice", []string{"alice"}, true},
		{"Person", "id >= b and active = true", []string{"bob", "carol"}, true},
		{"Person", "name = 'Bob Smith'", nil, false},
		{"Person", "active != false", []string{"alice", "bob", "carol"}, false},
		{"WorksAt", "to = acme.io and role = dev", []string{"w2"}, true},
	} {
		out, stderr, err := find(c.typ, "--where", c.where, "-v")
		if err != nil {
			t.Fatalf("%s: %v", c.where, err)
		}
		scan, _, err := find(c.typ, "--where", c.where, "--scan")
		if err != nil || scan != out {
			t.Fatalf("%s: index\n%s\nscan\n%s", c.where, out, scan)
		}
		var want []string
		for _, id := range c.ids {
			want = append(want, exportLines(t, root, nil, `"id":"`+id+`"`)...)
		}
		var got []string
		if out != "" {
			got = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: got\n%s\nwant\n%s", c.where, out, strings.Join(want, "\n"))
		}
		if strings.Contains(stderr, "BTREE") != c.indexed {
			t.Fatalf("%s: %s", c.where, stderr)
		}
	}
	if out, _, err := find("Person", "--where", "name = 'Bob Smith'", "--version", version); err != nil || !strings.Contains(out, `"id":"bob"`) {
		t.Fatalf("find at an old version: %v %s", err, out)
	}
	if out, _, err := find("Person", "--where", "active = false", "--branch", "b1", "-o", "table"); err != nil || !strings.Contains(out, "dave") || !strings.HasPrefix(out, "node Person\nID") {
		t.Fatalf("find on b1 as a table: %v\n%s", err, out)
	}
	if out, _, err := find("Person", "--where", "active = true", "--limit", "1"); err != nil || strings.Count(out, "\n") != 1 || !strings.Contains(out, `"id":"alice"`) {
		t.Fatalf("limit 1: %v %s", err, out)
	}
	for _, c := range []struct {
		args []string
		msg  string
		code int
	}{
		{[]string{"Person", "--where", "nme = x"}, `--where "nme = x": where clause, column 1: node type 'Person' has no property 'nme'`, 2},
		{[]string{"Person", "--where", "name ~ x"}, `where clause, column 6: expected an operator`, 2},
		{[]string{"Person", "--where", "active = maybe"}, `where clause, column 10: active: "maybe" is not a Bool`, 2},
		{[]string{"Person"}, "find needs --where", 2},
		{[]string{"Persn", "--where", "id = x"}, "no node or edge type 'Persn'", 11},
	} {
		_, _, err := find(c.args...)
		if err == nil || !strings.Contains(err.Error(), c.msg) || exitCode(err) != c.code {
			t.Errorf("find %v: %v (exit %d), want %q exit %d", c.args, err, exitCode(err), c.msg, c.code)
		}
	}
}

// worker count reads the counts of every type, or one, at a branch or version.
func TestCountCommand(t *testing.T) {
	root, version := inspectRoot(t)
	count := func(args ...string) (string, error) {
		return captureStdout(t, func() error { return run("count", append(args, "--root", root)...) })
	}
	out, err := count()
	if err != nil || !strings.HasPrefix(out, "TYPE") || !strings.Contains(out, "Person") || !strings.Contains(out, "WorksAt") || !strings.Contains(out, "total") {
		t.Fatalf("count: %v\n%s", err, out)
	}
	rows := func(args ...string) map[string]uint64 {
		t.Helper()
		out, err := count(append(args, "-o", "json")...)
		if err != nil {
			t.Fatal(err)
		}
		var res struct {
			Tables []struct {
				Type    string
				Rows    uint64
				Deleted uint64 `json:"deleted_rows"`
			}
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		m := map[string]uint64{}
		for _, tc := range res.Tables {
			m[tc.Type] = tc.Rows
			m[tc.Type+" deleted"] = tc.Deleted
		}
		return m
	}
	if m := rows(); m["Person"] != 3 || m["Person deleted"] != 1 || m["WorksAt"] != 2 || m["Doc"] != 0 || len(m) != 16 {
		t.Fatalf("counts %v", m)
	}
	if m := rows("Person", "--branch", "b1"); m["Person"] != 4 || len(m) != 2 {
		t.Fatalf("Person on b1: %v", m)
	}
	if m := rows("--version", version); m["Person"] != 2 || m["Person deleted"] != 0 {
		t.Fatalf("at version %s: %v", version, m)
	}
	if out, err := count("Person", "--json"); err != nil || !strings.Contains(out, `"rows": 3`) {
		t.Fatalf("--json: %v %s", err, out)
	}
	if _, err := count("Persn"); exitCode(err) != 11 {
		t.Fatalf("an unknown type: %v", err)
	}
}

// worker commits names each commit's branch, actor and message id; --json stays -o json.
func TestCommitsCommand(t *testing.T) {
	root, _ := inspectRoot(t)
	commits := func(args ...string) (string, error) {
		return captureStdout(t, func() error { return run("commits", append(args, "--root", root)...) })
	}
	out, err := commits()
	if err != nil || !strings.HasPrefix(out, "COMMIT") || !strings.Contains(out, "MSG_ID") {
		t.Fatalf("commits: %v\n%s", err, out)
	}
	var loaded string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "batch-1") {
			loaded = l
		}
	}
	if f := strings.Fields(loaded); len(f) != 6 || f[2] != "main" || f[3] != "loader" || f[4] != "batch-1" || !strings.HasSuffix(f[5], "Z") {
		t.Fatalf("the first load's line: %q\n%s", loaded, out)
	}
	b1, err := commits("--branch", "b1")
	if err != nil || !strings.Contains(b1, "batch-b1") || !strings.Contains(b1, " b1 ") {
		t.Fatalf("commits on b1: %v\n%s", err, b1)
	}
	js, err := commits("--json")
	if err != nil {
		t.Fatal(err)
	}
	oj, err := commits("-o", "json")
	if err != nil || oj != js {
		t.Fatalf("--json and -o json differ: %v", err)
	}
	var cs []map[string]any
	if err := json.Unmarshal([]byte(js), &cs); err != nil || len(cs) != 4 || cs[0]["msg_id"] != "batch-2" || cs[0]["branch"] != "main" || cs[0]["time"] == "" || cs[0]["graph_commit_id"] == "" {
		t.Fatalf("json: %v %v", err, cs)
	}
	if _, err := commits("--json", "-o", "table"); exitCode(err) != exitUsage {
		t.Fatalf("--json -o table: %v", err)
	}
}

// -o on every command that prints records, Examples in their help, and completions of types,
// branches, formats, load modes and dead-letter reasons.
func TestOutputHelpAndCompletion(t *testing.T) {
	root, _ := inspectRoot(t)
	for _, cmd := range [][]string{{"get"}, {"find"}, {"count"}, {"commits"}, {"export"}, {"dlq", "list"}} {
		out, err := captureStdout(t, func() error { return run(cmd[0], append(cmd[1:], "-h")...) })
		if err != nil || !strings.Contains(out, "Examples:") || !strings.Contains(out, "-o, --output string") {
			t.Errorf("%v -h: %v\n%s", cmd, err, out)
		}
	}
	if err := run("dlq", "list", "--graph", "demo", "-o", "xml"); exitCode(err) != exitUsage || !strings.Contains(err.Error(), "the formats are table, json") {
		t.Errorf("dlq list -o xml: %v", err)
	}
	out, err := captureStdout(t, func() error { return run("export", "--root", root, "-o", "table") })
	if err != nil || !strings.Contains(out, "node Person") || !strings.Contains(out, "edge WorksAt") {
		t.Errorf("export -o table: %v\n%s", err, out)
	}
	complete := func(args ...string) []string {
		t.Helper()
		out, err := captureStdout(t, func() error { return run("__complete", args...) })
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if !strings.HasPrefix(l, ":") {
				got = append(got, l)
			}
		}
		return got
	}
	if got := complete("get", "--root", root, ""); !slices.Contains(got, "Person") || !slices.Contains(got, "WorksAt") {
		t.Errorf("types: %v", got)
	}
	if got := complete("count", "--root", root, "--branch", ""); !slices.Equal(got, []string{"main", "b1"}) {
		t.Errorf("branches: %v", got)
	}
	if got := complete("commits", "-o", ""); !slices.Equal(got, []string{"json", "table"}) {
		t.Errorf("formats: %v", got)
	}
	if got := complete("find", ""); len(got) != 0 {
		t.Errorf("types without a root: %v", got)
	}
	for _, cmd := range [][]string{{"load"}, {"publish"}, {"dlq", "replay"}} {
		if got := complete(append(cmd, "--mode", "")...); !slices.Equal(got, []string{"append", "merge", "overwrite"}) {
			t.Errorf("%v --mode: %v", cmd, got)
		}
	}
	for _, cmd := range [][]string{{"dlq", "list"}, {"dlq", "replay"}, {"dlq", "delete"}} {
		if got := complete(append(cmd, "--reason", "")...); !slices.Equal(got, errs.DeadLetterReasons()) {
			t.Errorf("%v --reason: %v", cmd, got)
		}
	}
}

// A file of no records (nothing, or blank lines) commits nothing and says so, as the worker
// does with an empty message; a bad mode is still refused.
func TestLoadOfNoRecordsCommitsNothing(t *testing.T) {
	root := initGraph(t)
	commits := func() int {
		out, err := captureStdout(t, func() error { return run("commits", "--root", root, "-o", "json") })
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(out, "\n")
	}
	before := commits()
	for _, body := range []string{"", "\n\n"} {
		f := writeTemp(t, "empty.ndjson", body)
		out, err := captureStdout(t, func() error { return run("load", "--root", root, "--mode", "append", f) })
		if err != nil || !strings.Contains(out, `"outcome": "empty"`) {
			t.Fatalf("load of %q: %v\n%s", body, err, out)
		}
	}
	if after := commits(); after != before {
		t.Fatalf("%d commit lines after empty loads, %d before", after, before)
	}
	f := writeTemp(t, "empty.ndjson", "")
	if err := run("load", "--root", root, "--mode", "apend", f); err == nil || !strings.Contains(err.Error(), "apend") {
		t.Fatalf("bad mode on an empty load: %v", err)
	}
}

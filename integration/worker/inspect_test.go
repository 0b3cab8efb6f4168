package worker

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
)

// `worker get`, `count`, `find` and `commits` through the binary, on a graph `worker run`
// wrote from the stream: each row as the export prints it, through a scan and, once the
// indices are built, through the BTREE (-v says which); counts from metadata; every message's
// commit with its id; not found (11) and a bad where clause (2).
func TestCLIInspectWorkerGraph(t *testing.T) {
	ns := startNATS(t)
	root := initGraph(t)
	w := startWorker(t, root, ns.url, "")
	const n = 12
	publish(t, ns.url, n)
	waitAcked(t, ns.url, n, w)
	w.terminate(t)

	run := func(args ...string) string {
		t.Helper()
		out, errOut, code := runWorker(t, args...)
		if code != 0 {
			t.Fatalf("worker %s: exit %d\n%s", strings.Join(args, " "), code, errOut)
		}
		return out
	}
	exported := exportLines(t, root)
	withAny := func(subs ...string) string {
		var keep []string
		for _, l := range exported {
			for _, s := range subs {
				if strings.Contains(l, s) {
					keep = append(keep, l)
					break
				}
			}
		}
		sort.Strings(keep)
		return strings.Join(keep, "\n")
	}
	sorted := func(out string) string {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		sort.Strings(lines)
		return strings.Join(lines, "\n")
	}

	var counts struct {
		Tables []struct {
			Type string
			Rows int
		}
	}
	if err := json.Unmarshal([]byte(run("count", "--root", root, "-o", "json")), &counts); err != nil {
		t.Fatal(err)
	}
	for _, tc := range counts.Tables {
		want := map[string]int{"Person": n, "Company": n, "WorksAt": n}[tc.Type]
		if tc.Rows != want {
			t.Errorf("count %s: %d, want %d", tc.Type, tc.Rows, want)
		}
	}

	getScan := map[int]string{}
	for i := 0; i < n; i += 5 {
		want := withAny(fmt.Sprintf(`"id":"p%d"`, i), fmt.Sprintf(`"id":"w%d"`, i))
		out := run("get", "Person", fmt.Sprintf("p%d", i), "--root", root)
		if sorted(out) != want {
			t.Fatalf("get p%d:\n%s\nwant\n%s", i, out, want)
		}
		getScan[i] = out
		if f := run("find", "WorksAt", "--root", root, "--where", fmt.Sprintf("to = 'c%d.io'", i)); strings.TrimSpace(f) != withAny(fmt.Sprintf(`"id":"w%d"`, i)) {
			t.Fatalf("find to = c%d.io: %s", i, f)
		}
	}

	// The same answers through the indices the reference keeps, which -v names.
	run("optimize", "--root", root, "--indices")
	for i, want := range getScan {
		out, errOut, code := runWorker(t, "get", "Person", fmt.Sprintf("p%d", i), "--root", root, "-v")
		if code != 0 || out != want || !strings.Contains(errOut, "node:Person: BTREE index id_idx on id") {
			t.Fatalf("get p%d through the index: exit %d\n%s\nwant\n%s\n%s", i, code, out, want, errOut)
		}
		if _, errOut, _ := runWorker(t, "get", "Person", fmt.Sprintf("p%d", i), "--root", root, "-v", "--scan"); !strings.Contains(errOut, "node:Person: filtered scan") {
			t.Fatalf("--scan: %s", errOut)
		}
	}
	if out := run("get", "Company", "c3.io", "--root", root, "-o", "table"); !strings.Contains(out, "node Company") || !strings.Contains(out, "edges in:") {
		t.Fatalf("get -o table:\n%s", out)
	}

	var commits []struct {
		Branch string `json:"branch"`
		MsgID  string `json:"msg_id"`
		Time   string `json:"time"`
	}
	if err := json.Unmarshal([]byte(run("commits", "--root", root, "-o", "json")), &commits); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range commits {
		if c.Branch != "main" || c.Time == "" {
			t.Fatalf("commit %+v", c)
		}
		seen[c.MsgID] = true
	}
	for i := 0; i < n; i++ {
		if !seen[fmt.Sprintf("batch-%d", i)] {
			t.Fatalf("no commit names batch-%d: %+v", i, commits)
		}
	}
	if out := run("commits", "--root", root); !strings.Contains(out, "MSG_ID") || !strings.Contains(out, "batch-0") {
		t.Fatalf("commits table:\n%s", out)
	}

	if _, errOut, code := runWorker(t, "get", "Person", "nobody", "--root", root); code != 11 || !strings.Contains(errOut, `node type 'Person' has no row with id "nobody"`) {
		t.Fatalf("not found: exit %d %s", code, errOut)
	}
	if _, errOut, code := runWorker(t, "find", "Person", "--root", root, "--where", "handle ="); code != 2 || !strings.Contains(errOut, "column 9") {
		t.Fatalf("bad where: exit %d %s", code, errOut)
	}
}

// Package crash is the crash matrix: a real child process (`worker load`, `worker recover`) is
// SIGKILLed by a failpoint at each step of the write and recovery protocols, then the graph is
// opened read-write (full recovery) and checked: every table's Lance HEAD equals its manifest
// pin, the batch is wholly visible or wholly absent, recovery left an audit row where it acted,
// and the same load then succeeds or is recognised by its receipt, exactly once.
package crash

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
	"github.com/omnigraph/omnigraph-worker/internal/proctest"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/recovery"
	"github.com/omnigraph/omnigraph-worker/storage"
)

var workerBin, natsBin, s3Bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "crash-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// The worker, and the servers the zombie matrix runs: nats-server and gofakes3.
	workerBin, natsBin, s3Bin = filepath.Join(dir, "worker"), filepath.Join(dir, "nats-server"), filepath.Join(dir, "gofakes3")
	for bin, pkg := range map[string]string{workerBin: proctest.Worker, natsBin: proctest.NATSServer, s3Bin: proctest.GoFakeS3} {
		build := exec.Command("go", "build", "-o", bin, pkg)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build", pkg+":", err)
			os.Exit(2)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	for _, s := range []string{summary, pipelineSummary, zombieSummary} {
		if s != "" {
			fmt.Println(s)
		}
	}
	os.Exit(code)
}

var summary string

var seed = []string{
	`{"type":"Person","data":{"handle":"seed","name":"Seed","active":true}}`,
	`{"type":"Company","data":{"domain":"seed.co","name":"SeedCo","size":"smb"}}`,
}

// batches[k] touches k+1 tables.
var batches = [][]string{
	{`{"type":"Person","data":{"handle":"a","name":"A","active":true}}`, `{"type":"Person","data":{"handle":"b","name":"B","active":false}}`},
	{`{"type":"Person","data":{"handle":"a","name":"A","active":true}}`, `{"type":"Company","data":{"domain":"x.io","name":"X","size":"startup"}}`},
	{`{"type":"Person","data":{"handle":"a","name":"A","active":true}}`, `{"type":"Company","data":{"domain":"x.io","name":"X","size":"startup"}}`,
		`{"edge":"WorksAt","from":"a","to":"x.io","data":{"id":"w-a"}}`},
}

type crashCase struct {
	name     string
	tables   int
	loadKill string // failpoint spec for the crashing load
	// recoverKill, when set, crashes a `worker recover` run after the crashed load.
	recoverKill string
}

func cases() []crashCase {
	var out []crashCase
	for k := 1; k <= 3; k++ {
		steps := []string{"load.after_prepare=kill", "load.after_sidecar=kill"}
		for j := 0; j < k; j++ {
			steps = append(steps, fmt.Sprintf("load.after_table_commit=%d+1*kill", j))
		}
		steps = append(steps, "load.after_confirm=kill", "publisher.before_commit=kill", "load.after_publish=kill", "load.fold=kill")
		for _, s := range steps {
			out = append(out, crashCase{name: fmt.Sprintf("%dt/%s", k, s), tables: k, loadKill: s})
		}
	}
	for _, rk := range []string{"recovery.before_restore=kill", "recovery.after_restore=kill",
		"recovery.before_rollback_publish=kill", "recovery.after_rollback_publish=kill", "recovery.audit_append=kill"} {
		out = append(out, crashCase{name: "3t/rollback/" + rk, tables: 3, loadKill: "load.after_table_commit=1+1*kill", recoverKill: rk})
	}
	for _, rk := range []string{"recovery.before_forward_publish=kill", "recovery.after_forward_publish=kill", "recovery.sidecar_delete=kill"} {
		out = append(out, crashCase{name: "2t/forward/" + rk, tables: 2, loadKill: "load.after_confirm=kill", recoverKill: rk})
	}
	return out
}

type tally struct {
	mu                         sync.Mutex
	cases, lost, doubled, half int
}

func (tl *tally) add(lost, doubled, half bool) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.cases++
	for _, c := range []struct {
		hit bool
		n   *int
	}{{lost, &tl.lost}, {doubled, &tl.doubled}, {half, &tl.half}} {
		if c.hit {
			*c.n++
		}
	}
}

func TestCrashMatrix(t *testing.T) {
	var tl tally
	for _, c := range cases() {
		t.Run(c.name, func(t *testing.T) {
			tl.add(runCase(t, c))
		})
	}
	summary = fmt.Sprintf("crash-matrix: %d cases, %d lost, %d doubled, %d half-visible", tl.cases, tl.lost, tl.doubled, tl.half)
	if tl.cases < 20 || tl.lost+tl.doubled+tl.half != 0 {
		t.Errorf("%s", summary)
	}
}

func run(t *testing.T, fp string, args ...string) (killed bool, out string) {
	t.Helper()
	cmd := exec.Command(workerBin, args...)
	cmd.Env = os.Environ()
	if fp != "" {
		cmd.Env = append(cmd.Env, failpoint.EnvVar+"="+fp)
	}
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == -1 {
		return true, buf.String()
	}
	if err != nil {
		t.Fatalf("worker %v (failpoint %q): %v\n%s", args, fp, err, buf.String())
	}
	return false, buf.String()
}

func exportLines(t *testing.T, root storage.Store) []string {
	t.Helper()
	g, err := engine.OpenReadOnly(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := g.Export(context.Background(), "", 0, &buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return nil
	}
	sort.Strings(lines)
	return lines
}

// newGraph initialises a graph from the bundled example schema in a fresh directory.
func newGraph(t *testing.T) (string, storage.Store, *engine.Graph) {
	t.Helper()
	root, dir := graphtest.Root(t)
	g, err := engine.Init(context.Background(), root, graphtest.Schema(t, graphtest.Example))
	if err != nil {
		t.Fatal(err)
	}
	return dir, root, g
}

func runCase(t *testing.T, c crashCase) (lost, doubled, half bool) {
	ctx := context.Background()
	dir, root, g := newGraph(t)
	recs, _ := framing.ParseBytes([]byte(strings.Join(seed, "\n")), framing.DefaultLimits())
	if _, err := g.Load(ctx, engine.LoadRequest{Mode: engine.ModeAppend, Records: recs}); err != nil {
		t.Fatal(err)
	}
	before := exportLines(t, root)
	batchFile := filepath.Join(t.TempDir(), "batch.ndjson")
	if err := os.WriteFile(batchFile, []byte(strings.Join(batches[c.tables-1], "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	loadArgs := []string{"load", "--root", dir, "--mode", "append", "--msg-id", "m-1", batchFile}
	if killed, out := run(t, c.loadKill, loadArgs...); !killed {
		t.Fatalf("the load was not killed at %s:\n%s", c.loadKill, out)
	}
	pending, _ := recovery.List(ctx, root)
	g2 := recoverAfterCrash(t, dir, root, c.recoverKill)
	after := exportLines(t, root)
	if len(pending) > 0 {
		audit, _, err := recovery.ReadAudit(ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, a := range audit {
			found = found || a.OperationID == strings.TrimSuffix(pending[0].Name, ".json")
		}
		// An intent that never moved a table is discarded without an audit row.
		if !found && !(strings.Contains(c.loadKill, "after_sidecar") || strings.Contains(c.loadKill, "after_prepare")) {
			t.Errorf("no audit row for %s", pending[0].Name)
		}
	}
	full := fmt.Sprint(exportAfterBatch(t, before, after))
	switch {
	case fmt.Sprint(after) == fmt.Sprint(before):
	case full != "":
	default:
		t.Errorf("half-visible: before %v\nafter %v", before, after)
		half = true
	}
	// The same load again: applied now, or recognised by its receipt; never twice.
	if _, out := run(t, "", loadArgs...); !strings.Contains(out, "graph_commit_id") {
		t.Fatalf("reload: %s", out)
	}
	final := exportLines(t, root)
	want := len(before) + len(batches[c.tables-1])
	if len(final) < want {
		lost = true
		t.Errorf("lost: %d rows, want %d", len(final), want)
	}
	if len(final) > want || batchCommits(t, root) != 1 {
		doubled = true
		t.Errorf("doubled: %d rows (want %d), %d batch commits", len(final), want, batchCommits(t, root))
	}
	assertAligned(t, g2)
	return lost, doubled, half
}

// recoverAfterCrash runs `worker recover` killed at recoverKill (when set), then opens the graph
// read-write (full recovery) and requires every table's HEAD at its pin and no sidecar left.
func recoverAfterCrash(t *testing.T, dir string, root storage.Store, recoverKill string) *engine.Graph {
	t.Helper()
	if recoverKill != "" {
		if killed, out := run(t, recoverKill, "recover", "--root", dir); !killed {
			t.Logf("recover was not killed at %s (step not reached):\n%s", recoverKill, out)
		}
	}
	g, err := engine.Open(context.Background(), root)
	if err != nil {
		t.Fatalf("open after crash: %v", err)
	}
	assertAligned(t, g)
	if l, _ := recovery.List(context.Background(), root); len(l) != 0 {
		t.Fatalf("sidecars left after recovery: %v", l)
	}
	return g
}

// exportAfterBatch reports whether after is before plus exactly the batch's rows (non-empty).
func exportAfterBatch(t *testing.T, before, after []string) []string {
	if len(after) <= len(before) {
		return nil
	}
	seen := map[string]int{}
	for _, l := range after {
		seen[l]++
	}
	for _, l := range before {
		if seen[l] == 0 {
			return nil
		}
		seen[l]--
	}
	var extra []string
	for l, n := range seen {
		for i := 0; i < n; i++ {
			extra = append(extra, l)
		}
	}
	return extra
}

// batchCommits counts commits that are neither genesis, the seed, nor recovery's own.
func batchCommits(t *testing.T, root storage.Store) int {
	g, err := engine.OpenReadOnly(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := g.Commits(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range cs {
		if c.GraphManifestVersion > 2 && (c.ActorID == nil || *c.ActorID != recovery.RecoveryActor) {
			n++
		}
	}
	return n
}

func assertAligned(t *testing.T, g *engine.Graph) {
	t.Helper()
	ctx := context.Background()
	st, err := g.Snapshot(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range st.Tables() {
		ds, err := lance.Open(ctx, g.Root().Sub(e.Path))
		if err != nil {
			t.Fatal(err)
		}
		if ds.Version() != e.Version {
			t.Errorf("%s: Lance HEAD %d, manifest pin %d", e.TableKey, ds.Version(), e.Version)
		}
	}
}

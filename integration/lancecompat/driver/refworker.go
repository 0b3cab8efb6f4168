package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/recovery"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// refWorkerBudget bounds the whole step: whatever hangs (a worker that never becomes ready, a
// batch that never commits) is killed when it runs out, and the step fails.
const refWorkerBudget = 90 * time.Second

// refWorkerGraph is the <graph> token the worker serves: subjects omnigraph.ref.*.
const refWorkerGraph = "ref"

// refWorkerBatch is one batch published to the worker, and what `worker export` of main must
// hold once it is committed: total rows, and how often each marker occurs (a marker is a JSON
// key:value of the export, matched up to its closing , or }).
type refWorkerBatch struct {
	msgID, mode string
	lines       []string
	rows        int
	markers     map[string]int
}

var refWorkerServed = []refWorkerBatch{
	{"ref-append", "append", graphBatches[0].lines, 8,
		map[string]int{`"handle":"alice"`: 1, `"handle":"bob"`: 1, `"id":"w1"`: 1, `"id":"d1"`: 1, `"id":"c1"`: 1}},
	{"ref-merge", "merge", graphBatches[1].lines, 10,
		map[string]int{`"name":"Alice Again"`: 1, `"handle":"carol"`: 1, `"id":"w2"`: 1}},
	// The overwrite keeps every person an edge points at, so the edges stay valid.
	{"ref-overwrite", "overwrite", []string{
		`{"type":"Person","data":{"handle":"alice","name":"Alice","active":true}}`,
		`{"type":"Person","data":{"handle":"bob","name":"Bob","active":true}}`,
		`{"type":"Person","data":{"handle":"carol","name":"Carol","active":true}}`,
		`{"type":"Person","data":{"handle":"erin","name":"Erin","active":true}}`,
	}, 11, map[string]int{`"name":"Alice Again"`: 0, `"name":"Alice"`: 1, `"handle":"erin"`: 1, `"id":"w2"`: 1}},
}

// refWorkerCrashed touches two tables, so a kill after the first table commit leaves the graph
// with one table ahead of its manifest pin: recovery must roll it back (a Lance Restore written
// by Go) and record that in the audit table before the redelivered batch applies.
var refWorkerCrashed = refWorkerBatch{"ref-crashed", "append", []string{
	`{"type":"Person","data":{"handle":"frank","name":"Frank","active":true}}`,
	`{"type":"Company","data":{"domain":"f.io","name":"F","size":"smb"}}`,
}, 13, map[string]int{`"handle":"frank"`: 1, `"domain":"f.io"`: 1}}

var refWorkerLater = refWorkerBatch{"ref-later", "append", []string{
	`{"type":"Person","data":{"handle":"gina","name":"Gina","active":true}}`,
	`{"edge":"WorksAt","from":"gina","to":"acme.io","data":{"id":"w3"}}`,
}, 15, map[string]int{`"handle":"gina"`: 1, `"id":"w3"`: 1, `"handle":"frank"`: 1}}

// refWorkerCompat: the real `worker run` binary, with its embedded NATS JetStream, serves a
// graph the official engine made at 2.2 the way the reference OmniGraph makes it, in every
// load mode; is SIGKILLed by a failpoint after a table commit of a load and before its publish;
// restarted, it recovers the graph (the audit table the official engine created empty gets its
// first row from Go) and commits the interrupted batch exactly once and a later one; stopped
// cleanly, it leaves every table at 2.2 and openable by Lance 12 at every version.
func refWorkerCompat(ctx context.Context, s *suite, dir string) {
	saved := *s
	defer func() { s.engine, s.version, s.prefix = saved.engine, saved.version, saved.prefix }()
	s.prefix = saved.prefix + "worker/"
	ctx, cancel := context.WithTimeout(ctx, refWorkerBudget)
	defer cancel()
	start := time.Now()
	defer func() {
		fmt.Printf("timing refgraph/worker: %v\n", time.Since(start).Round(100*time.Millisecond))
	}()

	base := filepath.Join(dir, "refworker")
	rootDir := filepath.Join(base, "graph")
	rw := &refWorker{rootDir: rootDir, natsDir: filepath.Join(base, "nats"), bin: filepath.Join(base, "bin", "worker")}
	defer rw.killAll()
	err := initGraphAt(ctx, rootDir)
	s.add("go-inits-graph", err)
	s.engine, s.version = "lance10", file.V2_2
	if err != nil || s.runNode(ctx, "lance10-remakes-at-2.2/", "refgraph", rootDir) != nil {
		return
	}
	type step struct {
		name string
		run  func(context.Context) error
	}
	steps := []step{{"builds-worker", rw.build}, {"run-serves-refgraph", rw.serve}}
	for _, b := range refWorkerServed {
		steps = append(steps, step{"commits-" + b.mode, rw.commit(b)})
	}
	steps = append(steps, []step{
		{"stops-cleanly", rw.stopServing},
		{"killed-after-table-commit", rw.crash},
		{"restart-recovers-and-commits-once", rw.restart},
		{"stops-cleanly-after-restart", rw.stop},
		{"optimize-builds-reference-indices", rw.buildIndices},
		{"tables-stay-2.2", rw.checkVersions},
	}...)
	for _, st := range steps {
		err := st.run(ctx)
		if err != nil && rw.live != nil {
			err = fmt.Errorf("%w\nworker output:\n%s", err, tail(rw.live.out.String(), 40))
		}
		s.add(st.name, err)
		if err != nil {
			return
		}
	}
	for _, e := range []string{"lance8", "lance10", "lance12"} {
		s.engine = e
		_ = s.runNode(ctx, e+"-answers-from-go-indices/", "graphidx", rootDir)
	}
	s.engine = "lance12"
	_ = s.runNode(ctx, "lance12-opens-every-version/", "openall", rootDir)
}

func initGraphAt(ctx context.Context, rootDir string) error {
	root, err := storage.Open(ctx, rootDir)
	if err != nil {
		return err
	}
	defer root.Close()
	src, err := os.ReadFile("graph/pg/testdata/example.pg")
	if err != nil {
		return err
	}
	_, err = engine.Init(ctx, root, string(src))
	return err
}

type refWorker struct {
	rootDir, natsDir, bin string
	port                  int
	procs                 []*childProc
	live                  *childProc // the `worker run` serving now, if any
	// commits counts the non-recovery graph commits on main before the crashed batch.
	commits int
	pending string // the recovery sidecar the killed load left
}

func (rw *refWorker) build(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Dir(rw.bin), 0o755); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", rw.bin, "github.com/omnigraph/omnigraph-worker/cmd/worker")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/worker: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	rw.port = l.Addr().(*net.TCPAddr).Port
	return l.Close()
}

func (rw *refWorker) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", rw.port) }

// run starts `worker run` on the root with its embedded JetStream on rw.port (one store for
// every run, so a restarted worker finds the stream, its consumer and the unacknowledged
// batch), with failpoints fp armed, and waits until it consumes.
func (rw *refWorker) run(ctx context.Context, fp string) error {
	args := []string{"run", "--root", rw.rootDir, "--graph", refWorkerGraph, "--nats-url", "", "--nats-dir", rw.natsDir,
		"--nats-port", fmt.Sprint(rw.port), "--http", "", "--lease-ttl", "1s", "--ack-wait", "2s", "--compaction-fanout", "0"}
	env := os.Environ()
	if fp != "" {
		env = append(env, failpoint.EnvVar+"="+fp)
	}
	p, err := startChild(ctx, env, rw.bin, args...)
	if err != nil {
		return err
	}
	rw.procs, rw.live = append(rw.procs, p), p
	return p.waitOutput(ctx, `"msg":"ready"`, 30*time.Second)
}

// publish sends a batch with `worker publish` and, unless the worker is meant to die on it,
// waits until its receipt is visible on main and export holds what it should.
func (rw *refWorker) publish(ctx context.Context, b refWorkerBatch, wait bool) error {
	f := filepath.Join(filepath.Dir(rw.bin), b.msgID+".ndjson")
	if err := os.WriteFile(f, []byte(strings.Join(b.lines, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(pctx, rw.bin, "publish", "--graph", refWorkerGraph, "--nats-url", rw.url(),
		"--mode", b.mode, "--msg-id", b.msgID, f).CombinedOutput()
	if err != nil {
		return fmt.Errorf("worker publish %s: %v\n%s", b.msgID, err, out)
	}
	if !wait {
		return nil
	}
	if err := rw.waitReceipt(ctx, b.msgID); err != nil {
		return err
	}
	return rw.checkExport(ctx, b)
}

// waitReceipt polls main's manifest until the batch's receipt is there.
func (rw *refWorker) waitReceipt(ctx context.Context, msgID string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := rw.hasReceipt(ctx, msgID)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if rw.live != nil && rw.live.exited() {
			return fmt.Errorf("the worker exited before committing %s", msgID)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s was not committed within 30s", msgID)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// hasReceipt says whether main's manifest holds the receipt of msgID.
func (rw *refWorker) hasReceipt(ctx context.Context, msgID string) (bool, error) {
	root, err := storage.Open(ctx, rw.rootDir)
	if err != nil {
		return false, err
	}
	defer root.Close()
	g, err := engine.OpenReadOnly(ctx, root)
	if err != nil {
		return false, err
	}
	st, err := g.Snapshot(ctx, "")
	if err != nil {
		return false, err
	}
	_, ok, err := st.Receipt(ctx, msgID)
	return ok, err
}

// checkExport runs `worker export` of main and compares it with what b promises.
func (rw *refWorker) checkExport(ctx context.Context, b refWorkerBatch) error {
	out, err := exec.CommandContext(ctx, rw.bin, "export", "--root", rw.rootDir).Output()
	if err != nil {
		return fmt.Errorf("worker export: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != b.rows {
		return fmt.Errorf("after %s main exports %d rows, want %d:\n%s", b.msgID, len(lines), b.rows, out)
	}
	for m, want := range b.markers {
		n := 0
		for _, l := range lines {
			if strings.Contains(l, m+",") || strings.Contains(l, m+"}") {
				n++
			}
		}
		if n != want {
			return fmt.Errorf("after %s, %s occurs %d times in the export, want %d:\n%s", b.msgID, m, n, want, out)
		}
	}
	return nil
}

func (rw *refWorker) serve(ctx context.Context) error { return rw.run(ctx, "") }

func (rw *refWorker) commit(b refWorkerBatch) func(context.Context) error {
	return func(ctx context.Context) error { return rw.publish(ctx, b, true) }
}

// stopServing stops the first worker cleanly and counts the load commits it made.
func (rw *refWorker) stopServing(ctx context.Context) error {
	if err := rw.stop(ctx); err != nil {
		return err
	}
	var err error
	if rw.commits, err = rw.loadCommits(ctx); err == nil && rw.commits != len(refWorkerServed) {
		err = fmt.Errorf("%d load commits on main, want %d", rw.commits, len(refWorkerServed))
	}
	return err
}

// crash: a worker armed to SIGKILL itself after the first table commit of its next load takes
// the two-table batch and dies there, leaving its recovery sidecar and an empty audit table.
func (rw *refWorker) crash(ctx context.Context) error {
	if err := rw.run(ctx, "load.after_table_commit=kill"); err != nil {
		return err
	}
	if err := rw.publish(ctx, refWorkerCrashed, false); err != nil {
		return err
	}
	if err := rw.live.waitExit(ctx, 30*time.Second); err != nil {
		return err
	}
	if !rw.live.killed() {
		return fmt.Errorf("the worker exited (%v) instead of being SIGKILLed by its failpoint", rw.live.err)
	}
	rw.live = nil
	root, err := storage.Open(ctx, rw.rootDir)
	if err != nil {
		return err
	}
	defer root.Close()
	pending, err := recovery.List(ctx, root)
	if err != nil {
		return err
	}
	if len(pending) != 1 {
		return fmt.Errorf("%d recovery sidecars after the kill, want the killed load's one", len(pending))
	}
	rw.pending = strings.TrimSuffix(pending[0].Name, ".json")
	audit, ds, err := recovery.ReadAudit(ctx, root)
	if err != nil {
		return err
	}
	if ds == nil || ds.Version() != 1 || len(audit) != 0 {
		return fmt.Errorf("the audit table before recovery: %d rows, dataset %v; want the official engine's empty version 1", len(audit), ds != nil)
	}
	if ok, err := rw.hasReceipt(ctx, refWorkerCrashed.msgID); err != nil {
		return err
	} else if ok {
		return errors.New("the killed load's batch is already visible")
	}
	return nil
}

// restart: the worker without failpoints recovers before consuming, then JetStream redelivers
// the unacknowledged batch, which commits exactly once, and a later batch commits after it.
func (rw *refWorker) restart(ctx context.Context) error {
	if err := rw.run(ctx, ""); err != nil {
		return err
	}
	if err := rw.waitReceipt(ctx, refWorkerCrashed.msgID); err != nil {
		return err
	}
	if err := rw.checkExport(ctx, refWorkerCrashed); err != nil {
		return err
	}
	if err := rw.publish(ctx, refWorkerLater, true); err != nil {
		return err
	}
	n, err := rw.loadCommits(ctx)
	if err != nil {
		return err
	}
	if n != rw.commits+2 {
		return fmt.Errorf("%d load commits on main after the crashed and the later batch, want %d (each once)", n, rw.commits+2)
	}
	root, err := storage.Open(ctx, rw.rootDir)
	if err != nil {
		return err
	}
	defer root.Close()
	audit, ds, err := recovery.ReadAudit(ctx, root)
	if err != nil {
		return err
	}
	if len(audit) != 1 || audit[0].OperationID != rw.pending || audit[0].Kind != recovery.RolledBack || ds.Version() != 2 {
		return fmt.Errorf("the audit table holds %v at version %d, want one %s row for %s at version 2 (the first Go appended)",
			audit, ds.Version(), recovery.RolledBack, rw.pending)
	}
	if l, err := recovery.List(ctx, root); err != nil || len(l) != 0 {
		return fmt.Errorf("recovery sidecars left after the restart: %v %v", l, err)
	}
	return nil
}

// loadCommits counts main's graph commits other than genesis and recovery's own.
func (rw *refWorker) loadCommits(ctx context.Context) (int, error) {
	root, err := storage.Open(ctx, rw.rootDir)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	g, err := engine.OpenReadOnly(ctx, root)
	if err != nil {
		return 0, err
	}
	cs, err := g.Commits(ctx, "")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range cs {
		if c.GraphManifestVersion > 1 && (c.ActorID == nil || *c.ActorID != recovery.RecoveryActor) {
			n++
		}
	}
	return n, nil
}

func (rw *refWorker) stop(ctx context.Context) error {
	if rw.live == nil {
		return errors.New("no worker is running")
	}
	if err := rw.live.terminate(ctx); err != nil {
		return err
	}
	rw.live = nil
	return nil
}

// checkVersions: every table (and __manifest and the audit table) declares 2.2 at its newest
// version, and every data file it lists is a 2.2 file: the worker never wrote another version.
func (rw *refWorker) checkVersions(ctx context.Context) error {
	root, err := storage.Open(ctx, rw.rootDir)
	if err != nil {
		return err
	}
	defer root.Close()
	dirs := []string{"__manifest", recovery.AuditDir}
	for _, kind := range []string{"nodes", "edges"} {
		es, err := os.ReadDir(filepath.Join(rw.rootDir, kind))
		if err != nil {
			return err
		}
		for _, e := range es {
			dirs = append(dirs, kind+"/"+e.Name())
		}
	}
	if len(dirs) != 10 {
		return fmt.Errorf("%d datasets under the root, want 10 (__manifest, audit, 4 node and 4 edge tables): %v", len(dirs), dirs)
	}
	for _, d := range dirs {
		ds, err := lance.Open(ctx, root.Sub(d))
		if err != nil {
			return fmt.Errorf("%s: %w", d, err)
		}
		m := ds.Manifest()
		if m.DataVersion != "2.2" {
			return fmt.Errorf("%s declares data version %q at version %d, want 2.2", d, m.DataVersion, ds.Version())
		}
		for _, fr := range m.Fragments {
			for _, f := range fr.Files {
				if f.FileMajor != 2 || f.FileMinor != 2 {
					return fmt.Errorf("%s: data file %s is %d.%d, want 2.2", d, f.Path, f.FileMajor, f.FileMinor)
				}
			}
		}
	}
	return nil
}

func (rw *refWorker) killAll() {
	for _, p := range rw.procs {
		p.kill()
	}
}

// childProc is a child process whose combined output is kept and whose exit is awaited once.
type childProc struct {
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
	err  error // set when done is closed
}

func startChild(ctx context.Context, env []string, bin string, args ...string) (*childProc, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	p := &childProc{cmd: cmd, out: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *childProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// killed reports whether the process ended by SIGKILL.
func (p *childProc) killed() bool {
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

func (p *childProc) waitOutput(ctx context.Context, want string, within time.Duration) error {
	deadline := time.After(within)
	for !strings.Contains(p.out.String(), want) {
		select {
		case <-p.done:
			return fmt.Errorf("the worker exited (%v) before printing %s", p.err, want)
		case <-deadline:
			return fmt.Errorf("the worker did not print %s within %v", want, within)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

func (p *childProc) waitExit(ctx context.Context, within time.Duration) error {
	select {
	case <-p.done:
		return nil
	case <-time.After(within):
		return fmt.Errorf("the worker did not exit within %v", within)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// terminate stops the worker the way an operator does (SIGTERM: it drains and releases its
// lease) and requires a clean exit.
func (p *childProc) terminate(ctx context.Context) error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	if err := p.waitExit(ctx, 20*time.Second); err != nil {
		return err
	}
	if p.err != nil {
		return fmt.Errorf("the worker did not exit cleanly on SIGTERM: %v", p.err)
	}
	return nil
}

func (p *childProc) kill() {
	if !p.exited() {
		_ = p.cmd.Process.Kill()
	}
	<-p.done
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// buildIndices runs `worker optimize --root --indices` on the stopped graph: every table with
// rows gets the BTREE indices the reference keeps, in one graph commit. It writes graphidx.json,
// what compat.mjs graphidx then checks: the engine lists them and answers from them.
// refDocs are documents for the full-text and vector indices the reference keeps on Doc
// (title: String @index, embedding: Vector(8)? @index): distinct simple words, so that the
// rows holding a word are known without Lance's analyzer, and vectors with one null.
func refDocs() string {
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot"}
	var b strings.Builder
	for i := 0; i < 24; i++ {
		title := words[i%len(words)] + " " + words[(i/2)%len(words)] + " report"
		emb := "null"
		if i != 5 {
			v := make([]string, 8)
			for j := range v {
				v[j] = fmt.Sprint(float32((i*7+j*3)%11)/4 + float32(i*j)/64)
			}
			emb = "[" + strings.Join(v, ",") + "]"
		}
		fmt.Fprintf(&b, `{"type":"Doc","data":{"url":"https://docs/%d","title":%q,"body":"b","embedding":%s}}`+"\n", i, title, emb)
	}
	b.WriteString(`{"type":"Company","data":{"domain":"globex.io","name":"Globex","size":"smb"}}` + "\n")
	b.WriteString(`{"type":"Project","data":{"org":"globex","slug":"rocket","name":"Rocket","status":"active","started_at":"2026-01-01T00:00:00Z"}}` + "\n")
	return b.String()
}

func (rw *refWorker) buildIndices(ctx context.Context) error {
	docs := filepath.Join(filepath.Dir(rw.bin), "docs.ndjson")
	if err := os.WriteFile(docs, []byte(refDocs()), 0o644); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, rw.bin, "load", "--root", rw.rootDir, "--mode", "append", docs).CombinedOutput(); err != nil {
		return fmt.Errorf("worker load docs: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(ctx, rw.bin, "optimize", "--root", rw.rootDir, "--indices").CombinedOutput()
	if err != nil {
		return fmt.Errorf("worker optimize --indices: %v\n%s", err, out)
	}
	root, err := storage.Open(ctx, rw.rootDir)
	if err != nil {
		return err
	}
	defer root.Close()
	g, err := engine.OpenReadOnly(ctx, root)
	if err != nil {
		return err
	}
	st, err := g.Snapshot(ctx, "")
	if err != nil {
		return err
	}
	type table struct {
		Path    string            `json:"path"`
		Indices []string          `json:"indices"`
		Kinds   map[string]string `json:"kinds"` // index name -> btree, fts or vector
	}
	// The reference's set (engine/indices.go): BTREEs on id (and src, dst on edges), INVERTED
	// on a free-text single-column @index or @key String, IVF_FLAT on an @index Vector.
	kinds := map[string]string{"id_idx": "btree", "src_idx": "btree", "dst_idx": "btree", "name_idx": "fts", "title_idx": "fts",
		"handle_idx": "fts", "domain_idx": "fts", "url_idx": "fts", "embedding_idx": "vector"}
	var tables []table
	for _, e := range st.Tables() {
		if e.RowCount == 0 {
			continue
		}
		want := []string{"id_idx"}
		// A single-column @key is an index too (the reference's catalog adds it), so a String
		// key gets a full-text index as well.
		switch e.TableKey {
		case "node:Person":
			want = append(want, "handle_idx", "name_idx")
		case "node:Company":
			want = append(want, "domain_idx", "name_idx")
		case "node:Project":
			want = append(want, "name_idx")
		case "node:Doc":
			want = append(want, "url_idx", "title_idx", "embedding_idx")
		}
		if strings.HasPrefix(e.TableKey, "edge:") {
			want = append(want, "src_idx", "dst_idx")
		}
		ds, err := lance.Open(ctx, root.Sub(e.Path), lance.AtVersion(e.Version))
		if err != nil {
			return err
		}
		var got []string
		for _, x := range ds.Indices() {
			got = append(got, x.Name)
		}
		sort.Strings(got)
		sort.Strings(want)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("%s: the published version lists indices %v, want %v\n%s", e.TableKey, got, want, out)
		}
		k := map[string]string{}
		for _, n := range want {
			k[n] = kinds[n]
		}
		tables = append(tables, table{Path: e.Path, Indices: want, Kinds: k})
	}
	if len(tables) == 0 {
		return fmt.Errorf("no table with rows to index")
	}
	return writeJSON(filepath.Join(rw.rootDir, "graphidx.json"), map[string]any{"tables": tables})
}

package crash

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
	"github.com/omnigraph/omnigraph-worker/internal/proctest"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/recovery"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// The zombie matrix: a leader `worker run` stops itself (failpoint action stop, SIGSTOP) at
// one step of a load, a merge, a compaction, a cleanup or its own recovery; a standby on the
// same graph takes the lease and recovers; then the old leader gets SIGCONT, before the new
// one has written anything. Whatever the old leader does from there must change nothing: no table or __manifest version and no sidecar
// appears while only it acts (zombie writes), every batch is applied exactly once (lost,
// doubled), and the new leader applies the next batch without an operator (held).

var zombieSummary string

type zombieCase struct {
	kind  string // load, merge, optimize, cleanup, recovery
	point string // the failpoint spec the leader stops at
	// crash, for kind recovery: the failpoint a `worker load --root` is killed at first, so
	// that the leader has an intent to recover when it starts.
	crash string
	s3    bool
}

func (c zombieCase) name() string {
	store := "local"
	if c.s3 {
		store = "s3"
	}
	n := store + "/" + c.kind + "/" + c.point
	if c.crash != "" {
		n += "/after-" + c.crash
	}
	return n
}

func zombieCases() []zombieCase {
	var out []zombieCase
	for _, p := range []string{"load.after_prepare=stop", "load.after_sidecar=stop", "recovery.sidecar_write=stop",
		"load.after_table_commit=stop", "load.after_table_commit=2+1*stop", "recovery.sidecar_confirm=stop",
		"load.after_confirm=stop", "load.before_publish=stop", "publisher.attempt=stop", "publisher.before_commit=stop",
		"load.after_publish=stop"} {
		out = append(out, zombieCase{kind: "load", point: p})
	}
	for _, p := range []string{"merge.after_arm=stop", "merge.after_chain_commit=stop", "merge.after_confirm=stop",
		"merge.before_publish=stop", "merge.after_publish=stop"} {
		out = append(out, zombieCase{kind: "merge", point: p})
	}
	for _, p := range []string{"optimize.after_prepare=stop", "optimize.after_sidecar=stop", "optimize.after_table_commit=stop",
		"optimize.before_publish=stop", "optimize.after_publish=stop"} {
		out = append(out, zombieCase{kind: "optimize", point: p})
	}
	// A cleanup frozen inside one dataset's removals (its first, its second): on resuming it
	// may finish removing that dataset's versions below the horizon, which nothing reads (the
	// fence stops it before the next dataset); the graph must read as before.
	for _, p := range []string{"lance.cleanup.after_files=stop", "lance.cleanup.after_files=1+1*stop"} {
		out = append(out, zombieCase{kind: "cleanup", point: p})
	}
	// An armed intent with no effect (every table is taken), one with some (restores, and
	// takes of the tables it had not reached, as the table commits run concurrently), and a
	// confirmed one (rolled forward).
	armed, rollback, forward := "load.after_sidecar=kill", "load.after_table_commit=1+1*kill", "load.after_confirm=kill"
	for _, c := range []struct{ point, crash string }{{"recovery.before_take=stop", armed}, {"recovery.before_restore=stop", rollback},
		{"recovery.after_restore=stop", rollback}, {"recovery.before_rollback_publish=stop", rollback},
		{"recovery.before_forward_publish=stop", forward}, {"recovery.sidecar_delete=stop", forward},
		{"recovery.after_rollback_publish=stop", rollback}, {"recovery.after_forward_publish=stop", forward},
		{"recovery.audit_append=stop", rollback}} {
		out = append(out, zombieCase{kind: "recovery", point: c.point, crash: c.crash})
	}
	// The same protocol on an object store: one step of each kind where the zombie holds an
	// armed intent with effects still to make.
	for _, c := range []zombieCase{{kind: "load", point: "load.after_sidecar=stop"}, {kind: "load", point: "load.after_table_commit=stop"},
		{kind: "load", point: "publisher.attempt=stop"},
		{kind: "merge", point: "merge.after_arm=stop"}, {kind: "optimize", point: "optimize.after_sidecar=stop"},
		{kind: "recovery", point: "recovery.before_restore=stop", crash: rollback}} {
		c.s3 = true
		out = append(out, c)
	}
	return out
}

type zombieTally struct {
	mu                                 sync.Mutex
	cases, zombie, lost, doubled, held int
}

func TestZombieMatrix(t *testing.T) {
	if natsBin == "" {
		t.Fatal("nats-server was not built")
	}
	ns := startNATSProcess(t)
	s3 := startFakeS3(t)
	var tl zombieTally
	for i, c := range zombieCases() {
		graph := fmt.Sprintf("z%d", i)
		t.Run(c.name(), func(t *testing.T) {
			t.Parallel()
			z, lost, doubled, held := runZombieCase(t, c, graph, ns, s3)
			tl.mu.Lock()
			defer tl.mu.Unlock()
			tl.cases++
			tl.zombie += z
			tl.lost += lost
			tl.doubled += doubled
			tl.held += held
		})
	}
	t.Cleanup(func() {
		zombieSummary = fmt.Sprintf("crash-matrix-zombie: %d cases, %d zombie writes, %d lost, %d doubled, %d held", tl.cases, tl.zombie, tl.lost, tl.doubled, tl.held)
		if tl.cases == 0 || tl.zombie+tl.lost+tl.doubled+tl.held != 0 {
			t.Errorf("%s", zombieSummary)
		}
	})
}

// zombieEnv is one case's graph: its root, its name, the server.
type zombieEnv struct {
	t     *testing.T
	root  string // --root
	graph string
	url   string
	js    jetstream.JetStream
	seq   uint64 // the ingest stream's last sequence this case published
	// batches are the BatchBody numbers published to main, each to be there exactly once.
	batches []int
	staged  bool // a branch batch was merged into main
}

func runZombieCase(t *testing.T, c zombieCase, graph string, ns string, s3 string) (zombie, lost, doubled, held int) {
	ctx := context.Background()
	e := &zombieEnv{t: t, graph: graph, url: ns}
	if c.s3 {
		e.root = "s3://omnigraph/" + graph + "?endpoint=" + s3 + "&use_path_style=true&disable_https=true&region=us-east-1"
	} else {
		e.root = filepath.Join(t.TempDir(), "graph")
	}
	if out, err := exec.Command(workerBin, "init", "--root", e.root, "--schema", graphtest.SchemaPath(graphtest.Example)).CombinedOutput(); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	nc, err := nats.Connect(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if e.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	if c.kind == "recovery" {
		e.crashedLoad(c.crash)
	}
	leader := e.startRun(c.point)
	if c.kind != "recovery" {
		e.waitLeader(leader)
		e.prepare(c.kind, leader)
		e.trigger(c.kind)
	}
	leader.waitStopped(t)
	// The standby takes the lease once it expires and recovers. The leader resumes before the
	// standby writes anything (the message the leader held comes back only after its ack
	// wait): the window where a stale writer's late commit would land on tables nobody has
	// written since.
	standby := e.startRun("")
	e.waitFor(standby, "publish_to", 60*time.Second, leader)
	// The new leader is frozen while the zombie runs, so that only the zombie acts (for less
	// than the lease's TTL, so the new leader keeps it): anything new in storage is its.
	if err := standby.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	before := e.versionObjects(ctx)
	if err := leader.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	leader.waitResumedAndFenced(t)
	after := e.versionObjects(ctx)
	if err := standby.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for k := range after {
		if !before[k] {
			t.Errorf("zombie write: %s", k)
			zombie++
		}
	}
	if zombie > 0 {
		t.Logf("leader:\n%s\nstandby:\n%s", leader.out, standby.out)
	}
	// The new leader applies what the leader held, and more, without an operator.
	e.publishBatch()
	if !e.waitApplied(standby, 60*time.Second) {
		t.Logf("leader:\n%s\nstandby:\n%s", leader.out, standby.out)
		t.Errorf("the new leader is held after the zombie resumed")
		held++
	}
	leader.stop()
	standby.stop()
	z, l, d := e.check(ctx)
	return zombie + z, lost + l, doubled + d, held
}

// crashedLoad leaves an intent behind: a `worker load --root` killed at fp.
func (e *zombieEnv) crashedLoad(fp string) {
	f := filepath.Join(e.t.TempDir(), "batch.ndjson")
	if err := os.WriteFile(f, []byte(graphtest.BatchBody(1000)), 0o644); err != nil {
		e.t.Fatal(err)
	}
	cmd := exec.Command(workerBin, "load", "--root", e.root, "--mode", "append", "--msg-id", "direct-1000", f)
	cmd.Env = append(os.Environ(), failpoint.EnvVar+"="+fp)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != -1 {
		e.t.Fatalf("the direct load was not killed at %s: %v\n%s", fp, err, out)
	}
}

type runProc struct {
	cmd  *exec.Cmd
	out  *proctest.Output
	done chan struct{}
}

func (e *zombieEnv) startRun(fp string) *runProc {
	cmd := exec.Command(workerBin, "run", "--root", e.root, "--graph", e.graph, "--nats-url", e.url, "--http", "",
		"--lease-ttl", "3s", "--ack-wait", "5s", "--compaction-fanout", "0")
	cmd.Env = os.Environ()
	if fp != "" {
		cmd.Env = append(cmd.Env, failpoint.EnvVar+"="+fp)
	}
	p := &runProc{cmd: cmd, out: &proctest.Output{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	e.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

func (p *runProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *runProc) waitStopped(t *testing.T) {
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if stoppedState(p.cmd.Process.Pid) {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("the leader exited before its stop:\n%s", p.out)
		default:
		}
	}
	t.Fatalf("the leader never stopped at its failpoint:\n%s", p.out)
}

// waitResumedAndFenced gives the resumed zombie time to finish the step it was frozen in and
// meet its fence: until it logs the lost lease, at most a second and a half.
func (p *runProc) waitResumedAndFenced(t *testing.T) {
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		out := p.out.String()
		if strings.Contains(out, "lease lost") || strings.Contains(out, "fenced before") {
			time.Sleep(300 * time.Millisecond)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func stoppedState(pid int) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(raw, ')')
	return i > 0 && i+2 < len(raw) && (raw[i+2] == 'T' || raw[i+2] == 't')
}

func (e *zombieEnv) waitLeader(p *runProc) { e.waitFor(p, "lease acquired", 30*time.Second) }

// waitFor waits until p's log says what; others' logs are shown when it does not.
func (e *zombieEnv) waitFor(p *runProc, what string, within time.Duration, others ...*runProc) {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if strings.Contains(p.out.String(), what) {
			return
		}
	}
	for _, o := range others {
		e.t.Logf("the other worker:\n%s", o.out)
	}
	e.t.Fatalf("the worker never logged %q:\n%s", what, p.out)
}

// publish puts one message on the graph's stream and records its sequence.
func (e *zombieEnv) publish(subject, body string, hdr map[string]string) {
	m := nats.NewMsg(subject)
	m.Data = []byte(body)
	for k, v := range hdr {
		m.Header.Set(k, v)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ack, err := e.js.PublishMsg(context.Background(), m)
		if err == nil {
			e.seq = ack.Sequence
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("publish on %s: %v", subject, err)
		}
	}
}

func (e *zombieEnv) publishBatch() {
	i := len(e.batches)
	e.batches = append(e.batches, i)
	e.publish("omnigraph."+e.graph+".ingest", graphtest.BatchBody(i), map[string]string{"Omnigraph-Mode": "append", "Nats-Msg-Id": fmt.Sprintf("batch-%d", i)})
}

// prepare gives the leader what the write kind needs, and waits until it applied it.
func (e *zombieEnv) prepare(kind string, leader *runProc) {
	switch kind {
	case "merge":
		// A branch with one batch, and main moved since, so the merge commits chains.
		e.publish("omnigraph."+e.graph+".ingest", stagedBody, map[string]string{"Omnigraph-Mode": "append", "Omnigraph-Branch": "stage",
			"Omnigraph-From": "main", "Nats-Msg-Id": "staged"})
		e.publishBatch()
	case "optimize", "cleanup":
		for range 3 {
			e.publishBatch()
		}
	default:
		return
	}
	if !e.waitApplied(leader, 60*time.Second) {
		e.t.Fatalf("the leader did not apply the preparation:\n%s", leader.out)
	}
}

const stagedBody = `{"type":"Person","data":{"handle":"staged","name":"S","active":true}}
{"type":"Company","data":{"domain":"staged.io","name":"S","size":"smb"}}`

// trigger sends the write the leader is to stop in.
func (e *zombieEnv) trigger(kind string) {
	switch kind {
	case "load":
		e.publishBatch()
	case "merge":
		e.staged = true
		e.publish("omnigraph."+e.graph+".merge", `{"source":"stage","target":"main"}`, map[string]string{"Nats-Msg-Id": "merge-stage"})
	case "optimize":
		e.publish("omnigraph."+e.graph+".maintenance", `{"op":"optimize","all":true}`, map[string]string{"Nats-Msg-Id": "optimize-1"})
	case "cleanup":
		e.publish("omnigraph."+e.graph+".maintenance", `{"op":"cleanup","keep":1}`, map[string]string{"Nats-Msg-Id": "cleanup-1"})
	}
}

// waitApplied waits until the worker's consumer has acknowledged everything published.
func (e *zombieEnv) waitApplied(p *runProc, within time.Duration) bool {
	ctx := context.Background()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		c, err := e.js.Consumer(ctx, "OMNIGRAPH_"+strings.ToUpper(e.graph), "omnigraph-worker")
		if err != nil {
			continue
		}
		if info, err := c.Info(ctx); err == nil && info.AckFloor.Stream >= e.seq {
			return true
		}
		select {
		case <-p.done:
			e.t.Logf("the worker exited:\n%s", p.out)
			return false
		default:
		}
	}
	return false
}

// versionObjects are the objects a zombie must not make: table and __manifest versions, and
// sidecars.
func (e *zombieEnv) versionObjects(ctx context.Context) map[string]bool {
	st, err := storage.Open(ctx, e.root)
	if err != nil {
		e.t.Fatal(err)
	}
	defer st.Close()
	objs, err := st.List(ctx, "")
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]bool{}
	for _, o := range objs {
		if strings.HasSuffix(o.Key, ".manifest") && strings.Contains(o.Key, "_versions/") || strings.HasPrefix(o.Key, recovery.Dir+"/") {
			out[o.Key] = true
		}
	}
	return out
}

// check opens the graph read-only: no sidecar, every table at its pin, every batch once.
func (e *zombieEnv) check(ctx context.Context) (zombie, lost, doubled int) {
	t := e.t
	st, err := storage.Open(ctx, e.root)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if l, err := recovery.List(ctx, st); err != nil || len(l) != 0 {
		t.Errorf("sidecars left: %v %v", l, err)
		zombie += len(l)
	}
	g, err := engine.OpenReadOnly(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := g.Snapshot(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range snap.Tables() {
		ds, err := lance.Open(ctx, st.Sub(en.Path))
		if err != nil {
			t.Fatal(err)
		}
		if ds.Version() != en.Version {
			t.Errorf("%s: Lance HEAD %d, manifest pin %d (drift)", en.TableKey, ds.Version(), en.Version)
			zombie++
		}
	}
	var buf bytes.Buffer
	if err := g.Export(ctx, "", 0, &buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	count := func(key string) int { return strings.Count(out, key+",") + strings.Count(out, key+"}") }
	for _, i := range e.batches {
		for _, k := range []string{`"handle":"p%d"`, `"domain":"c%d.io"`, `"id":"w%d"`} {
			switch n := count(fmt.Sprintf(k, i)); {
			case n == 0:
				t.Errorf("batch %d lost (%s)", i, fmt.Sprintf(k, i))
				lost++
			case n > 1:
				t.Errorf("batch %d doubled (%s)", i, fmt.Sprintf(k, i))
				doubled++
			}
		}
	}
	if e.staged {
		switch n := count(`"handle":"staged"`); {
		case n == 0:
			t.Error("the merge is lost")
			lost++
		case n > 1:
			t.Error("the merge is doubled")
			doubled++
		}
	}
	if n := count(`"handle":"p1000"`); n > 1 {
		t.Error("the crashed direct load is doubled")
		doubled++
	}
	return zombie, lost, doubled
}

// startNATSProcess runs a nats-server process with JetStream for the whole matrix.
func startNATSProcess(t *testing.T) string {
	dir := t.TempDir()
	port := proctest.FreePort(t)
	conf := filepath.Join(dir, "nats.conf")
	body := fmt.Sprintf("listen: 127.0.0.1:%d\njetstream {\n  store_dir: %q\n}\n", port, filepath.Join(dir, "js"))
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(natsBin, "-c", conf)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if nc, err := nats.Connect(url); err == nil {
			nc.Close()
			return url
		}
	}
	t.Fatal("nats-server did not start")
	return ""
}

// startFakeS3 runs gofakes3 (memory backend) with the bucket "omnigraph"; it returns the
// endpoint. Not the filesystem backend: it reads a PUT's body under its one global lock, so a
// zombie frozen half-way through an upload would block every other client, the new leader
// included, until it resumed (a real object store serves other requests meanwhile).
func startFakeS3(t *testing.T) string {
	port := proctest.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(s3Bin, "-backend", "mem", "-host", addr, "-initialbucket", "omnigraph", "-quiet")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("gofakes3 did not start")
		}
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "omnigraph")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "omnigraph-secret")
	return "http://" + addr
}

package worker

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
)

// runWorker runs the binary with args and returns its stdout, stderr and exit status.
func runWorker(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return runWorkerIn(t, "", nil, args...)
}

// runWorkerIn is runWorker in directory dir ("" the test's), with env added to this
// process's environment.
func runWorkerIn(t *testing.T, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin.worker, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return stdout.String(), stderr.String(), 0
	case errors.As(err, &ee):
		return stdout.String(), stderr.String(), ee.ExitCode()
	}
	t.Fatalf("worker %s: %v", strings.Join(args, " "), err)
	return "", "", 0
}

// The command line a new user meets: help everywhere exits 0, --version, defaults in the
// help, shell completion, flags after arguments, usage errors exit 2.
func TestCLIHelpVersionCompletion(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"load", "-h"}, {"branch", "-h"}, {"branch", "create", "--help"}, {"dlq", "show", "-h"}, {"run", "-h"}} {
		out, errOut, code := runWorker(t, args...)
		if code != 0 || !strings.Contains(out, "Usage:") || strings.Contains(errOut, "error") {
			t.Errorf("worker %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
	}
	// --version and `version` print the binary's build: module version, commit, build time, Go.
	out, _, code := runWorker(t, "--version")
	if code != 0 || !regexp.MustCompile(`^omnigraph-worker \S+\ncommit: +\S+.*\nbuild time: +\S+\ngo: +go1\.\S+\n$`).MatchString(out) {
		t.Errorf("--version: exit %d %q", code, out)
	}
	if v, _, code := runWorker(t, "version"); code != 0 || v != out {
		t.Errorf("version: exit %d %q, --version said %q", code, v, out)
	}
	if out, _, _ := runWorker(t, "load", "-h"); !strings.Contains(out, `(default "merge")`) || !strings.Contains(out, "(env OMNIGRAPH_LOCAL_FSYNC)") {
		t.Errorf("load -h shows no defaults or variables:\n%s", out)
	}
	if out, _, code := runWorker(t, "completion", "bash"); code != 0 || !strings.Contains(out, "__start_worker") {
		t.Errorf("completion bash: exit %d", code)
	}
	for _, args := range [][]string{nil, {"bogus"}, {"load", "--nope", "x"}, {"branch"}} {
		if _, errOut, code := runWorker(t, args...); code != 2 || !strings.Contains(errOut, "error:") {
			t.Errorf("worker %s: exit %d, want 2\n%s", strings.Join(args, " "), code, errOut)
		}
	}
}

// Flags after the positional argument count; a key conflict names the id and exits with the
// catalogue's code.
func TestCLIInterspersedFlagsAndConflictID(t *testing.T) {
	root := initGraph(t)
	if out, errOut, code := runWorker(t, "branch", "create", "--root", root, "x1", "--from", "main"); code != 0 || out != "created branch x1\n" {
		t.Fatalf("branch create with a flag after NAME: exit %d\n%s%s", code, out, errOut)
	}
	batch := filepath.Join(t.TempDir(), "b.ndjson")
	if err := os.WriteFile(batch, []byte(graphtest.BatchBody(0)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runWorker(t, "load", batch, "--root", root, "--mode", "append"); code != 0 {
		t.Fatalf("load: exit %d\n%s", code, errOut)
	}
	_, errOut, code := runWorker(t, "load", batch, "--root", root, "--mode", "append")
	if code != 4 || !strings.Contains(errOut, `already has this id (id "w0")`) {
		t.Fatalf("second append: exit %d, want 4 naming w0\n%s", code, errOut)
	}
}

// `publish` refuses locally, with the catalogue's exit code, what the worker would
// dead-letter without reading the graph: nothing reaches the stream; --no-validate publishes
// it as it is.
func TestCLIPublishValidates(t *testing.T) {
	ns := startNATS(t)
	publish(t, ns.url, 0) // the stream, empty
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("good.ndjson", graphtest.BatchBody(0))
	notJSON := file("bad.ndjson", `{"type":"Person","data":{`)
	huge := file("huge.ndjson", strings.Repeat(" ", 33<<20))
	pub := []string{"publish", "--graph", "demo", "--nats-url", ns.url}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{notJSON}, 3, "line 1"},
		{[]string{good, "--mode", "upsert"}, 3, `unknown load mode "upsert"`},
		{[]string{good, "--branch", "a..b"}, 3, "--branch"},
		{[]string{huge}, 5, "resource limit exceeded"},
		{[]string{huge, "--no-validate"}, 5, "nats_message_body_bytes"},
	} {
		_, errOut, code := runWorker(t, append(append([]string{}, pub...), c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("publish %v: exit %d, want %d with %q\n%s", c.args, code, c.code, c.want, errOut)
		}
	}
	// With a root (here only from the environment), the batch is checked against its schema
	// too; the command's own flags come from OMNIGRAPH_PUBLISH_<FLAG> as from --<flag>.
	root := initGraph(t)
	alien := file("alien.ndjson", `{"type":"Alien","data":{"handle":"x"}}`+"\n")
	for _, c := range []struct {
		env  []string
		args []string
		code int
		want string
	}{
		{[]string{"OMNIGRAPH_ROOT=" + root}, []string{alien}, 3, "Alien"},
		{[]string{"OMNIGRAPH_ROOT=" + filepath.Join(dir, "nowhere")}, []string{good}, 2, "its schema could not be read"},
		{[]string{"OMNIGRAPH_PUBLISH_MODE=upsert"}, []string{good}, 3, `unknown load mode "upsert"`},
		{[]string{"OMNIGRAPH_PUBLISH_TIMEOUT=soon"}, []string{good}, 2, "publish.timeout (from OMNIGRAPH_PUBLISH_TIMEOUT)"},
	} {
		_, errOut, code := runWorkerIn(t, dir, c.env, append(append([]string{}, pub...), c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v publish %v: exit %d, want %d with %q\n%s", c.env, c.args, code, c.code, c.want, errOut)
		}
	}
	if n := streamMsgs(t, ns.url, "OMNIGRAPH_DEMO"); n != 0 {
		t.Fatalf("%d refused batches reached the stream", n)
	}
	for _, args := range [][]string{{good}, {notJSON, "--no-validate"}, {alien, "--root", root, "--no-validate"}} {
		if out, errOut, code := runWorker(t, append(append([]string{}, pub...), args...)...); code != 0 || !strings.Contains(out, "published to omnigraph.demo.ingest") {
			t.Fatalf("publish %v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	if n := streamMsgs(t, ns.url, "OMNIGRAPH_DEMO"); n != 3 {
		t.Fatalf("%d messages stored, want the good batch and the two unvalidated ones", n)
	}
}

// streamMsgs is the number of messages stream holds.
func streamMsgs(t *testing.T, url, stream string) uint64 {
	t.Helper()
	s, err := connectJS(t, url).Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// merge, optimize and cleanup --graph wait for their request's outcome in the events stream
// (or its dead letter) and exit by it; the event stays in the stream for a pipeline that was
// not listening.
func TestCLIRequestsWaitForOutcome(t *testing.T) {
	ns := startNATS(t)
	root := initGraph(t)
	w := startWorker(t, root, ns.url, "")
	publishBody(t, ns.url, graphtest.BatchBody(0), map[string]string{"Omnigraph-Branch": "stage", "Omnigraph-From": "main", "Omnigraph-Mode": "append"})
	waitAcked(t, ns.url, 1, w)
	req := []string{"--graph", "demo", "--nats-url", ns.url, "--wait-timeout", "60s"}
	out, errOut, code := runWorker(t, append([]string{"merge", "--source", "stage"}, req...)...)
	if code != 0 || !strings.Contains(out, `"kind": "merge"`) || !strings.Contains(out, `"source_sequence": 2`) {
		t.Fatalf("merge --graph: exit %d\n%s%s\n%s", code, out, errOut, w.out)
	}
	out, errOut, code = runWorker(t, append([]string{"merge", "--source", "nowhere"}, req...)...)
	if code != 8 || !strings.Contains(errOut, "dead-lettered the request as branch_missing") {
		t.Fatalf("merge of a missing branch: exit %d, want 8\n%s%s", code, out, errOut)
	}
	if out, _, code := runWorker(t, append([]string{"optimize"}, req...)...); code != 0 || !strings.Contains(out, `"kind": "optimize"`) {
		t.Fatalf("optimize --graph: exit %d\n%s", code, out)
	}
	out, _, code = runWorker(t, append([]string{"cleanup", "--keep", "1", "--no-wait"}, req...)...)
	if code != 0 || strings.Contains(out, `"kind"`) || !strings.Contains(out, "sequence 5") {
		t.Fatalf("cleanup --no-wait: exit %d\n%s", code, out)
	}
	waitAcked(t, ns.url, 5, w)
	// Every outcome is stored: load, merge, the dead-lettered merge, optimize and cleanup. A
	// message's event follows its ack, so the cleanup's may still be on its way.
	var n uint64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if n = streamMsgs(t, ns.url, "OMNIGRAPH_DEMO_EVENTS"); n >= 5 || time.Now().After(deadline) {
			break
		}
	}
	if n != 5 {
		t.Fatalf("events stream holds %d events, want 5", n)
	}
	w.terminate(t)
	if _, errOut, code := runWorker(t, append([]string{"optimize", "--wait-timeout", "1s"}, req[:len(req)-2]...)...); code != 13 || !strings.Contains(errOut, "no outcome of request 6") {
		t.Fatalf("optimize with no worker: exit %d\n%s", code, errOut)
	}
}

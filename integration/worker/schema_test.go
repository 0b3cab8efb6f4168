package worker

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
)

// A schema change through a running worker, as an operator makes it: `worker schema apply
// --graph` publishes the request and prints the worker's schema event; the same file again
// is no commit; an unsupported change comes back as the request's dead letter, exit 12, and
// the worker goes on; a batch of the new schema commits after it.
func TestSchemaApplyThroughTheWorker(t *testing.T) {
	ns := startNATS(t)
	root := initGraph(t)
	w := startWorker(t, root, ns.url, "")
	w.waitConsuming(t) // the apply below waits for its event in the events stream the worker makes
	dir := t.TempDir()
	next := filepath.Join(dir, "next.pg")
	evolved := graphtest.EvolvedExample(t)
	if err := os.WriteFile(next, []byte(evolved), 0o644); err != nil {
		t.Fatal(err)
	}
	apply := []string{"schema", "apply", "--graph", "demo", "--nats-url", ns.url, "--wait-timeout", "60s"}
	out := workerCmd(t, append(apply, next)...)
	if !strings.Contains(out, `"kind": "schema"`) || !strings.Contains(out, `"applied": true`) || !strings.Contains(out, `"step_count": 6`) {
		t.Fatalf("apply said:\n%s", out)
	}
	out = workerCmd(t, append(apply, next)...)
	if !strings.Contains(out, `"applied": false`) {
		t.Fatalf("the same schema again said:\n%s", out)
	}
	bad := filepath.Join(dir, "bad.pg")
	if err := os.WriteFile(bad, []byte(strings.Replace(evolved, "    stars: I32?\n", "    stars: I64?\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := exec.Command(bin.worker, append(apply, bad)...).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 12 || !strings.Contains(string(got), "OG-MF-106") {
		t.Fatalf("an unsupported change: %v\n%s", err, got)
	}
	publishBody(t, ns.url, `{"type":"Tag","data":{"label":"t1"}}`, nil)
	waitAcked(t, ns.url, 4, w)
	if out := workerCmd(t, "export", "--root", root); !strings.Contains(out, `"label":"t1"`) {
		t.Fatalf("export:\n%s", out)
	}
	w.terminate(t)
}

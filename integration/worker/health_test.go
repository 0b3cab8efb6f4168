package worker

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// TestHealthCommand: `worker health` is what a container healthcheck runs. It exits 0 while
// the worker consumes, non-zero (saying why) while a worker stands by without the lease and
// when nothing answers; --live asks only whether the process is up.
func TestHealthCommand(t *testing.T) {
	ns := startNATS(t)
	root := initGraph(t)
	leader := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	w := startWorker(t, root, ns.url, "", "--http", leader)
	waitReady(t, leader, 200)
	if out, err := exec.Command(bin.worker, "health", "--http", leader).CombinedOutput(); err != nil {
		t.Fatalf("health of a consuming worker: %v\n%s", err, out)
	}
	standby := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startWorker(t, root, ns.url, "", "--http", standby)
	waitReady(t, standby, 503)
	out, err := exec.Command(bin.worker, "health", "--http", standby).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "answered 503") {
		t.Fatalf("health of a standby worker: want a failure naming the 503, got %v\n%s", err, out)
	}
	if out, err := exec.Command(bin.worker, "health", "--live", "--http", standby).CombinedOutput(); err != nil {
		t.Fatalf("health --live of a standby worker: %v\n%s", err, out)
	}
	nobody := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	if out, err := exec.Command(bin.worker, "health", "--http", nobody).CombinedOutput(); err == nil || !strings.Contains(string(out), nobody) {
		t.Fatalf("health with nothing listening: want a failure naming the address, got %v\n%s", err, out)
	}
	w.terminate(t)
}

package ingest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// syncFailChildEnv runs TestDirSyncFailureStallsTheWorker's body: in a process of its own,
// since a failed directory sync is latched for as long as the process lives.
const syncFailChildEnv = "OMNIGRAPH_TEST_SYNCFAIL_WORKER"

// A directory sync that fails (EIO: the disk's failure, not the batch's) is not the message's
// fault: the worker neither acknowledges the batch nor dead-letters it, however long the
// failure lasts. It retries in place and, past the retry budget, says it is stalled with the
// reason (/readyz 503, omnigraph_stalled 1). The failure is latched, so the worker stays
// stalled after the disk answers again: only a new process, which reads the directories back
// from the disk, goes on (the engine's TestFailedDirSyncStopsTheWriter shows that one), and
// /healthz answers 503 too, so that a liveness probe has the process restarted.
func TestDirSyncFailureStallsTheWorker(t *testing.T) {
	if os.Getenv(syncFailChildEnv) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDirSyncFailureStallsTheWorker$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), syncFailChildEnv+"=1")
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "--- PASS") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	h, m := startBudget(t, storage.FailpointDirSync, "error(EIO)", 500*time.Millisecond)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	get := func(path string) (int, string) {
		r, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(r.Body)
		r.Body.Close()
		return r.StatusCode, string(body)
	}
	if code, body := get("/healthz"); code != http.StatusOK {
		t.Fatalf("healthz before the failure: %d %s", code, body)
	}
	h.publish(batch, map[string]string{HeaderMode: "append"})
	waitMetrics(t, m, "omnigraph_stalled 1", `omnigraph_retry_budget_exhausted_total{action="stalled"} 1`)
	failpoint.Reset() // the disk answers again; the process's failure stays
	time.Sleep(time.Second)
	for _, path := range []string{"/readyz", "/healthz"} { // healthz: a liveness probe has the process restarted
		code, body := get(path)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "directory sync failed") ||
			!strings.Contains(body, "input/output error") || !strings.Contains(body, "restart") {
			t.Fatalf("%s while stalled: %d %s", path, code, body)
		}
	}
	if passed := regexp.MustCompile(`(?m)^omnigraph_(messages|dead_letters)_total\{[^}]*\} [1-9]`).FindString(exposition(m)); passed != "" {
		t.Fatalf("a batch went past the failed sync: %s", passed)
	}
	if dls, _ := DeadLetters(t.Context(), h.js, h.w.cfg, ""); len(dls) != 0 {
		t.Fatalf("dead letters %+v", dls)
	}
	info, err := h.w.cons.Info(t.Context())
	if err != nil || info.NumAckPending != 1 || info.AckFloor.Stream != 0 {
		t.Fatalf("the batch was acknowledged: %+v %v", info, err)
	}
}

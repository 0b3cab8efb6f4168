package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// The child's environment: the graph's directory and the directory syncs to let pass before
// the first one fails.
const (
	syncFailDirEnv  = "OMNIGRAPH_TEST_SYNCFAIL_DIR"
	syncFailSkipEnv = "OMNIGRAPH_TEST_SYNCFAIL_SKIP"
)

var syncFailBatch = []string{
	`{"type":"Person","data":{"handle":"carol","name":"Carol","active":true}}`,
	`{"type":"Company","data":{"domain":"carol.io","name":"Carol Inc","size":"smb"}}`,
	`{"edge":"WorksAt","from":"carol","to":"carol.io","data":{"id":"w9","role":"ceo"}}`,
}

func syncFailRequest(t *testing.T) LoadRequest {
	return LoadRequest{Mode: ModeAppend, Records: records(t, syncFailBatch...), Receipt: &publisher.Receipt{Stream: "S", Sequence: 2, MsgID: "m-2"}}
}

// A directory sync that fails while a load runs (EIO at each of the load's syncs in turn, the
// failpoint storage.dir_sync) fails the load, or the load had made every name durable before
// the failure; either way the failure is latched: the process reports nothing applied after
// it, not the same load again, not a recovery. A new process recovers the graph, the load
// whole or absent, and applies it. The latch lasts as long as the process, so each case runs
// in a child process of its own.
func TestFailedDirSyncStopsTheWriter(t *testing.T) {
	if dir := os.Getenv(syncFailDirEnv); dir != "" {
		skip, _ := strconv.Atoi(os.Getenv(syncFailSkipEnv))
		syncFailChild(t, dir, skip)
		return
	}
	if testing.Short() {
		t.Skip("a child process per directory sync of a load")
	}
	ctx := context.Background()
	// failed counts the cases the load failed in; visible those of them whose commit a new
	// process found published (the publish's own sync failed: the name was in place).
	var failed, visible int
	for skip := 0; ; skip++ {
		if skip > 40 {
			t.Fatal("the load never got past its directory syncs")
		}
		root, dir := graphtest.Root(t)
		g, err := Init(ctx, root, graphtest.Schema(t, graphtest.Example))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := load(t, g, "append", people...); err != nil {
			t.Fatal(err)
		}
		before := export(t, g, "")
		cmd := exec.Command(os.Args[0], "-test.run=^TestFailedDirSyncStopsTheWriter$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), syncFailDirEnv+"="+dir, syncFailSkipEnv+"="+strconv.Itoa(skip))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("skip %d: child: %v\n%s", skip, err, out)
		}
		committed := strings.Contains(string(out), "syncfail: committed")
		if !committed && !strings.Contains(string(out), "syncfail: failed") {
			t.Fatalf("skip %d: the child said neither:\n%s", skip, out)
		}

		g2, err := Open(ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g2.Recover(ctx); err != nil {
			t.Fatalf("skip %d: recovery in a new process: %v", skip, err)
		}
		noSidecars(t, g2)
		after := export(t, g2, "")
		has := 0
		for _, id := range []string{`"carol"`, `"carol.io"`, `"w9"`} {
			if strings.Contains(after, id) {
				has++
			}
		}
		if has != 0 && has != 3 || committed && has != 3 || has == 0 && after != before {
			t.Fatalf("skip %d (committed %v): the load is half there (%d of 3 rows):\n%s", skip, committed, has, after)
		}
		res, err := g2.Load(ctx, syncFailRequest(t))
		if err != nil || res.AlreadyApplied != (has == 3) {
			t.Fatalf("skip %d: the load in a new process: %+v %v", skip, res, err)
		}
		if committed {
			if failed == 0 || visible == 0 {
				t.Fatalf("the load failed in %d cases, %d of them published: want both", failed, visible)
			}
			t.Logf("the load failed at each of its first %d directory syncs; %d of them left it published, for a new process", failed, visible)
			return
		}
		failed++
		if has == 3 {
			visible++
		}
	}
}

// syncFailChild is the child of TestFailedDirSyncStopsTheWriter: it loads the batch into the
// graph in dir with every directory sync after the first skip failing, and prints the outcome.
func syncFailChild(t *testing.T, dir string, skip int) {
	ctx := context.Background()
	root, err := storage.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Open(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if err := failpoint.Enable(storage.FailpointDirSync, fmt.Sprintf("%d+error(EIO)", skip)); err != nil {
		t.Fatal(err)
	}
	_, loadErr := g.Load(ctx, syncFailRequest(t))
	latched := storage.Sync(ctx, root)
	failpoint.Reset()
	if loadErr == nil {
		if latched != nil {
			t.Fatalf("the load succeeded though a directory sync failed before it returned: %v", latched)
		}
		fmt.Println("syncfail: committed")
		return
	}
	if !errors.Is(latched, storage.ErrSyncFailed) {
		t.Fatalf("the load failed (%v), but not a directory sync: %v", loadErr, latched)
	}
	// A recovery that finds an intent to settle must write, and fails; one that finds none
	// (the load failed before it armed its sidecar) has nothing to do.
	if _, err := g.Recover(ctx); err == nil {
		noSidecars(t, g)
	} else if !errors.Is(err, storage.ErrSyncFailed) {
		t.Fatalf("a recovery after the failure: want ErrSyncFailed, got %v", err)
	}
	// The load again: refused by the latch, or sent to a recovery (its sidecar is there), which
	// the latch refuses as above; never reported applied.
	var rr *errs.RecoveryRequired
	if res, err := g.Load(ctx, syncFailRequest(t)); !errors.Is(err, storage.ErrSyncFailed) && !errors.As(err, &rr) {
		t.Fatalf("the load again after the failure: want ErrSyncFailed or RecoveryRequired, got %+v %v", res, err)
	}
	fmt.Printf("syncfail: failed (%v)\n", loadErr)
}

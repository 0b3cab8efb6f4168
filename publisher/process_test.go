package publisher

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/storage"
)

const childRootEnv = "PUBLISHER_TEST_CHILD_ROOT"

// TestTwoProcessPublishersFormLinearChain races two real processes publishing on one branch:
// every publish lands exactly once and the lineage is one linear chain.
func TestTwoProcessPublishersFormLinearChain(t *testing.T) {
	if dir := os.Getenv(childRootEnv); dir != "" {
		publishFromChild(t, dir)
		return
	}
	root, _ := genesis(t)
	const each = 15
	var cmds []*exec.Cmd
	for i := 0; i < 2; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestTwoProcessPublishersFormLinearChain$", "-test.count=1")
		cmd.Env = append(os.Environ(), childRootEnv+"="+root.Location(""), fmt.Sprintf("PUBLISHER_TEST_COUNT=%d", each))
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("child: %v", err)
		}
	}
	st, err := Open(root, "").Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cs, err := st.AllCommits(context.Background()); err != nil || len(cs) != 1+2*each {
		t.Fatalf("%d commits, want %d (%v)", len(cs), 1+2*each, err)
	}
	assertLinear(t, st)
}

func publishFromChild(t *testing.T, dir string) {
	ctx := context.Background()
	root, err := storage.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	fmt.Sscan(os.Getenv("PUBLISHER_TEST_COUNT"), &n)
	p := Open(root, "")
	for i := 0; i < n; i++ {
		req := Request{Lineage: &Lineage{CommitID: ids.NewULID(), ActorID: fmt.Sprint(os.Getpid())}}
		for {
			_, err := p.Publish(ctx, req)
			if err == nil {
				break
			}
			if !strings.Contains(err.Error(), "exhausted") {
				t.Fatal(err)
			}
		}
	}
}

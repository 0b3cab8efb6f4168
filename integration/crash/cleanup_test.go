package crash

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/framing"
)

// TestCleanupCrash kills a real `worker cleanup --confirm` after its file removals and in the
// middle of them, and checks that every branch reads exactly as before, that cleanup run again
// finishes, and that loading goes on.
func TestCleanupCrash(t *testing.T) {
	for _, kill := range []string{"storage.delete=3+kill", "storage.delete=12+kill", "lance.cleanup.after_files=kill", "lance.cleanup.after_files=1+kill"} {
		t.Run(kill, func(t *testing.T) {
			ctx := context.Background()
			dir, root, g := newGraph(t)
			load := func(branch, from, lines string) {
				t.Helper()
				recs, err := framing.ParseBytes([]byte(lines), framing.DefaultLimits())
				if err != nil {
					t.Fatal(err)
				}
				if _, err := g.Load(ctx, engine.LoadRequest{Branch: branch, From: from, Mode: engine.ModeMerge, Records: recs}); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < 20; i++ {
				load("", "", fmt.Sprintf(`{"type":"Person","data":{"handle":"p%d","name":"P","active":true}}`, i))
				if i == 8 {
					load("stage", "main", `{"type":"Person","data":{"handle":"s","name":"S","active":true}}`)
				}
			}
			if _, err := g.Optimize(ctx, engine.OptimizeOptions{All: true}); err != nil {
				t.Fatal(err)
			}
			if err := g.DeleteBranch(ctx, "stage"); err != nil {
				t.Fatal(err)
			}
			before := exportLines(t, root)
			if killed, out := run(t, kill, "cleanup", "--root", dir, "--keep", "2", "--confirm"); !killed {
				t.Fatalf("cleanup was not killed at %s:\n%s", kill, out)
			}
			if after := exportLines(t, root); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("main reads differently after a killed cleanup:\n%v\n%v", before, after)
			}
			if _, out := run(t, "", "cleanup", "--root", dir, "--keep", "2", "--confirm"); !strings.Contains(out, `"datasets"`) {
				t.Fatalf("cleanup again: %s", out)
			}
			if _, out := run(t, "", "cleanup", "--root", dir, "--keep", "2"); !strings.Contains(out, `"datasets": []`) {
				t.Fatalf("a third cleanup still finds work:\n%s", out)
			}
			if after := exportLines(t, root); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("main reads differently after cleanup:\n%v\n%v", before, after)
			}
			g2, err := engine.Open(ctx, root)
			if err != nil {
				t.Fatal(err)
			}
			assertAligned(t, g2)
			recs, _ := framing.ParseBytes([]byte(`{"type":"Person","data":{"handle":"late","name":"L","active":true}}`), framing.DefaultLimits())
			if _, err := g2.Load(ctx, engine.LoadRequest{Mode: engine.ModeAppend, Records: recs}); err != nil {
				t.Fatalf("load after cleanup: %v", err)
			}
		})
	}
}

package fleet

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i+1)
	}
	return out
}

// TestAssignFairShare: every graph goes to exactly one live member, each member gets ⌊G/M⌋ or
// ⌈G/M⌉, and the answer does not depend on the order or duplicates of either list.
func TestAssignFairShare(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for g := 0; g <= 13; g++ {
		for m := 1; m <= 7; m++ {
			graphs, members := names("g", g), names("worker-", m)
			got := Assign(graphs, members)
			if len(got) != g {
				t.Fatalf("G=%d M=%d: %d graphs assigned", g, m, len(got))
			}
			load := map[string]int{}
			for _, owner := range got {
				load[owner]++
			}
			for _, mem := range members {
				if load[mem] < g/m || load[mem] > (g+m-1)/m {
					t.Fatalf("G=%d M=%d: %s has %d graphs, want %d or %d: %v", g, m, mem, load[mem], g/m, (g+m-1)/m, got)
				}
			}
			shuffled := append(append([]string{}, members...), members[0])
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			gs := append([]string{}, graphs...)
			r.Shuffle(len(gs), func(i, j int) { gs[i], gs[j] = gs[j], gs[i] })
			again := Assign(gs, shuffled)
			for k, v := range got {
				if again[k] != v {
					t.Fatalf("G=%d M=%d: %s goes to %s or %s depending on the lists' order", g, m, k, v, again[k])
				}
			}
		}
	}
	if got := Assign(names("g", 3), nil); len(got) != 0 {
		t.Fatalf("no members: %v", got)
	}
}

// TestAssignMovesLittle: when a member leaves, the graphs it did not hold mostly stay where
// they were (rendezvous ranks), rather than being dealt out afresh.
func TestAssignMovesLittle(t *testing.T) {
	graphs, members := names("graph-", 60), names("w", 6)
	before := Assign(graphs, members)
	after := Assign(graphs, members[1:])
	moved := 0
	for _, g := range graphs {
		if before[g] != members[0] && after[g] != before[g] {
			moved++
		}
	}
	// 10 graphs lose their owner; a fresh deal would move about 5/6 of the other 50.
	if moved > 10 {
		t.Fatalf("%d of the 50 graphs of the members that stayed moved", moved)
	}
	t.Logf("%d of the 50 graphs of the members that stayed moved", moved)
}

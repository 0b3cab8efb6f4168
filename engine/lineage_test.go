package engine

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/omnigraph/omnigraph-worker/publisher"
)

type fakeCommits struct {
	m     map[string]publisher.Commit
	reads int
}

func (f *fakeCommits) get(id string, _ uint64) (publisher.Commit, bool, error) {
	f.reads++
	c, ok := f.m[id]
	return c, ok, nil
}

// randomHistory is a graph of commits on a few branches with merges between them; created_at
// rises along every parent edge unless skew makes some merged parents newer than their child.
func randomHistory(r *rand.Rand, n int, skew bool) (*fakeCommits, []string) {
	f := &fakeCommits{m: map[string]publisher.Commit{}}
	heads := []string{"c0000"}
	f.m["c0000"] = publisher.Commit{ID: "c0000", Meta: publisher.GraphCommitMetadata{CreatedAt: 1}}
	for i := 1; i < n; i++ {
		id := fmt.Sprintf("c%04d", i)
		b := r.Intn(len(heads))
		if len(heads) < 4 && r.Intn(8) == 0 {
			heads = append(heads, heads[b]) // a new branch forks here
			b = len(heads) - 1
		}
		c := publisher.Commit{ID: id, ManifestVersion: uint64(i), Meta: publisher.GraphCommitMetadata{ParentCommitID: heads[b], CreatedAt: int64(10 * i)}}
		if o := r.Intn(len(heads)); o != b && r.Intn(3) == 0 {
			c.Meta.MergedParentCommitID = heads[o]
			if skew && r.Intn(4) == 0 {
				c.Meta.CreatedAt = f.m[heads[o]].Meta.CreatedAt - 5
			}
		}
		if skew && r.Intn(20) == 0 {
			c.Meta.CreatedAt = f.m[heads[b]].Meta.CreatedAt // a tie with its parent: not monotonic
		}
		f.m[id] = c
		heads[b] = id
	}
	return f, heads
}

// The ordered walk agrees with the exhaustive one on every pair of heads of random histories
// whose created_at rises along every edge, reading fewer commits; on skewed ones it answers
// with a common ancestor of both heads (exactly the exhaustive answer when it noticed).
func TestRelateOrderedMatchesExhaustive(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	saved := 0
	for round := 0; round < 60; round++ {
		f, heads := randomHistory(r, 200, round%3 == 0)
		for _, a := range heads {
			for _, b := range heads {
				f.reads = 0
				got, gerr := relate(f, a, b)
				ordered := f.reads
				f.reads = 0
				want, werr := relateExhaustive(f, a, b)
				if skewed := round%3 == 0; skewed && gerr == nil && got.outcome == OutcomeMerged {
					ta, _ := ancestry(f, a)
					sa, _ := ancestry(f, b)
					if !ta[got.base.ID] || !sa[got.base.ID] {
						t.Fatalf("round %d, %s into %s: base %s is not a common ancestor", round, b, a, got.base.ID)
					}
					continue
				}
				if fmt.Sprint(gerr) != fmt.Sprint(werr) || got.outcome != want.outcome || got.base.ID != want.base.ID || got.source.ID != want.source.ID {
					t.Fatalf("round %d, %s into %s: ordered %+v %v, exhaustive %+v %v", round, b, a, got, gerr, want, werr)
				}
				if ordered < f.reads {
					saved++
				}
			}
		}
	}
	if saved == 0 {
		t.Fatal("the ordered walk never read fewer commits than the exhaustive one")
	}
}

// A merged parent newer than its child ends the ordered walk, which answers through the
// exhaustive one: here the ordered walk alone would stop at an older common ancestor.
func TestRelateFallsBackOnSkewedClocks(t *testing.T) {
	c := func(id, parent, merged string, at int64) publisher.Commit {
		return publisher.Commit{ID: id, Meta: publisher.GraphCommitMetadata{ParentCommitID: parent, MergedParentCommitID: merged, CreatedAt: at}}
	}
	f := &fakeCommits{m: map[string]publisher.Commit{
		"g": c("g", "", "", 1),
		"x": c("x", "g", "", 50), // the newest common ancestor, written by a writer whose clock ran ahead
		"t": c("t", "g", "x", 20),
		"s": c("s", "x", "", 60),
	}}
	rel, err := relate(f, "t", "s")
	if err != nil || rel.outcome != OutcomeMerged || rel.base.ID != "x" {
		t.Fatalf("relate = %+v %v, want a merge from base x", rel, err)
	}
	if _, err := relateOrdered(f, "t", "s"); err != errNotMonotonic {
		t.Fatalf("the ordered walk did not notice the skew: %v", err)
	}
}

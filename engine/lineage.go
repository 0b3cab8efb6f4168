package engine

import (
	"container/heap"
	"context"
	"fmt"

	"github.com/omnigraph/omnigraph-worker/publisher"
)

// lineage reads graph commits from the manifests of a merge's two branches, target first. The
// states keep only recent commits; older ones are read from __manifest on demand, so a walk
// costs what it visits, not the whole history.
type lineage struct {
	ctx    context.Context
	states []*publisher.State
}

// commits is where a walk reads commits: get returns ok=false for an id without a row.
type commits interface {
	get(id string, below uint64) (publisher.Commit, bool, error)
}

func (l *lineage) get(id string, below uint64) (publisher.Commit, bool, error) {
	for _, s := range l.states {
		c, ok, err := s.Commit(l.ctx, id, below)
		if err != nil || ok {
			return c, ok, err
		}
	}
	return publisher.Commit{}, false, nil
}

// relation is how a merge's source head stands to its target head.
type relation struct {
	outcome string           // OutcomeAlreadyUpToDate, OutcomeFastForward or OutcomeMerged
	base    publisher.Commit // the merge base (fast-forward: the target head)
	source  publisher.Commit // the source head
}

const (
	fromTarget = 1 << iota
	fromSource
)

// walkItem is a commit on the walk's frontier with the heads it is reachable from.
type walkItem struct {
	c     publisher.Commit
	flags int
}

type walkQueue []*walkItem // newest first: created_at, then id, descending

func newer(a, b *publisher.Commit) bool {
	if a.Meta.CreatedAt != b.Meta.CreatedAt {
		return a.Meta.CreatedAt > b.Meta.CreatedAt
	}
	return a.ID > b.ID
}

func (q walkQueue) Len() int           { return len(q) }
func (q walkQueue) Less(i, j int) bool { return newer(&q[i].c, &q[j].c) }
func (q walkQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *walkQueue) Push(x any)        { *q = append(*q, x.(*walkItem)) }
func (q *walkQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// noCommonAncestor: two heads whose histories never meet.
type noCommonAncestor struct{ target, source string }

func (e *noCommonAncestor) Error() string {
	return fmt.Sprintf("merge: heads %s and %s share no ancestor commit", e.target, e.source)
}

// errNotMonotonic ends the ordered walk when a parent is not older than its child.
var errNotMonotonic = fmt.Errorf("engine: created_at does not increase along a parent edge")

// relate classifies the two heads: the source already in the target's history, the target in
// the source's (a fast-forward from base = the target head), or diverged; for diverged heads
// the base is the newest common ancestor (by created_at, then id).
//
// It walks back from both heads in created_at order, marking each commit with the heads it is
// reachable from, and stops at the first commit reachable from both. When created_at rises
// along every parent edge, a commit comes off the queue only after all its descendants, so its
// marks are complete and the first one marked twice is exactly the newest common ancestor:
// the walk visits the commits since the fork, not the history. Every commit this build writes
// is newer than its parents (the publisher and the merge make sure), and wall clocks give the
// same for other writers. A walk that meets an edge where it fails (a writer whose clock went
// back), among the commits it visits or at the base's own parents, falls back to the
// exhaustive walk over both ancestries. A skewed edge further back, below a commit older than
// the base, stays unseen; the base returned is then still a common ancestor of both heads,
// though it may differ from the one the exhaustive walk picks by created_at alone.
func relate(l commits, tHead, sHead string) (relation, error) {
	r, err := relateOrdered(l, tHead, sHead)
	if err == errNotMonotonic {
		return relateExhaustive(l, tHead, sHead)
	}
	return r, err
}

func head(l commits, id string) (publisher.Commit, error) {
	c, ok, err := l.get(id, 0)
	if err == nil && !ok {
		err = fmt.Errorf("merge: head commit %q has no graph_commit row", id)
	}
	return c, err
}

func relateOrdered(l commits, tHead, sHead string) (relation, error) {
	if tHead == "" || sHead == "" {
		return relation{}, &noCommonAncestor{tHead, sHead}
	}
	t, err := head(l, tHead)
	if err != nil {
		return relation{}, err
	}
	s, err := head(l, sHead)
	if err != nil {
		return relation{}, err
	}
	q := &walkQueue{}
	queued := map[string]*walkItem{}
	push := func(c publisher.Commit, flags int) {
		if it, ok := queued[c.ID]; ok {
			it.flags |= flags
			return
		}
		it := &walkItem{c: c, flags: flags}
		queued[c.ID] = it
		heap.Push(q, it)
	}
	push(t, fromTarget)
	push(s, fromSource)
	for q.Len() > 0 {
		it := heap.Pop(q).(*walkItem)
		delete(queued, it.c.ID)
		if it.flags == fromTarget|fromSource {
			// The base's own parents must be older: a skewed clock right at the base is the
			// one a stop here would otherwise never see.
			for _, pid := range []string{it.c.Meta.ParentCommitID, it.c.Meta.MergedParentCommitID} {
				if p, ok, err := l.get(pid, 0); err != nil {
					return relation{}, err
				} else if ok && !newer(&it.c, &p) {
					return relation{}, errNotMonotonic
				}
			}
			switch it.c.ID {
			case sHead:
				return relation{outcome: OutcomeAlreadyUpToDate, source: s}, nil
			case tHead:
				return relation{outcome: OutcomeFastForward, base: t, source: s}, nil
			}
			return relation{outcome: OutcomeMerged, base: it.c, source: s}, nil
		}
		for _, pid := range []string{it.c.Meta.ParentCommitID, it.c.Meta.MergedParentCommitID} {
			if pid == "" {
				continue
			}
			below := it.c.ManifestVersion
			if pid == it.c.Meta.MergedParentCommitID {
				below = 0 // another branch's versions
			}
			p, ok, err := l.get(pid, below)
			if err != nil {
				return relation{}, err
			}
			if !ok {
				continue // a merged parent whose row lives only on a deleted branch ends its path
			}
			if !newer(&it.c, &p) {
				return relation{}, errNotMonotonic
			}
			push(p, it.flags)
		}
	}
	return relation{}, &noCommonAncestor{tHead, sHead}
}

// ancestry is every commit reachable from head through parents and merged parents (a merged
// parent whose row lives only on a deleted branch ends its path).
func ancestry(l commits, head string) (map[string]bool, error) {
	seen := map[string]bool{}
	stack := []string{head}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		c, ok, err := l.get(id, 0)
		if err != nil {
			return nil, err
		}
		if ok {
			stack = append(stack, c.Meta.ParentCommitID, c.Meta.MergedParentCommitID)
		}
	}
	return seen, nil
}

func relateExhaustive(l commits, tHead, sHead string) (relation, error) {
	s, err := head(l, sHead)
	if err != nil {
		return relation{}, err
	}
	ancT, err := ancestry(l, tHead)
	if err != nil {
		return relation{}, err
	}
	if ancT[sHead] {
		return relation{outcome: OutcomeAlreadyUpToDate, source: s}, nil
	}
	ancS, err := ancestry(l, sHead)
	if err != nil {
		return relation{}, err
	}
	if ancS[tHead] {
		t, err := head(l, tHead)
		return relation{outcome: OutcomeFastForward, base: t, source: s}, err
	}
	var best *publisher.Commit
	for id := range ancS {
		if !ancT[id] {
			continue
		}
		c, ok, err := l.get(id, 0)
		if err != nil {
			return relation{}, err
		}
		if ok && (best == nil || newer(&c, best)) {
			best = &c
		}
	}
	if best == nil {
		return relation{}, &noCommonAncestor{tHead, sHead}
	}
	return relation{outcome: OutcomeMerged, base: *best, source: s}, nil
}

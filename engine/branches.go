package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// ErrBranchExists is returned when creating a branch that already exists.
var ErrBranchExists = errors.New("branch already exists")

// branchInvalid refuses a branch name (bad spelling, collision): permanent input errors.
func branchInvalid(name, reason string) error {
	return &errs.InvalidInput{Field: "branch", Reason: fmt.Sprintf("branch %q: %s", name, reason)}
}

// Branch is a live graph branch.
type Branch struct {
	Name          string `json:"name"`
	ParentBranch  string `json:"parent_branch"`
	ParentVersion uint64 `json:"parent_version"`
	CreatedAt     int64  `json:"created_at"`
}

// Branches lists the live graph branches (main is implicit).
func (g *Graph) Branches(ctx context.Context) ([]Branch, error) {
	bs, err := lance.ListBranches(ctx, g.root.Sub(publisher.Dir))
	if err != nil {
		return nil, err
	}
	out := make([]Branch, 0, len(bs))
	for _, b := range bs {
		parent := "main"
		if b.Ref.ParentBranch != nil {
			parent = *b.Ref.ParentBranch
		}
		out = append(out, Branch{Name: b.Name, ParentBranch: parent, ParentVersion: b.Ref.ParentVersion, CreatedAt: b.Ref.CreateAt})
	}
	return out, nil
}

// CreateBranch forks graph branch name from the current manifest version of from ("" = main):
// a Lance branch of __manifest. Tables fork lazily on their first write to the branch. A fresh
// branch has no graph_head row until its first commit.
func (g *Graph) CreateBranch(ctx context.Context, name, from string) error {
	g.writeMu.Lock()
	defer g.writeMu.Unlock()
	return g.createBranch(ctx, name, from)
}

func (g *Graph) createBranch(ctx context.Context, name, from string) error {
	if err := lance.ValidateBranchName(name); err != nil {
		return branchInvalid(name, err.Error())
	}
	live, err := g.Branches(ctx)
	if err != nil {
		return err
	}
	for _, b := range live {
		switch {
		case b.Name == name:
			return fmt.Errorf("%w: %s", ErrBranchExists, name)
		case strings.HasPrefix(b.Name, name+"/") || strings.HasPrefix(name, b.Name+"/"):
			return branchInvalid(name, fmt.Sprintf("collides with live branch %q (one name may not be a path prefix of another)", b.Name))
		}
	}
	from = normBranch(from)
	src, err := lance.Open(ctx, g.root.Sub(publisher.Dir), lance.WithBranch(from))
	if err != nil {
		var be *lance.BranchError
		if errors.As(err, &be) {
			return &errs.BranchNotFound{Branch: from}
		}
		return err
	}
	// A tree left by a crash between Lance's clone and its ref is reclaimed first.
	if err := lance.ReclaimBranchTree(ctx, g.root.Sub(publisher.Dir), name); err != nil {
		return err
	}
	_, err = src.CreateBranch(ctx, name)
	return err
}

// DeleteBranch removes a graph branch: its __manifest branch and every table's Lance branch of
// that name.
func (g *Graph) DeleteBranch(ctx context.Context, name string) error {
	g.writeMu.Lock()
	defer g.writeMu.Unlock()
	return g.deleteBranch(ctx, name)
}

// deleteBranch refuses main, a branch other branches were created from, and a branch whose
// table versions another branch's tables are forked from (a ref-only merge fork): deleting it
// would take their files away.
func (g *Graph) deleteBranch(ctx context.Context, name string) error {
	name = normBranch(name)
	if name == "" {
		return branchInvalid("main", "main cannot be deleted")
	}
	st, err := g.publisher(name).Snapshot(ctx)
	if err != nil {
		return err
	}
	if err := g.recoveryBarrier(ctx, name); err != nil {
		return err
	}
	if err := g.checkNoDependents(ctx, name, st); err != nil {
		return err
	}
	if err := lance.DeleteBranch(ctx, g.root.Sub(publisher.Dir), name); err != nil {
		return err
	}
	for _, e := range st.Tables() {
		if e.Branch != nil && *e.Branch == name {
			if err := lance.DeleteBranch(ctx, g.root.Sub(e.Path), name); err != nil {
				var be *lance.BranchError
				if !errors.As(err, &be) {
					return err
				}
			}
			delete(g.tables, tableRef{path: e.Path, branch: name})
		}
	}
	delete(g.pubs, name)
	return nil
}

// checkNoDependents refuses deleting a branch that live branches still read files from.
func (g *Graph) checkNoDependents(ctx context.Context, name string, st *publisher.State) error {
	live, err := g.Branches(ctx)
	if err != nil {
		return err
	}
	for _, b := range live {
		if b.ParentBranch == name {
			return branchInvalid(name, fmt.Sprintf("branch %q was created from it; delete or merge %q first", b.Name, b.Name))
		}
	}
	for _, e := range st.Tables() {
		if e.Branch == nil || *e.Branch != name {
			continue
		}
		refs, err := lance.ListBranches(ctx, g.root.Sub(e.Path))
		if err != nil {
			return err
		}
		for _, r := range refs {
			if r.Name != name && r.Ref.ParentBranch != nil && *r.Ref.ParentBranch == name {
				return branchInvalid(name, fmt.Sprintf("table %s of branch %q is forked from this branch's version; delete %q first", e.TableKey, r.Name, r.Name))
			}
		}
	}
	return nil
}

package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// ErrBranchExists is returned when creating a branch that already exists.
var ErrBranchExists = errors.New("branch already exists")

// branchInvalid refuses a branch name (bad spelling, collision): permanent input errors.
func branchInvalid(name, reason string) error {
	return &errs.InvalidInput{Field: "branch", Reason: fmt.Sprintf("branch %s: %s", shortName(name), reason)}
}

// CheckBranchName refuses a branch name no branch can have (lance.BranchNameRule) as invalid
// input naming field, the header or member that carried it, and the rule. "" and "main" name
// main and pass. Every path that takes a branch name from outside checks it here first, so a
// name that passes can be stored and one that cannot is refused before any storage call.
func CheckBranchName(field, name string) error {
	if name == "" || name == "main" {
		return nil
	}
	if rule := lance.BranchNameRule(name); rule != "" {
		return &errs.InvalidInput{Field: field, Reason: fmt.Sprintf("branch %s: %s", shortName(name), rule)}
	}
	return nil
}

// shortName quotes a name for an error, cut to 64 bytes: a hostile name can be kilobytes.
func shortName(name string) string {
	const max = 64
	if len(name) <= max {
		return strconv.Quote(name)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return strconv.Quote(name[:cut]) + fmt.Sprintf("… (%d bytes)", len(name))
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
	g.lockSettled()
	defer g.writeMu.Unlock()
	return g.createBranch(ctx, name, from)
}

func (g *Graph) createBranch(ctx context.Context, name, from string) error {
	if rule := lance.BranchNameRule(name); rule != "" {
		return branchInvalid(name, rule)
	}
	if err := CheckBranchName("from", from); err != nil {
		return err
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
	parentID, err := src.Identifier(ctx)
	if err != nil {
		return err
	}
	// A fork is a write of __manifest: a deposed writer must not make one (a fork-on-write
	// load reaches here before its own intent's fence checks).
	if err := g.checkFence(ctx, "branch create"); err != nil {
		return err
	}
	mdir := g.root.Sub(publisher.Dir)
	var createErr error
	for attempt := 0; attempt < 2; attempt++ {
		// A tree left by a crash (or a failed attempt) between Lance's clone and its ref is
		// reclaimed first.
		if err := lance.ReclaimBranchTree(ctx, mdir, name); err != nil {
			return err
		}
		if _, createErr = src.CreateBranch(ctx, name); createErr == nil {
			break
		}
		var be *lance.BranchError
		if errors.As(createErr, &be) {
			return createErr // refused (exists, bad name): not ambiguous
		}
		// An error may still have created the branch: accept it only when the fresh ref is
		// exactly ours (the captured parent and version, one new identifier element) and the
		// branch opens; with no ref at all, try once more.
		ref, err := lance.ReadBranchRef(ctx, mdir, name)
		if errors.As(err, &be) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%w (and reading the branch back: %v)", createErr, err)
		}
		if derefOr(ref.ParentBranch) == from && ref.ParentVersion == src.Version() &&
			len(ref.Identifier) == len(parentID)+1 && ref.Identifier[:len(parentID)].Equal(parentID) {
			if _, err := lance.Open(ctx, mdir, lance.WithBranch(name)); err == nil {
				createErr = nil
				break
			}
		}
		return fmt.Errorf("create branch %q: %w (a ref that is not this create's exists now)", name, createErr)
	}
	if createErr != nil {
		return createErr
	}
	g.forgetBranch(name)
	return nil
}

// forgetBranch drops the derived read caches of a branch name, so a later branch of the same
// name never reuses a handle of an earlier one.
func (g *Graph) forgetBranch(name string) {
	delete(g.pubs, name)
	for ref := range g.tables {
		if ref.branch == name {
			delete(g.tables, ref)
		}
	}
	g.forgetPlans(name)
}

// DeleteBranch removes a graph branch: its __manifest branch and every table's Lance branch of
// that name.
func (g *Graph) DeleteBranch(ctx context.Context, name string) error {
	g.lockSettled()
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
	if err := CheckBranchName("branch", name); err != nil {
		return err
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
	mdir := g.root.Sub(publisher.Dir)
	ref, err := lance.ReadBranchRef(ctx, mdir, name)
	if err != nil {
		return err
	}
	if err := g.checkFence(ctx, "branch delete"); err != nil {
		return err
	}
	if err := lance.DeleteBranch(ctx, mdir, name); err != nil {
		// An error may still have removed the ref: absent is success (the tree is reclaimed
		// best effort), the same identifier keeps the error, another one is a recreate race.
		now, rerr := lance.ReadBranchRef(ctx, mdir, name)
		var be *lance.BranchError
		switch {
		case errors.As(rerr, &be):
			_ = lance.ReclaimBranchTree(ctx, mdir, name)
		case rerr == nil && now.Identifier.Equal(ref.Identifier):
			return err
		case rerr == nil:
			want, got := fmt.Sprint(ref.Identifier), fmt.Sprint(now.Identifier)
			return &errs.ReadSetChanged{Member: "branch_identifier:" + name, Expected: &want, Actual: &got}
		default:
			return fmt.Errorf("%w (and reading the branch back: %v)", err, rerr)
		}
	}
	for _, e := range st.Tables() {
		if e.Branch != nil && *e.Branch == name {
			if err := lance.DeleteBranch(ctx, g.root.Sub(e.Path), name); err != nil {
				var be *lance.BranchError
				if !errors.As(err, &be) {
					return err
				}
			}
		}
	}
	g.forgetBranch(name)
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

package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// A name at the limit of every rule can be stored: the longest name, and the longest made of
// one-letter segments (its ref file name grows by two bytes a slash), load, merge and delete on
// a local root, where a file name over 255 bytes is ENAMETOOLONG.
func TestLongestValidBranchNamesAreStored(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	if _, err := load(t, g, "append", people...); err != nil {
		t.Fatal(err)
	}
	slashes := strings.Repeat("a/", lance.MaxBranchNameBytes/2-1) + "bb"
	for i, name := range []string{strings.Repeat("n", lance.MaxBranchNameBytes), slashes} {
		if len(name) != lance.MaxBranchNameBytes || lance.BranchNameRule(name) != "" {
			t.Fatalf("%d bytes: %q", len(name), lance.BranchNameRule(name))
		}
		if _, err := g.Load(ctx, LoadRequest{Branch: name, From: "main", Mode: ModeAppend,
			Records: records(t, fmt.Sprintf(`{"type":"Person","data":{"handle":"long%d","name":"L","active":true}}`, i))}); err != nil {
			t.Fatalf("load into a %d-byte branch: %v", len(name), err)
		}
		if _, err := g.Merge(ctx, MergeRequest{Source: name, Target: "main", DeleteSource: true}); err != nil {
			t.Fatalf("merge of a %d-byte branch: %v", len(name), err)
		}
		if bs, err := g.Branches(ctx); err != nil || len(bs) != 0 {
			t.Fatalf("branches after the merge with delete: %+v %v", bs, err)
		}
	}
}

// Every path that takes a branch name refuses one storage cannot hold as invalid input naming
// its field and the rule, before any storage call.
func TestBadBranchNamesAreInvalidFromEveryPath(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	bad := map[string]string{
		".": `"." or ".." segment`, "x/.": `"." or ".." segment`, "./x": `"." or ".." segment`, "../x": `"." or ".." segment`,
		strings.Repeat("b", lance.MaxBranchNameBytes+1): fmt.Sprintf("longer than %d bytes (%d)", lance.MaxBranchNameBytes, lance.MaxBranchNameBytes+1), strings.Repeat("b", 5000): "longer than",
		"a__0xb": "__0x", "a b": "character ' '", "x.lock": ".lock", "a//b": "//", "/a": "starts or ends",
	}
	recs := records(t, people[0])
	for name, rule := range bad {
		paths := map[string]func() error{
			"branch": func() error {
				_, err := g.Load(ctx, LoadRequest{Branch: name, From: "main", Mode: ModeAppend, Records: recs})
				return err
			},
			"from": func() error {
				_, err := g.Load(ctx, LoadRequest{Branch: "stage", From: name, Mode: ModeAppend, Records: recs})
				return err
			},
			"source": func() error { _, err := g.Merge(ctx, MergeRequest{Source: name}); return err },
			"target": func() error { _, err := g.Merge(ctx, MergeRequest{Source: "stage", Target: name}); return err },
		}
		for field, run := range paths {
			err := run()
			var inv *errs.InvalidInput
			if !errors.As(err, &inv) || inv.Field != field || !strings.Contains(inv.Reason, rule) || len(inv.Reason) > 200 {
				t.Errorf("%.20q via %s: %v", name, field, err)
			}
		}
		if err := g.CreateBranch(ctx, "stage", name); errs.Kind(err) != errs.KindInvalid {
			t.Errorf("create from %.20q: %v", name, err)
		}
		if err := g.CreateBranch(ctx, name, "main"); errs.Kind(err) != errs.KindInvalid {
			t.Errorf("create %.20q: %v", name, err)
		}
		if err := g.DeleteBranch(ctx, name); errs.Kind(err) != errs.KindInvalid {
			t.Errorf("delete %.20q: %v", name, err)
		}
	}
	if bs, _ := g.Branches(ctx); len(bs) != 0 {
		t.Fatalf("branches %+v", bs)
	}
}

// A receipt key met again with another payload hash is *errs.MsgIDReused for loads and merges;
// the same hash, or a side without one, is the already-applied receipt as before.
func TestReceiptWithAnotherPayloadIsMsgIDReused(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	rcpt := func(sum string) *publisher.Receipt { return &publisher.Receipt{MsgID: "m-1", PayloadSHA256: sum} }
	first, err := g.Load(ctx, LoadRequest{Mode: ModeAppend, Records: records(t, people[0]), Receipt: rcpt("aa")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Load(ctx, LoadRequest{Mode: ModeAppend, Records: records(t, people[1]), Receipt: rcpt("bb")})
	var reused *errs.MsgIDReused
	if !errors.As(err, &reused) || reused.AppliedPayloadSHA256 != "aa" || reused.PayloadSHA256 != "bb" || reused.GraphCommitID != first.Commit.GraphCommitID {
		t.Fatalf("load with a reused id: %v", err)
	}
	for _, sum := range []string{"aa", ""} {
		if res, err := g.Load(ctx, LoadRequest{Mode: ModeAppend, Records: records(t, people[0]), Receipt: rcpt(sum)}); err != nil || !res.AlreadyApplied {
			t.Fatalf("hash %q: %+v %v", sum, res, err)
		}
	}
	if _, err := g.Load(ctx, LoadRequest{Branch: "s", From: "main", Mode: ModeAppend, Records: records(t, people[1])}); err != nil {
		t.Fatal(err)
	}
	mrc := func(sum string) *publisher.Receipt { return &publisher.Receipt{MsgID: "merge-1", PayloadSHA256: sum} }
	if _, err := g.Merge(ctx, MergeRequest{Source: "s", Receipt: mrc("cc")}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Merge(ctx, MergeRequest{Source: "s", Receipt: mrc("dd")}); !errors.As(err, &reused) || reused.MsgID != "merge-1" {
		t.Fatalf("merge with a reused id: %v", err)
	}
	if res, err := g.Merge(ctx, MergeRequest{Source: "s", Receipt: mrc("cc")}); err != nil || !res.AlreadyApplied {
		t.Fatalf("merge redelivered: %+v %v", res, err)
	}
}

package lance

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"testing"
)

// Every test of the package checks each reused fragment encoding against a fresh one.
func TestMain(m *testing.M) {
	checkFragmentCodes = true
	os.Exit(m.Run())
}

// A chain of commits of every kind the engine makes (appends, insert-only updates, row
// rewrites, deletes, upserts, tail compactions, Rewrite compactions), each staged on the
// Dataset the previous commit returned, so that each reuses the fragment encodings of the one
// before. Each reuse is checked against a fresh encoding (checkFragmentCodes), and each
// written manifest must be exactly what encoding its decoded self gives.
func TestCommitChainReusesFragmentEncodings(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	d, err := Create(ctx, st, testSchema(t), rows(seq(0, 10)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	next := int64(10)
	reused := 0
	for step := range 60 {
		var s *Staged
		switch op := rng.IntN(7); {
		case op == 0 || step < 5:
			s, err = d.StageAppend(ctx, rows(next, next+1), StageOptions{})
			next += 2
		case op == 1:
			s, err = d.StageInsertOnlyUpdate(ctx, rows(next), StageOptions{})
			next++
		case op == 2:
			s, err = d.StageDelete(ctx, In("id", rng.Int64N(next)), StageOptions{})
		case op == 3:
			s, err = d.StageUpsert(ctx, "id", rows(rng.Int64N(next), next), StageOptions{})
			next++
		case op == 4:
			s, err = d.StageRewriteRows(ctx, nil, rows(next), StageOptions{InlineTransactionOnly: true})
			next++
		case op == 5:
			s, _, err = d.CompactTail(ctx, 4, StageOptions{})
			if s == nil && err == nil {
				continue
			}
		default:
			s, _, err = d.StageCompaction(ctx, CompactionOptions{TargetRowsPerFragment: 6}, StageOptions{})
			if s == nil && err == nil {
				continue
			}
		}
		if err != nil {
			t.Fatalf("step %d: stage: %v", step, err)
		}
		if d.codes != nil {
			reused++
		}
		if d, err = d.Commit(ctx, s); err != nil {
			t.Fatalf("step %d: commit: %v", step, err)
		}
		if len(d.codes) != len(d.Manifest().Fragments) {
			t.Fatalf("step %d: %d codes for %d fragments", step, len(d.codes), len(d.Manifest().Fragments))
		}
		raw, err := d.dir.Get(ctx, d.key)
		if err != nil {
			t.Fatal(err)
		}
		m, txn, err := parseManifestFile(d.key, raw)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if fresh := marshalManifestFile(m, txn); !bytes.Equal(fresh, raw) {
			t.Fatalf("step %d: the written manifest differs from its fresh encoding", step)
		}
	}
	if reused < 50 {
		t.Fatalf("only %d commits reused encodings", reused)
	}
	// A fresh handle has no encodings to reuse; its commits encode everything.
	again, err := Open(ctx, st)
	if err != nil || again.codes != nil || again.Version() != d.Version() {
		t.Fatalf("reopened: %v", err)
	}
}

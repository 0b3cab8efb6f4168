package storagetest

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/omnigraph/omnigraph-worker/storage"
)

// testReplaceIfUnchanged: the replace takes only over the bytes the caller names, never
// re-creates a gone object, and a refused one changes nothing.
func testReplaceIfUnchanged(t *testing.T, s storage.Store) {
	ctx := t.Context()
	mustPut(t, s, "__recovery/op.json", []byte("armed"))
	if err := s.ReplaceIfUnchanged(ctx, "__recovery/op.json", []byte("armed"), []byte("confirmed")); err != nil {
		t.Fatalf("replace over the bytes it holds: %v", err)
	}
	mustGet(t, s, "__recovery/op.json", []byte("confirmed"))

	err := s.ReplaceIfUnchanged(ctx, "__recovery/op.json", []byte("armed"), []byte("stale"))
	wantErr(t, err, "replace", "__recovery/op.json", storage.ErrChanged)
	mustGet(t, s, "__recovery/op.json", []byte("confirmed"))

	// Same length, other bytes: a size check would not tell them apart.
	err = s.ReplaceIfUnchanged(ctx, "__recovery/op.json", []byte("confirmeD"), []byte("stale"))
	wantErr(t, err, "replace", "__recovery/op.json", storage.ErrChanged)
	mustGet(t, s, "__recovery/op.json", []byte("confirmed"))

	if err := s.Delete(ctx, "__recovery/op.json"); err != nil {
		t.Fatal(err)
	}
	err = s.ReplaceIfUnchanged(ctx, "__recovery/op.json", []byte("confirmed"), []byte("zombie"))
	wantErr(t, err, "replace", "__recovery/op.json", storage.ErrNotFound)
	if ok, err := s.Exists(ctx, "__recovery/op.json"); err != nil || ok {
		t.Fatalf("a replace re-created the object it found gone: %v, %v", ok, err)
	}
	err = s.ReplaceIfUnchanged(ctx, "never/there", nil, []byte("x"))
	wantErr(t, err, "replace", "never/there", storage.ErrNotFound)
	mustList(t, s, "") // nothing was created

	// Empty bytes are bytes like any other.
	mustPut(t, s, "e", nil)
	if err := s.ReplaceIfUnchanged(ctx, "e", nil, []byte("full")); err != nil {
		t.Fatalf("replace of an empty object: %v", err)
	}
	mustGet(t, s, "e", []byte("full"))
}

// testReplaceIfUnchangedConcurrent: of writers replacing the same bytes at once exactly one
// wins and its bytes stay; the others learn it changed.
func testReplaceIfUnchangedConcurrent(t *testing.T, s storage.Store) {
	const writers = 6
	key := "__recovery/race.json"
	for round := range 4 {
		old := []byte(fmt.Sprintf("armed %d", round))
		mustPut(t, s, key, old)
		payload := func(w int) []byte { return bytes.Repeat([]byte(fmt.Sprintf("writer %d round %d;", w, round)), 100+w) }
		errs := race(writers, func(w int) error { return s.ReplaceIfUnchanged(t.Context(), key, old, payload(w)) })
		winner := oneWinner(t, round, errs, "replace", key, storage.ErrChanged)
		mustGet(t, s, key, payload(winner))
	}
}

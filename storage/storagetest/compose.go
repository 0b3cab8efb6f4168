package storagetest

import (
	"context"
	"errors"
	"testing"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// testCompose: Compose writes the concatenation of its parts, ranges of objects of the store
// and of a Sub among them, replacing what was there; a range it cannot read, a cancelled
// context or an injected put fault writes nothing.
func testCompose(t *testing.T, s storage.Store) {
	ctx := t.Context()
	a := pattern(1000, 3)
	big := pattern(3<<20+17, 7) // more than one kernel copy's worth
	mustPut(t, s, "src/a", a)
	sub := s.Sub("nested")
	mustPut(t, sub, "b", big)
	parts := []storage.Part{
		{Data: []byte("head")},
		{Source: s, Key: "src/a", Offset: 10, Length: 500},
		{Data: []byte("mid")},
		{Source: sub, Key: "b", Offset: 0, Length: int64(len(big))},
		{Source: s, Key: "src/a", Offset: 990, Length: 10},
		{Source: s, Key: "src/a", Offset: 5, Length: 0},
	}
	var want []byte
	want = append(append(append(append(append(want, "head"...), a[10:510]...), "mid"...), big...), a[990:]...)
	mustPut(t, s, "out", []byte("old"))
	if err := storage.Compose(ctx, s, "out", parts); err != nil {
		t.Fatalf("Compose: %v", err)
	}
	mustGet(t, s, "out", want)
	if err := storage.Compose(ctx, s, "empty", nil); err != nil {
		t.Fatalf("Compose of no parts: %v", err)
	}
	mustGet(t, s, "empty", []byte{})

	failed := func(name string, err error, op, key string, target error) {
		t.Helper()
		wantErr(t, err, op, key, target)
		if ok, xerr := s.Exists(ctx, "never"); xerr != nil || ok {
			t.Fatalf("%s: the failed Compose wrote the object (%v, %v)", name, ok, xerr)
		}
	}
	past := []storage.Part{{Data: []byte("x")}, {Source: s, Key: "src/a", Offset: 900, Length: 101}}
	failed("past the end", storage.Compose(ctx, s, "never", past), "get_range", "src/a", storage.ErrOutOfRange)
	negative := []storage.Part{{Source: s, Key: "src/a", Offset: -1, Length: 2}}
	failed("negative offset", storage.Compose(ctx, s, "never", negative), "get_range", "src/a", storage.ErrOutOfRange)
	missing := []storage.Part{{Source: s, Key: "src/none", Offset: 0, Length: 1}}
	failed("missing source", storage.Compose(ctx, s, "never", missing), "get_range", "src/none", storage.ErrNotFound)
	directory := []storage.Part{{Source: s, Key: "src", Offset: 0, Length: 1}} // holds src/a: no object
	failed("directory source", storage.Compose(ctx, s, "never", directory), "get_range", "src", storage.ErrNotFound)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	failed("cancelled", storage.Compose(cancelled, s, "never", parts), "put", "never", context.Canceled)

	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable("storage.put", "error"); err != nil {
		t.Fatal(err)
	}
	err := storage.Compose(ctx, s, "never", parts)
	failpoint.Disable("storage.put")
	var fe *failpoint.Error
	if !errors.As(err, &fe) || fe.Name != "storage.put" {
		t.Fatalf("Compose under storage.put's failpoint: %v", err)
	}
	failed("injected", err, "put", "never", nil)
	// Each range is a range read, with its failpoint.
	if err := failpoint.Enable("storage.get_range", "error"); err != nil {
		t.Fatal(err)
	}
	err = storage.Compose(ctx, s, "never", parts)
	failpoint.Disable("storage.get_range")
	if !errors.As(err, &fe) || fe.Name != "storage.get_range" {
		t.Fatalf("Compose under storage.get_range's failpoint: %v", err)
	}
	failed("injected range read", err, "get_range", "src/a", nil)
	mustGet(t, s, "out", want)
}

// pattern is n bytes that differ from one offset to the next, so a range read from the wrong
// place shows.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31+i>>8) ^ seed
	}
	return b
}

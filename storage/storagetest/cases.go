package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/storage"
)

func testPutIfAbsentConcurrent(t *testing.T, s storage.Store) {
	const writers = 8
	for round := range 5 {
		key := fmt.Sprintf("_versions/%d.manifest", round)
		payload := func(w int) []byte {
			return bytes.Repeat([]byte(fmt.Sprintf("writer %d round %d;", w, round)), 1000+w)
		}
		errs := race(writers, func(w int) error { return s.PutIfAbsent(t.Context(), key, payload(w)) })
		mustGet(t, s, key, payload(oneWinner(t, round, errs, "put_if_absent", key, storage.ErrAlreadyExists)))
	}
}

// race runs f for writers 0..n-1 at once, released together, and returns their errors.
func race(n int, f func(w int) error) []error {
	errs := make([]error, n)
	var start, done sync.WaitGroup
	start.Add(1)
	for w := range n {
		done.Go(func() {
			start.Wait()
			errs[w] = f(w)
		})
	}
	start.Done()
	done.Wait()
	return errs
}

// oneWinner requires exactly one nil among errs, every other one the op's error for key
// matching loser, and returns the winner.
func oneWinner(t *testing.T, round int, errs []error, op, key string, loser error) int {
	t.Helper()
	winner := -1
	for w, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("round %d: writers %d and %d both won", round, winner, w)
		case err == nil:
			winner = w
		default:
			wantErr(t, err, op, key, loser)
		}
	}
	if winner < 0 {
		t.Fatalf("round %d: no writer won", round)
	}
	return winner
}

// testPutNoTornReads races readers against overwrites: every read must be one whole version.
func testPutNoTornReads(t *testing.T, s storage.Store) {
	const size = 256 << 10
	versions := [][]byte{bytes.Repeat([]byte{'a'}, size), bytes.Repeat([]byte{'b'}, size+1)}
	mustPut(t, s, "torn", versions[0])
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	for range 3 {
		wg.Go(func() {
			for ctx.Err() == nil {
				got, err := s.Get(ctx, "torn")
				if err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						bad = append(bad, err.Error())
						mu.Unlock()
					}
					return
				}
				if !bytes.Equal(got, versions[0]) && !bytes.Equal(got, versions[1]) {
					mu.Lock()
					bad = append(bad, "torn read: "+short(got))
					mu.Unlock()
					return
				}
			}
		})
	}
	for i := range 30 {
		if err := s.Put(t.Context(), "torn", versions[(i+1)%2]); err != nil {
			cancel()
			wg.Wait()
			t.Fatalf("Put: %v", err)
		}
	}
	cancel()
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d bad reads, first: %s", len(bad), bad[0])
	}
	mustList(t, s, "", "torn")
}

func testList(t *testing.T, s storage.Store) {
	// "a/b.txt" sorts before "a/b/c" ('.' < '/') although a directory walk visits it after.
	keys := []string{"a/b/d/e", "b", "a/b.txt", "ab/x", "a-c", "a/a", "a/b/c", "z/z/z"}
	for i, k := range keys {
		mustPut(t, s, k, bytes.Repeat([]byte{'x'}, i))
	}
	objs := mustList(t, s, "", "a-c", "a/a", "a/b.txt", "a/b/c", "a/b/d/e", "ab/x", "b", "z/z/z")
	for _, o := range objs {
		for i, k := range keys {
			if k == o.Key && o.Size != int64(i) {
				t.Fatalf("List: %s has Size %d, want %d", k, o.Size, i)
			}
		}
		// Cleanup judges unnamed files by age: a store must say when an object was written.
		if age := time.Since(o.ModTime); o.ModTime.IsZero() || age > time.Hour || age < -time.Hour {
			t.Fatalf("List: %s has ModTime %v", o.Key, o.ModTime)
		}
	}
	// A prefix is a directory: "a" must not match "a-c" or "ab/x".
	mustList(t, s, "a", "a/a", "a/b.txt", "a/b/c", "a/b/d/e")
	mustList(t, s, "a/", "a/a", "a/b.txt", "a/b/c", "a/b/d/e")
	mustList(t, s, "a/b", "a/b/c", "a/b/d/e")
	mustList(t, s, "missing")
	mustList(t, s, "b") // "b" is an object, not a directory
	if objs, err := s.List(t.Context(), "missing"); err != nil || objs == nil {
		t.Fatalf("List(missing) = %v, %v; want an empty non-nil slice", objs, err)
	}
}

func testListHidesTemp(t *testing.T, s storage.Store) {
	for _, k := range []string{"t/x#123", "t/y", "t/y#0", "t/z#12a", "t/#7", "t/sub/q", "t/sub/q#99"} {
		mustPut(t, s, k, []byte(k))
	}
	mustList(t, s, "t", "t/#7", "t/sub/q", "t/y", "t/z#12a")
	mustListDir(t, s, "t", []string{"t/#7", "t/y", "t/z#12a"}, []string{"t/sub"})
	mustList(t, s, "", "t/#7", "t/sub/q", "t/y", "t/z#12a")
	// Hidden from listings only: the objects themselves are still readable and deletable.
	mustGet(t, s, "t/x#123", []byte("t/x#123"))
	if err := s.DeletePrefix(t.Context(), "t"); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Exists(t.Context(), "t/x#123"); err != nil || ok {
		t.Fatalf("DeletePrefix left the hidden temporary file behind: %v, %v", ok, err)
	}
}

func testListDir(t *testing.T, s storage.Store) {
	for _, k := range []string{"d/f2", "d/f1", "d/s1/x", "d/s1/y/z", "d/s2/w", "d2/q", "top", "d-x"} {
		mustPut(t, s, k, []byte(k))
	}
	mustListDir(t, s, "", []string{"d-x", "top"}, []string{"d", "d2"})
	mustListDir(t, s, "d", []string{"d/f1", "d/f2"}, []string{"d/s1", "d/s2"})
	mustListDir(t, s, "d/", []string{"d/f1", "d/f2"}, []string{"d/s1", "d/s2"})
	mustListDir(t, s, "d/s1", []string{"d/s1/x"}, []string{"d/s1/y"})
	mustListDir(t, s, "missing", []string{}, []string{})
	files, _, err := s.ListDir(t.Context(), "d")
	if err != nil || files[0].Size != int64(len("d/f1")) {
		t.Fatalf("ListDir sizes: %v, %v", files, err)
	}
}

func testDelete(t *testing.T, s storage.Store) {
	ctx := t.Context()
	if err := s.Delete(ctx, "never/existed"); err != nil {
		t.Fatalf("Delete(absent): %v", err)
	}
	mustPut(t, s, "k", []byte("v"))
	mustPut(t, s, "dir/child", []byte("c"))
	for range 2 {
		if err := s.Delete(ctx, "k"); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
	if _, err := s.Get(ctx, "k"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Get after Delete: %v", err)
	}
	// Deleting a "directory" is deleting a non-object: a no-op that leaves the children.
	if err := s.Delete(ctx, "dir"); err != nil {
		t.Fatalf("Delete(directory): %v", err)
	}
	mustList(t, s, "", "dir/child")
}

func testDeletePrefix(t *testing.T, s storage.Store) {
	ctx := t.Context()
	for _, k := range []string{"x/a", "x/y/z", "x/y/w/v", "xy/keep", "x-keep", "keep"} {
		mustPut(t, s, k, []byte(k))
	}
	for i := range 50 { // more than DeletePrefix keeps in flight at once
		mustPut(t, s, fmt.Sprintf("x/many/%02d", i), nil)
	}
	for _, p := range []string{"x", "x/", "absent", "keep/absent"} {
		if err := s.DeletePrefix(ctx, p); err != nil {
			t.Fatalf("DeletePrefix(%q): %v", p, err)
		}
	}
	mustList(t, s, "", "keep", "x-keep", "xy/keep")
	mustListDir(t, s, "", []string{"keep", "x-keep"}, []string{"xy"})
	if err := s.DeletePrefix(ctx, ""); err != nil {
		t.Fatalf("DeletePrefix(\"\"): %v", err)
	}
	mustList(t, s, "")
	mustPut(t, s, "x/a", []byte("reborn")) // the root and old paths stay usable
	mustGet(t, s, "x/a", []byte("reborn"))
}

func testDirectoryIsNotObject(t *testing.T, s storage.Store) {
	ctx := t.Context()
	mustPut(t, s, "d/e/f", []byte("f"))
	for _, k := range []string{"d", "d/e"} {
		if ok, err := s.Exists(ctx, k); err != nil || ok {
			t.Fatalf("Exists(%q) = %v, %v; want false, nil", k, ok, err)
		}
		if _, err := s.Get(ctx, k); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("Get(%q) = %v; want ErrNotFound", k, err)
		}
		if _, ok, err := s.GetIfExists(ctx, k); err != nil || ok {
			t.Fatalf("GetIfExists(%q) = %v, %v; want false, nil", k, ok, err)
		}
		if _, err := s.Size(ctx, k); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("Size(%q) = %v; want ErrNotFound", k, err)
		}
	}
	// Below an object there is nothing either.
	if _, ok, err := s.GetIfExists(ctx, "d/e/f/g"); err != nil || ok {
		t.Fatalf("GetIfExists below an object = %v, %v; want false, nil", ok, err)
	}
}

func testSub(t *testing.T, s storage.Store) {
	ctx := t.Context()
	mustPut(t, s, "p/q/k", []byte("deep"))
	mustPut(t, s, "pq/other", []byte("sibling"))
	sub := s.Sub("p")
	mustGet(t, sub, "q/k", []byte("deep"))
	mustPut(t, sub, "z", []byte("from sub"))
	mustGet(t, s, "p/z", []byte("from sub"))
	mustList(t, sub, "", "q/k", "z")
	mustListDir(t, sub, "", []string{"z"}, []string{"q"})
	if _, err := sub.Get(ctx, "other"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Sub sees outside its prefix: %v", err)
	}
	subsub := sub.Sub("q/")
	mustGet(t, subsub, "k", []byte("deep"))
	if s.Sub("p/q").Location("k") != subsub.Location("k") || s.Location("p/q/k") != subsub.Location("k") {
		t.Fatalf("Sub locations disagree: %q vs %q", s.Location("p/q/k"), subsub.Location("k"))
	}
	if err := sub.PutIfAbsent(ctx, "q/k", []byte("x")); !errors.Is(err, storage.ErrAlreadyExists) {
		t.Fatalf("Sub PutIfAbsent on existing: %v", err)
	}
	if err := sub.DeletePrefix(ctx, ""); err != nil {
		t.Fatal(err)
	}
	mustList(t, s, "", "pq/other")

	// Closing a Sub leaves the parent usable; the Sub's URI reopens the same objects.
	mustPut(t, sub, "again", []byte("1"))
	if err := sub.Close(); err != nil {
		t.Fatalf("Sub.Close: %v", err)
	}
	mustGet(t, s, "p/again", []byte("1"))
	if !strings.HasSuffix(strings.SplitN(sub.URI(), "?", 2)[0], "/p") {
		t.Fatalf("Sub URI %q does not end in /p", sub.URI())
	}
	re, err := storage.Open(ctx, sub.URI())
	if err != nil {
		t.Fatalf("Open(Sub.URI() = %q): %v", sub.URI(), err)
	}
	mustGet(t, re, "again", []byte("1"))
	if re.URI() != sub.URI() || re.Location("again") != s.Location("p/again") {
		t.Fatalf("reopened store: URI %q Location %q; want %q, %q", re.URI(), re.Location("again"), sub.URI(), s.Location("p/again"))
	}
	if err := re.Close(); err != nil {
		t.Fatal(err)
	}
	mustGet(t, s, "p/again", []byte("1"))

	// An invalid Sub prefix cannot escape the root; it fails every operation instead.
	bad := s.Sub("../escape")
	if _, err := bad.Get(ctx, "k"); !errors.Is(err, storage.ErrInvalidKey) {
		t.Fatalf("Sub(\"../escape\").Get = %v; want ErrInvalidKey", err)
	}
	if err := bad.Put(ctx, "k", nil); !errors.Is(err, storage.ErrInvalidKey) {
		t.Fatalf("Sub(\"../escape\").Put = %v; want ErrInvalidKey", err)
	}
}

func testLocationKeyOf(t *testing.T, s storage.Store) {
	keys := []string{"a", "dir/file.lance", "with space/ünï#1x", "_versions/18446744073709551615.manifest"}
	local := strings.HasPrefix(s.URI(), "file://")
	for _, k := range keys {
		loc := s.Location(k)
		if got, ok := s.KeyOf(loc); !ok || got != k {
			t.Fatalf("KeyOf(Location(%q) = %q) = %q, %v", k, loc, got, ok)
		}
		if local {
			if !filepath.IsAbs(loc) || strings.Contains(loc, "://") {
				t.Fatalf("local Location(%q) = %q, want an absolute OS path", k, loc)
			}
		} else {
			scheme := s.URI()[:strings.Index(s.URI(), "://")]
			if !strings.HasPrefix(loc, scheme+"://") || !strings.HasSuffix(loc, "/"+k) || strings.Contains(loc, "?") {
				t.Fatalf("Location(%q) = %q, want %s://<bucket>/<prefix>/%s", k, loc, scheme, k)
			}
		}
	}
	if local { // the path really is where the bytes are
		mustPut(t, s, "dir/file.lance", []byte("on disk"))
		mustGet(t, storageAt(t, filepath.Dir(s.Location("dir/file.lance"))), "file.lance", []byte("on disk"))
		if k, ok := s.KeyOf("file://" + filepath.ToSlash(s.Location("dir/x"))); !ok || k != "dir/x" {
			t.Fatalf("KeyOf(file:// location) = %q, %v", k, ok)
		}
	}
	root := strings.TrimSuffix(s.Location("a"), "a")
	sub := s.Sub("p")
	for _, loc := range []string{
		root, strings.TrimSuffix(root, "/"), root + "../a", "relative/a", "other://x/a",
		root + "a/", root + "a//b", strings.TrimSuffix(root, "/") + "x/a",
	} {
		if k, ok := s.KeyOf(loc); ok {
			t.Fatalf("KeyOf(%q) = %q, true; want false", loc, k)
		}
	}
	if k, ok := sub.KeyOf(s.Location("p/z")); !ok || k != "z" {
		t.Fatalf("Sub.KeyOf(parent location) = %q, %v", k, ok)
	}
	for _, outside := range []string{"pq/x", "p", "q/z"} {
		if k, ok := sub.KeyOf(s.Location(outside)); ok {
			t.Fatalf("Sub(p).KeyOf(%q) = %q, true; want false", s.Location(outside), k)
		}
	}
}

// storageAt opens a local directory as its own store.
func storageAt(t *testing.T, dir string) storage.Store {
	t.Helper()
	st, err := storage.Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func testInvalidKeys(t *testing.T, s storage.Store) {
	ctx := t.Context()
	for _, k := range []string{"", "/a", "a/", "a//b", "a/../b", "..", "./a", "a/.", "a\x00b", "a\nb", "x__0x41__", "\xff"} {
		_, err := s.Get(ctx, k)
		wantErr(t, err, "get", k, storage.ErrInvalidKey)
		wantErr(t, s.Put(ctx, k, []byte("x")), "put", k, storage.ErrInvalidKey)
		wantErr(t, s.PutIfAbsent(ctx, k, []byte("x")), "put_if_absent", k, storage.ErrInvalidKey)
		wantErr(t, s.Delete(ctx, k), "delete", k, storage.ErrInvalidKey)
		_, err = s.Exists(ctx, k)
		wantErr(t, err, "exists", k, storage.ErrInvalidKey)
	}
	for _, p := range []string{"/a", "a//b", "../x", "a/.."} {
		_, err := s.List(ctx, p)
		wantErr(t, err, "list", p, storage.ErrInvalidKey)
		_, _, err = s.ListDir(ctx, p)
		wantErr(t, err, "list_dir", p, storage.ErrInvalidKey)
		wantErr(t, s.DeletePrefix(ctx, p), "delete_prefix", p, storage.ErrInvalidKey)
	}
	mustList(t, s, "")
}

func testContextCanceled(t *testing.T, s storage.Store) {
	mustPut(t, s, "k", []byte("v"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	check := func(op, key string, err error) {
		t.Helper()
		wantErr(t, err, op, key, context.Canceled)
	}
	_, err := s.Get(ctx, "k")
	check("get", "k", err)
	_, _, err = s.GetIfExists(ctx, "k")
	check("get_if_exists", "k", err)
	_, err = s.GetRange(ctx, "k", 0, 1)
	check("get_range", "k", err)
	_, err = s.Size(ctx, "k")
	check("size", "k", err)
	_, err = s.Exists(ctx, "k")
	check("exists", "k", err)
	check("put", "new", s.Put(ctx, "new", []byte("x")))
	check("put_if_absent", "new2", s.PutIfAbsent(ctx, "new2", []byte("x")))
	_, err = s.List(ctx, "")
	check("list", "", err)
	_, _, err = s.ListDir(ctx, "")
	check("list_dir", "", err)
	check("delete", "k", s.Delete(ctx, "k"))
	check("delete_prefix", "", s.DeletePrefix(ctx, ""))
	mustList(t, s, "", "k") // nothing was written or deleted
}

func testFailpoints(t *testing.T, s storage.Store) {
	t.Cleanup(failpoint.Reset)
	ctx := t.Context()
	mustPut(t, s, "k", []byte("v"))
	calls := map[string]func() error{
		"get":           func() error { _, err := s.Get(ctx, "k"); return err },
		"get_if_exists": func() error { _, _, err := s.GetIfExists(ctx, "k"); return err },
		"get_range":     func() error { _, err := s.GetRange(ctx, "k", 0, 1); return err },
		"size":          func() error { _, err := s.Size(ctx, "k"); return err },
		"exists":        func() error { _, err := s.Exists(ctx, "k"); return err },
		"put":           func() error { return s.Put(ctx, "k", []byte("v")) },
		"put_if_absent": func() error { return s.PutIfAbsent(ctx, "fresh", []byte("v")) },
		"replace":       func() error { return s.ReplaceIfUnchanged(ctx, "k", []byte("v"), []byte("v")) },
		"list":          func() error { _, err := s.List(ctx, "k"); return err },
		"list_dir":      func() error { _, _, err := s.ListDir(ctx, "k"); return err },
		"delete":        func() error { return s.Delete(ctx, "k") },
		"delete_prefix": func() error { return s.DeletePrefix(ctx, "k") },
	}
	for _, op := range slices.Sorted(maps.Keys(calls)) {
		call := calls[op]
		mustPut(t, s, "k", []byte("v"))
		if err := s.Delete(ctx, "fresh"); err != nil {
			t.Fatal(err)
		}
		name := "storage." + op
		if err := failpoint.Enable(name, "error"); err != nil {
			t.Fatal(err)
		}
		err := call()
		failpoint.Disable(name)
		key := "k"
		if op == "put_if_absent" {
			key = "fresh"
		}
		wantErr(t, err, op, key, nil)
		var fe *failpoint.Error
		if !errors.As(err, &fe) || fe.Name != name {
			t.Fatalf("%s: error %v does not wrap the injected *failpoint.Error", name, err)
		}
		if err := call(); err != nil {
			t.Fatalf("%s after disarming: %v", op, err)
		}
	}
	// The failed Put and PutIfAbsent wrote nothing; the failed Delete deleted nothing.
	if err := failpoint.Enable("storage.put_if_absent", "error"); err != nil {
		t.Fatal(err)
	}
	_ = s.PutIfAbsent(ctx, "never", []byte("x"))
	failpoint.Disable("storage.put_if_absent")
	if ok, err := s.Exists(ctx, "never"); err != nil || ok {
		t.Fatalf("injected PutIfAbsent failure wrote the object: %v, %v", ok, err)
	}
	// DeletePrefix lists and deletes internally; the list and delete points must not fire.
	mustPut(t, s, "tree/a", nil)
	for _, p := range []string{"storage.list", "storage.delete"} {
		if err := failpoint.Enable(p, "error"); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeletePrefix(ctx, "tree"); err != nil {
		t.Fatalf("DeletePrefix fired another operation's failpoint: %v", err)
	}
	failpoint.Reset()
	mustList(t, s, "tree")
}

func testClose(t *testing.T, s storage.Store) {
	ctx := t.Context()
	mustPut(t, s, "k", []byte("v"))
	sub := s.Sub("p")
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// A closed store must not answer as if it had looked: no "absent", no "already exists".
	for _, st := range []storage.Store{s, sub} {
		err := st.PutIfAbsent(ctx, "new", []byte("x"))
		if err == nil || errors.Is(err, storage.ErrAlreadyExists) {
			t.Fatalf("PutIfAbsent after Close = %v; want an error that is not ErrAlreadyExists", err)
		}
		if _, ok, err := st.GetIfExists(ctx, "k"); err == nil || ok {
			t.Fatalf("GetIfExists after Close = %v, %v; want an error", ok, err)
		}
		if _, err := st.Get(ctx, "k"); err == nil || errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("Get after Close = %v; want an error that is not ErrNotFound", err)
		}
	}
}

// Package storagetest is the conformance suite every storage backend must pass, so that code
// written against one backend behaves the same on the others.
package storagetest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/omnigraph/omnigraph-worker/storage"
)

// Run runs every case in its own subtest. open must return an empty Store that no other
// subtest uses, and should close it with t.Cleanup. Cases arm process-global failpoints, so
// Run must not execute in parallel with other tests of the same binary.
func Run(t *testing.T, open func(t *testing.T) storage.Store) {
	cases := []struct {
		name string
		fn   func(t *testing.T, s storage.Store)
	}{
		{"GetMissing", testGetMissing},
		{"PutGet", testPutGet},
		{"LargeObject", testLargeObject},
		{"GetIfExists", testGetIfExists},
		{"GetRange", testGetRange},
		{"PutOverwrite", testPutOverwrite},
		{"PutIfAbsent", testPutIfAbsent},
		{"PutIfAbsentConcurrent", testPutIfAbsentConcurrent},
		{"ReplaceIfUnchanged", testReplaceIfUnchanged},
		{"ReplaceIfUnchangedConcurrent", testReplaceIfUnchangedConcurrent},
		{"PutNoTornReads", testPutNoTornReads},
		{"List", testList},
		{"ListHidesTemp", testListHidesTemp},
		{"ListDir", testListDir},
		{"Delete", testDelete},
		{"DeletePrefix", testDeletePrefix},
		{"DirectoryIsNotObject", testDirectoryIsNotObject},
		{"Sub", testSub},
		{"LocationKeyOf", testLocationKeyOf},
		{"InvalidKeys", testInvalidKeys},
		{"ContextCanceled", testContextCanceled},
		{"Failpoints", testFailpoints},
		{"Compose", testCompose},
		{"Close", testClose},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open(t)) })
	}
}

// mustPut fails the test unless Put succeeds.
func mustPut(t *testing.T, s storage.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(t.Context(), key, data); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

// mustGet fails the test unless Get returns want.
func mustGet(t *testing.T, s storage.Store, key string, want []byte) {
	t.Helper()
	got, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Get(%q) = %s, want %s", key, short(got), short(want))
	}
}

// wantErr checks that err is an *OpError for op and key whose chain contains target.
func wantErr(t *testing.T, err error, op, key string, target error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s(%q): got nil error, want %v", op, key, target)
	}
	var oe *storage.OpError
	if !errors.As(err, &oe) {
		t.Fatalf("%s(%q): error %v (%T) is not an *storage.OpError", op, key, err, err)
	}
	if oe.Op != op || oe.Key != key {
		t.Fatalf("%s(%q): OpError{Op: %q, Key: %q}, want Op %q, Key %q", op, key, oe.Op, oe.Key, op, key)
	}
	if target != nil && !errors.Is(err, target) {
		t.Fatalf("%s(%q): error %v does not match %v", op, key, err, target)
	}
}

func short(b []byte) string {
	if len(b) > 40 {
		return fmt.Sprintf("%q...(%d bytes)", b[:40], len(b))
	}
	return fmt.Sprintf("%q", b)
}

func keysOf(objs []storage.Object) []string {
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i] = o.Key
	}
	return keys
}

func mustList(t *testing.T, s storage.Store, prefix string, want ...string) []storage.Object {
	t.Helper()
	objs, err := s.List(t.Context(), prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	if got := keysOf(objs); !slices.Equal(got, want) {
		t.Fatalf("List(%q) = %q, want %q", prefix, got, want)
	}
	return objs
}

func mustListDir(t *testing.T, s storage.Store, prefix string, wantFiles, wantDirs []string) {
	t.Helper()
	files, dirs, err := s.ListDir(t.Context(), prefix)
	if err != nil {
		t.Fatalf("ListDir(%q): %v", prefix, err)
	}
	if got := keysOf(files); !slices.Equal(got, wantFiles) {
		t.Fatalf("ListDir(%q) files = %q, want %q", prefix, got, wantFiles)
	}
	if !slices.Equal(dirs, wantDirs) {
		t.Fatalf("ListDir(%q) dirs = %q, want %q", prefix, dirs, wantDirs)
	}
}

func testGetMissing(t *testing.T, s storage.Store) {
	ctx := t.Context()
	_, err := s.Get(ctx, "missing/key")
	wantErr(t, err, "get", "missing/key", storage.ErrNotFound)
	_, err = s.Size(ctx, "missing")
	wantErr(t, err, "size", "missing", storage.ErrNotFound)
	_, err = s.GetRange(ctx, "missing", 0, 1)
	wantErr(t, err, "get_range", "missing", storage.ErrNotFound)
	if ok, err := s.Exists(ctx, "missing"); err != nil || ok {
		t.Fatalf("Exists(missing) = %v, %v; want false, nil", ok, err)
	}
}

func testPutGet(t *testing.T, s storage.Store) {
	ctx := t.Context()
	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}
	objects := map[string][]byte{
		"a":                                  []byte("hello"),
		"empty":                              {},
		"bin/all-bytes":                      binary,
		"deep/nested/dir/tree/file.lance":    []byte("data"),
		"with space/ünïcödé/v#1.2/x+y=z.bin": []byte("odd names"),
		"_versions/1.manifest":               []byte("manifest"),
	}
	for k, v := range objects {
		mustPut(t, s, k, v)
	}
	for k, v := range objects {
		mustGet(t, s, k, v)
		if n, err := s.Size(ctx, k); err != nil || n != int64(len(v)) {
			t.Fatalf("Size(%q) = %d, %v; want %d", k, n, err, len(v))
		}
		if ok, err := s.Exists(ctx, k); err != nil || !ok {
			t.Fatalf("Exists(%q) = %v, %v; want true", k, ok, err)
		}
	}
	// The store must own its copy: changing the caller's slice after Put changes nothing.
	buf := []byte("original")
	mustPut(t, s, "owned", buf)
	copy(buf, "XXXXXXXX")
	mustGet(t, s, "owned", []byte("original"))
	got, err := s.Get(ctx, "owned")
	if err != nil {
		t.Fatal(err)
	}
	copy(got, "YYYYYYYY")
	mustGet(t, s, "owned", []byte("original"))
}

// testLargeObject crosses the 16 MiB point where the S3 driver switches to multipart upload.
func testLargeObject(t *testing.T, s storage.Store) {
	data := make([]byte, 17<<20+123)
	for i := range data {
		data[i] = byte(i*7 + i>>16)
	}
	mustPut(t, s, "big/object", data)
	mustGet(t, s, "big/object", data)
	off := int64(16<<20 - 10)
	got, err := s.GetRange(t.Context(), "big/object", off, 1000)
	if err != nil || !bytes.Equal(got, data[off:off+1000]) {
		t.Fatalf("GetRange across part boundary: %s, %v", short(got), err)
	}
}

func testGetIfExists(t *testing.T, s storage.Store) {
	ctx := t.Context()
	data, ok, err := s.GetIfExists(ctx, "k")
	if err != nil || ok || data != nil {
		t.Fatalf("GetIfExists(absent) = %s, %v, %v; want nil, false, nil", short(data), ok, err)
	}
	mustPut(t, s, "k", []byte("v"))
	data, ok, err = s.GetIfExists(ctx, "k")
	if err != nil || !ok || string(data) != "v" {
		t.Fatalf("GetIfExists(present) = %s, %v, %v", short(data), ok, err)
	}
	mustPut(t, s, "empty", nil)
	data, ok, err = s.GetIfExists(ctx, "empty")
	if err != nil || !ok || len(data) != 0 {
		t.Fatalf("GetIfExists(empty object) = %s, %v, %v; want \"\", true, nil", short(data), ok, err)
	}
}

func testGetRange(t *testing.T, s storage.Store) {
	ctx := t.Context()
	mustPut(t, s, "r", []byte("0123456789"))
	for _, c := range []struct {
		off, n int64
		want   string
	}{{0, 10, "0123456789"}, {2, 3, "234"}, {9, 1, "9"}, {0, 1, "0"}, {0, 0, ""}, {4, 0, ""}, {10, 0, ""}} {
		got, err := s.GetRange(ctx, "r", c.off, c.n)
		if err != nil || string(got) != c.want || got == nil {
			t.Fatalf("GetRange(r, %d, %d) = %q (nil=%v), %v; want %q", c.off, c.n, got, got == nil, err, c.want)
		}
	}
	for _, c := range []struct{ off, n int64 }{{5, 10}, {0, 11}, {10, 1}, {11, 1}, {11, 0}, {1000, 5}} {
		got, err := s.GetRange(ctx, "r", c.off, c.n)
		if got != nil {
			t.Fatalf("GetRange(r, %d, %d) returned data %q with error %v", c.off, c.n, got, err)
		}
		wantErr(t, err, "get_range", "r", storage.ErrOutOfRange)
	}
	for _, c := range []struct{ off, n int64 }{{-1, 1}, {0, -1}} {
		_, err := s.GetRange(ctx, "r", c.off, c.n)
		wantErr(t, err, "get_range", "r", nil)
	}
}

func testPutOverwrite(t *testing.T, s storage.Store) {
	ctx := t.Context()
	mustPut(t, s, "o", []byte("a much longer first version"))
	mustPut(t, s, "o", []byte("v2"))
	mustGet(t, s, "o", []byte("v2"))
	if n, err := s.Size(ctx, "o"); err != nil || n != 2 {
		t.Fatalf("Size after overwrite = %d, %v; want 2", n, err)
	}
	mustList(t, s, "", "o")
}

func testPutIfAbsent(t *testing.T, s storage.Store) {
	ctx := t.Context()
	if err := s.PutIfAbsent(ctx, "_versions/1.manifest", []byte("first")); err != nil {
		t.Fatalf("first PutIfAbsent: %v", err)
	}
	err := s.PutIfAbsent(ctx, "_versions/1.manifest", []byte("second"))
	wantErr(t, err, "put_if_absent", "_versions/1.manifest", storage.ErrAlreadyExists)
	mustGet(t, s, "_versions/1.manifest", []byte("first"))

	// An object written by Put counts as existing too, even an empty one.
	mustPut(t, s, "p", nil)
	err = s.PutIfAbsent(ctx, "p", []byte("x"))
	wantErr(t, err, "put_if_absent", "p", storage.ErrAlreadyExists)
	mustGet(t, s, "p", []byte{})

	// Larger than one network buffer, to catch drivers that stream before checking.
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10)
	if err := s.PutIfAbsent(ctx, "big", big); err != nil {
		t.Fatalf("PutIfAbsent(big): %v", err)
	}
	err = s.PutIfAbsent(ctx, "big", []byte("small"))
	wantErr(t, err, "put_if_absent", "big", storage.ErrAlreadyExists)
	mustGet(t, s, "big", big)

	// After Delete the key is free again.
	if err := s.Delete(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "p", []byte("again")); err != nil {
		t.Fatalf("PutIfAbsent after Delete: %v", err)
	}
	mustGet(t, s, "p", []byte("again"))
	mustList(t, s, "", "_versions/1.manifest", "big", "p")
}

var tempName = regexp.MustCompile(`#[0-9]+$|\.[0-9a-f]{12,16}\.tmp$|\.attrs$`)

// AssertNoTempFiles fails t if any file under the local directory root is a temporary file
// ("<name>#<digits>", fileblob's "<name>.<hex>.tmp") or a fileblob ".attrs" sidecar.
func AssertNoTempFiles(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if tempName.MatchString(d.Name()) {
			t.Errorf("stray temporary file %s", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

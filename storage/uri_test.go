package storage

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A root is a local path (absolute, relative, or a relative path that only looks like a
// scheme behind "./") or a URI of a scheme Open takes, written in full. Everything else is a
// *URIError naming the root and what is wrong, and Open creates nothing for it: a mistyped
// cloud URI no longer becomes a local directory.
func TestStrictURIs(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, ok := range []string{"/abs/dir", "rel/dir", "./s3:x", "dir/with:colon", "file:///abs", "file://localhost/abs",
		"mem://n", "mem://n/p", "s3://bucket", "s3://bucket/p?region=x", "gs://b/p", "azblob://c", "S3://bucket"} {
		if err := CheckURI(ok); err != nil {
			t.Errorf("CheckURI(%q): %v", ok, err)
		}
	}
	for _, c := range []struct{ uri, says string }{
		{"", "empty"},
		{"s3:/bucket/x", "malformed s3 URI: want s3://bucket"},
		{"s3:x", "malformed s3 URI"},
		{"s3:", "malformed s3 URI"},
		{"gs:/b", "malformed gs URI: want gs://bucket"},
		{"file:/abs", "malformed file URI: want file:///absolute/path"},
		{"foo://x", `unsupported scheme "foo"`},
		{"foo:x", `"foo" is no scheme this worker opens`},
		{"s3://", "missing bucket name: want s3://bucket"},
		{"s3:///prefix", "missing bucket name"},
		{"azblob://", "missing container name"},
		{"mem://", "mem URIs need a name"},
		{"file://relative/path", "not host"},
		{"s3://b/p?prefix=x", "put the prefix in the path"},
		{"s3://b/p#frag", "no #fragment"},
		{"s3://user:secret@b/p", "no user@ part"},
		{"s3://b/a/../c", "invalid key"},
	} {
		err := CheckURI(c.uri)
		var ue *URIError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("CheckURI(%q) = %v, want a URIError saying %q", c.uri, err, c.says)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("CheckURI(%q) shows the password: %v", c.uri, err)
		}
		for _, opts := range [][]Option{nil, {MustExist()}} {
			if st, err := Open(context.Background(), c.uri, opts...); !errors.As(err, &ue) {
				if st != nil {
					st.Close()
				}
				t.Errorf("Open(%q) = %v, want the URIError", c.uri, err)
			}
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("refused roots created %v", ents)
	}
	// A relative path that looks like a scheme behind ./ is a directory of that name.
	st, err := Open(context.Background(), "./s3:x")
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := os.Stat(filepath.Join(dir, "s3:x")); err != nil {
		t.Fatal(err)
	}
}

// LocalPath names the directory of a local root only.
func TestLocalPath(t *testing.T) {
	wd, _ := os.Getwd()
	for uri, want := range map[string]string{"/a/b/": "/a/b", "rel": filepath.Join(wd, "rel"), "file:///a/b": "/a/b", "file://localhost/a": "/a",
		"mem://x": "", "s3://b/p": "", "s3:/b": "", "": ""} {
		got, ok := LocalPath(uri)
		if got != want || ok != (want != "") {
			t.Errorf("LocalPath(%q) = %q %v, want %q", uri, got, ok, want)
		}
	}
}

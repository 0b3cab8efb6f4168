//go:build unix

package storage

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// openFile, createEmpty and readFile keep what callers rely on from os.OpenFile and os.ReadFile:
// the errors fs.ErrNotExist and fs.ErrExist match, O_EXCL holds, the mode is applied, and the
// descriptor is blocking (a non-blocking one that the runtime does not poll would fail reads
// with EAGAIN) and closed across exec.
func TestOpenFileKeepsOpenFileSemantics(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "f")

	if _, err := openFile(name, os.O_RDONLY, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open of a missing file: %v, want fs.ErrNotExist", err)
	}
	var pe *fs.PathError
	if _, err := openFile(name, os.O_RDONLY, 0); !errors.As(err, &pe) || pe.Op != "open" || pe.Path != name {
		t.Fatalf("open of a missing file: %#v, want a *fs.PathError naming the open and the path", err)
	}

	if err := createEmpty(name, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := createEmpty(name, 0o640); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second createEmpty: %v, want fs.ErrExist", err)
	}
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 0 || fi.Mode().Perm()&^0o640 != 0 {
		t.Fatalf("created %v, %d bytes; want an empty file within mode 0640", fi.Mode(), fi.Size())
	}
	if _, err := openFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("O_EXCL open of an existing file: %v, want fs.ErrExist", err)
	}

	f, err := openFile(name, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte("0123456789"), 1000)
	if _, err := f.Write(want); err != nil {
		t.Fatal(err)
	}
	flags, err := fcntl(f.Fd(), syscall.F_GETFD)
	if err != nil {
		t.Fatal(err)
	}
	if flags&syscall.FD_CLOEXEC == 0 {
		t.Fatal("descriptor not close-on-exec")
	}
	if status, err := fcntl(f.Fd(), syscall.F_GETFL); err != nil || status&syscall.O_NONBLOCK != 0 {
		t.Fatalf("descriptor status flags %#x, %v: want blocking", status, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	got, err := readFile(name)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("readFile: %d bytes, %v; want the %d written", len(got), err, len(want))
	}
	if got, err := readFile(dir); !errors.Is(err, syscall.EISDIR) {
		t.Fatalf("readFile of a directory: %d bytes, %v; want EISDIR", len(got), err)
	}
	empty := filepath.Join(dir, "empty")
	if err := createEmpty(empty, 0o666); err != nil {
		t.Fatal(err)
	}
	if got, err := readFile(empty); err != nil || len(got) != 0 {
		t.Fatalf("readFile of an empty file: %q, %v", got, err)
	}
}

func fcntl(fd uintptr, cmd int) (int, error) {
	r, _, errno := syscall.Syscall(syscall.SYS_FCNTL, fd, uintptr(cmd), 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

// BenchmarkOpenRead is an open, a 100-byte read and a close of a local file through os.Open and
// through openFile.
func BenchmarkOpenRead(b *testing.B) {
	name := filepath.Join(b.TempDir(), "f")
	if err := os.WriteFile(name, make([]byte, 4096), 0o644); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 100)
	for _, c := range []struct {
		name string
		open func() (*os.File, error)
	}{
		{"os.Open", func() (*os.File, error) { return os.Open(name) }},
		{"openFile", func() (*os.File, error) { return openFile(name, os.O_RDONLY, 0) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				f, err := c.open()
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.ReadAt(buf, 10); err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		})
	}
}

// Package proctest is what the suites that run real processes share: the binaries they start
// (the worker, nats-server, gofakes3), built once per test binary, and free loopback ports.
package proctest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Packages the suites build, by the name they are run under.
const (
	Worker     = "github.com/omnigraph/omnigraph-worker/cmd/worker"
	NATSServer = "github.com/nats-io/nats-server/v2"
	GoFakeS3   = "github.com/johannesboyne/gofakes3/cmd/gofakes3"
)

// Main builds each package of bins into a temporary directory and sets the string it is keyed
// by to the binary's path, runs the tests and removes the directory: a suite's TestMain is
// this one call. A failed build ends the process with exit 2.
func Main(m *testing.M, bins map[*string]string) {
	dir, err := os.MkdirTemp("", "omnigraph-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for path, pkg := range bins {
		out := filepath.Join(dir, binaryName(pkg))
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build", pkg, err)
			os.RemoveAll(dir)
			os.Exit(2)
		}
		*path = out
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// binaryName is what `go build` names a package's binary: its last path element, or the one
// before a major version suffix (nats-server for github.com/nats-io/nats-server/v2).
func binaryName(pkg string) string {
	base := path.Base(pkg)
	if len(base) > 1 && base[0] == 'v' && strings.Trim(base[1:], "0123456789") == "" {
		return path.Base(path.Dir(pkg))
	}
	return base
}

// FreePort is a loopback TCP port nothing listens on now.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Output collects a child process's output while the test reads it.
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// PrivateTempDir points TMPDIR, for this process and every process it starts, at dir/tmp
// (made if missing): the official Lance engine's index builds leave their shuffle files, a
// hundred megabytes and more each, in the temporary directory, and in the system's they piled
// up run after run until the disk was full. Under dir they go with it.
func PrivateTempDir(dir string) error {
	tmp := filepath.Join(dir, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	return os.Setenv("TMPDIR", tmp)
}

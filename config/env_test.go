package config

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// envReaders are the calls that read the process environment.
var envReaders = regexp.MustCompile(`\b(os|syscall)\.(Getenv|LookupEnv|Environ)\(`)

// envAllowed says whether the file at rel (slash-separated, from the module root) may read
// the environment: config itself, the worker's main.go (which hands os.Getenv to config),
// the failpoints (armed by OMNIGRAPH_FAILPOINTS by design, before any config exists), and
// the test drivers under integration/, which are not the worker and pass the environment
// on to the processes they start.
func envAllowed(rel string) bool {
	return strings.HasPrefix(rel, "config/") || rel == "cmd/worker/main.go" ||
		strings.HasPrefix(rel, "internal/failpoint/") || strings.HasPrefix(rel, "integration/")
}

// TestOnlyConfigReadsTheEnvironment keeps every OMNIGRAPH_* setting in one loader: a package
// that read a variable of its own (as storage once read OMNIGRAPH_LOCAL_FSYNC in an init)
// would have a setting no flag or config file can set and no `-h` lists. Tests are not
// scanned: they re-run their own binary as a child and mark it by a variable.
func TestOnlyConfigReadsTheEnvironment(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found from the config package: %v", err)
	}
	scanned := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "testdata", "vendor":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		scanned++
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(src), "\n") {
			if envReaders.MatchString(line) && !envAllowed(rel) {
				t.Errorf("%s:%d reads the environment; take the value from config instead: %s", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scanned < 50 {
		t.Fatalf("only %d Go files scanned: the walk missed the module", scanned)
	}
}

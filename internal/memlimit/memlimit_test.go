package memlimit

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFromCgroup(t *testing.T) {
	write := func(dir, name, body string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v2, v2max, v1, v1none, none, junk := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	write(v2, "memory.max", "1073741824\n")
	write(v2max, "memory.max", "max\n")
	write(v1, "memory/memory.limit_in_bytes", "536870912\n")
	write(v1none, "memory/memory.limit_in_bytes", "9223372036854771712\n")
	write(junk, "memory.max", "lots\n")
	for _, c := range []struct {
		root  string
		limit int64
		ok    bool
	}{{v2, 1 << 30, true}, {v2max, 0, false}, {v1, 512 << 20, true}, {v1none, 0, false}, {none, 0, false}, {junk, 0, false}} {
		if limit, ok := FromCgroup(c.root); limit != c.limit || ok != c.ok {
			t.Errorf("%s: %d %v, want %d %v", c.root, limit, ok, c.limit, c.ok)
		}
	}
	if Soft(1000) != 900 {
		t.Fatal(Soft(1000))
	}
}

package buildinfo

import (
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/omnigraph/omnigraph-worker", Version: "v0.0.0-20260101120000-0123456789ab+dirty"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"}, {Key: "vcs.time", Value: "2026-01-01T12:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	in := fromBuildInfo(bi, "", "", "")
	want := Info{Version: "v0.0.0-20260101120000-0123456789ab+dirty", Commit: "0123456789abcdef0123456789abcdef01234567", Time: "2026-01-01T12:00:00Z", Modified: true, GoVersion: "go1.26.8"}
	if in != want {
		t.Fatalf("got %+v, want %+v", in, want)
	}
	if in.ShortCommit() != "0123456789ab" {
		t.Errorf("short commit %q", in.ShortCommit())
	}
	for _, s := range []string{"omnigraph-worker v0.0.0-20260101120000-0123456789ab+dirty\n", "commit:     0123456789abcdef0123456789abcdef01234567 (modified)", "build time: 2026-01-01T12:00:00Z", "go:         go1.26.8"} {
		if !strings.Contains(in.String(), s) {
			t.Errorf("String() %q lacks %q", in.String(), s)
		}
	}
	// -ldflags -X values win; a build with no information says unknown.
	in = fromBuildInfo(bi, "v1.2.3", "feedface", "2026-02-02T00:00:00Z")
	if in.Version != "v1.2.3" || in.Commit != "feedface" || in.Time != "2026-02-02T00:00:00Z" {
		t.Errorf("-X values not used: %+v", in)
	}
	in = fromBuildInfo(nil, "", "", "")
	if in.Version != Unknown || in.Commit != Unknown || in.Time != Unknown || in.GoVersion == "" {
		t.Errorf("no build info: %+v", in)
	}
	if l := in.Labels(); len(l) != 5 || l["modified"] != "false" {
		t.Errorf("labels %v", l)
	}
}

// TestBuiltBinaryKnowsItsCommit builds a tiny program in this module as `make build` builds the
// worker (-buildvcs=auto, which wins over a GOFLAGS of -buildvcs=false) and checks what Read
// gives it against git: the commit it was built from.
func TestBuiltBinaryKnowsItsCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skip("not in a git work tree:", err)
	}
	bin := t.TempDir() + "/printinfo"
	if out, err := exec.Command("go", "build", "-buildvcs=auto", "-o", bin, "./testdata/printinfo").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if m, _ := exec.Command("go", "version", "-m", bin).Output(); !strings.Contains(string(m), "vcs.revision=") {
		t.Skip("the toolchain stamped no VCS information here (a linked git worktree is not stamped)")
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 4 {
		t.Fatalf("output %q", out)
	}
	// Another commit may land between git rev-parse and go build in a shared tree: either is right.
	now, _ := exec.Command("git", "rev-parse", "HEAD").Output()
	commit := strings.TrimPrefix(lines[1], "commit:     ")
	commit = strings.TrimSuffix(commit, " (modified)")
	if commit != strings.TrimSpace(string(head)) && commit != strings.TrimSpace(string(now)) {
		t.Errorf("binary says commit %q, git says %s", commit, head)
	}
	if !strings.HasPrefix(lines[0], "omnigraph-worker v") || strings.Contains(lines[2], Unknown) {
		t.Errorf("version or time not stamped: %q", out)
	}
}

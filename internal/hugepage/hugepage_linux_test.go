package hugepage

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestKernelMode(t *testing.T) {
	for text, want := range map[string]string{
		"always [madvise] never\n": "madvise",
		"[always] madvise never\n": "always",
		"always madvise [never]\n": "never",
	} {
		got, err := kernelMode(writeFile(t, text))
		if err != nil || got != want {
			t.Errorf("kernelMode(%q) = %q, %v; want %q", text, got, err, want)
		}
	}
	if got, err := kernelMode(filepath.Join(t.TempDir(), "absent")); err != nil || got != "" {
		t.Errorf("no setting file: %q, %v; want no mode and no error", got, err)
	}
	if _, err := kernelMode(writeFile(t, "always madvise never\n")); err == nil || !strings.Contains(err.Error(), "no setting marked") {
		t.Errorf("unmarked setting: %v", err)
	}
}

func TestMemTotal(t *testing.T) {
	got, err := memTotal(writeFile(t, "MemTotal:       24684032 kB\nMemFree:        17923440 kB\n"))
	if err != nil || got != 24684032<<10 {
		t.Errorf("memTotal = %d, %v", got, err)
	}
	if _, err := memTotal(writeFile(t, "MemFree: 1 kB\n")); err == nil {
		t.Error("no MemTotal line: no error")
	}
	if _, err := memTotal(writeFile(t, "MemTotal: lots\n")); err == nil {
		t.Error("MemTotal not a number: no error")
	}
}

// Only a kernel that gives huge pages on request is advised: with "always" every page may be
// huge already, with "never" none can be, and an unreadable setting is an error, not a guess.
func TestAdviseHeapOnlyOnRequestKernels(t *testing.T) {
	meminfo := writeFile(t, "MemTotal: 8388608 kB\n")
	for _, mode := range []string{"always", "never"} {
		setting := writeFile(t, strings.Replace("always madvise never", mode, "["+mode+"]", 1))
		r, err := adviseHeap(64<<20, setting, meminfo, t.TempDir())
		if err != nil || r.Mode != mode || r.Advised != 0 {
			t.Errorf("%s: %+v, %v; want the mode and nothing advised", mode, r, err)
		}
	}
	if r, err := adviseHeap(64<<20, filepath.Join(t.TempDir(), "absent"), meminfo, t.TempDir()); err != nil || r != (Result{}) {
		t.Errorf("no setting: %+v, %v", r, err)
	}
	if _, err := adviseHeap(64<<20, writeFile(t, "garbled"), meminfo, t.TempDir()); err == nil {
		t.Error("garbled setting: no error")
	}
}

// The span is capped at a quarter of the machine's memory, in whole huge pages.
func TestSpanBytes(t *testing.T) {
	for _, c := range []struct{ n, total, want int }{
		{1 << 30, 64 << 20, 16 << 20},
		{1 << 30, 0, 1 << 30},
		{1 << 30, 64 << 30, 1 << 30},
		{3<<20 + 5, 0, 2 << 20},
		{1 << 20, 0, 0},
		{1 << 30, 6 << 20, 0},
	} {
		if got := spanBytes(c.n, c.total); got != c.want {
			t.Errorf("spanBytes(%d, %d) = %d, want %d", c.n, c.total, got, c.want)
		}
	}
}

// The memory a span is a quarter of is the machine's, or a container's limit when less.
func TestMemoryOfFollowsTheContainerLimit(t *testing.T) {
	meminfo, cgroup := writeFile(t, "MemTotal: 8388608 kB\n"), t.TempDir() // 8 GiB
	if got := memoryOf(meminfo, cgroup); got != 8<<30 {
		t.Errorf("no cgroup limit: %d, want the machine's 8 GiB", got)
	}
	if err := os.WriteFile(filepath.Join(cgroup, "memory.max"), []byte("536870912\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := memoryOf(meminfo, cgroup); got != 512<<20 {
		t.Errorf("512 MiB container: %d, want its limit", got)
	}
	if got := spanBytes(1<<30, memoryOf(meminfo, cgroup)); got != 128<<20 {
		t.Errorf("512 MiB container: span %d, want a quarter of it", got)
	}
	if got := spanBytes(64<<20, memoryOf(meminfo, cgroup)); got != 64<<20 {
		t.Errorf("512 MiB container, 64 MiB asked: span %d", got)
	}
	if got := spanBytes(0, memoryOf(meminfo, cgroup)); got != 0 {
		t.Errorf("turned off: span %d", got)
	}
	if got := memoryOf(filepath.Join(t.TempDir(), "absent"), cgroup); got != 512<<20 {
		t.Errorf("no meminfo, 512 MiB container: %d, want its limit", got)
	}
	if err := os.WriteFile(filepath.Join(cgroup, "memory.max"), []byte("68719476736\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := memoryOf(meminfo, cgroup); got != 8<<30 {
		t.Errorf("64 GiB container on an 8 GiB machine: %d, want the machine's", got)
	}
}

var garbage []byte

// A heap that already holds free memory is not advised: the span could be made of those
// pages, which the runtime clears (touching every one) before it hands them out.
func TestAdviseHeapRefusesAHeapWithFreeMemory(t *testing.T) {
	mode, err := kernelMode(enabledPath)
	if err != nil {
		t.Fatal(err)
	}
	garbage = make([]byte, 64<<20)
	garbage = nil
	runtime.GC()
	// Asked for 1 GiB on a machine of 256 MiB: the span is 64 MiB, and the heap's free 64 MiB
	// could hold it (the check is against the span, not the request).
	r, err := adviseHeap(1<<30, enabledPath, writeFile(t, "MemTotal: 262144 kB\n"), t.TempDir())
	if mode != "madvise" {
		if err != nil || r.Advised != 0 {
			t.Errorf("kernel %q: %+v, %v", mode, r, err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), "free bytes") || r.Advised != 0 {
		t.Errorf("a heap with 64 MiB free: %+v, %v; want nothing advised and why", r, err)
	}
}

// childEnv makes the test binary the child of TestAdvisedHeapFaultsInHugePages.
const childEnv = "HUGEPAGE_TEST_CHILD"

type childReport struct {
	Result
	Faults        int64 // minor faults while touching the 64 MiB
	AnonHugePages int64 // bytes, /proc/self/smaps_rollup after
}

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

// child runs as a worker's main does: AdviseHeap first (then again, which does nothing), then
// a heap that grows.
func child() int {
	r, err := AdviseHeap(256 << 20)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if again, err := AdviseHeap(512 << 20); again != r || err != nil {
		fmt.Fprintf(os.Stderr, "a second call did not return the first's result: %+v, %v\n", again, err)
		return 1
	}
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	b := make([]byte, 64<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	rep := childReport{Result: r, Faults: after.Minflt - before.Minflt, AnonHugePages: anonHuge()}
	_ = json.NewEncoder(os.Stdout).Encode(rep)
	return int(b[0]) - 1
}

func anonHuge() int64 {
	b, _ := os.ReadFile("/proc/self/smaps_rollup")
	for _, line := range strings.Split(string(b), "\n") {
		if n, ok := anonHugeField(line); ok {
			return n
		}
	}
	return -1
}

// anonHugeField reads an "AnonHugePages:   N kB" line of smaps or smaps_rollup, in bytes (-1
// if N is not a number).
func anonHugeField(line string) (int64, bool) {
	rest, ok := strings.CutPrefix(line, "AnonHugePages:")
	if !ok {
		return 0, false
	}
	kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
	if err != nil {
		return -1, true
	}
	return kb << 10, true
}

// A process that advises its heap first touches 64 MiB of new heap in huge pages: a few dozen
// faults instead of 16,384. Run in a child process, as AdviseHeap must come before the heap
// has free memory of its own (the test binary's has).
func TestAdvisedHeapFaultsInHugePages(t *testing.T) {
	mode, err := kernelMode(enabledPath)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	var rep childReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("child's report %q: %v", out, err)
	}
	t.Logf("kernel %q: %+v", mode, rep)
	if rep.Mode != mode {
		t.Fatalf("child read mode %q, the kernel says %q", rep.Mode, mode)
	}
	switch mode {
	case "madvise":
		if rep.Advised != 256<<20 {
			t.Errorf("advised %d bytes, want 256 MiB", rep.Advised)
		}
		// 64 MiB in 4 KiB pages is 16,384 faults; in 2 MiB pages 32 (and a few for the
		// runtime's own bookkeeping). The kernel falls back to small pages where it finds no
		// free huge page; a quarter of the small-page count still proves most were huge. (Under
		// the race detector its shadow memory faults in small pages: only the huge pages count.)
		if (!raceEnabled && rep.Faults > 4096) || rep.AnonHugePages < 32<<20 {
			t.Errorf("64 MiB of advised heap took %d faults, %d bytes in huge pages", rep.Faults, rep.AnonHugePages)
		}
	default:
		if rep.Advised != 0 {
			t.Errorf("kernel %q: advised %d bytes", mode, rep.Advised)
		}
	}
}

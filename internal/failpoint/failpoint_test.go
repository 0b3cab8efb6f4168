package failpoint

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestInjectOffIsNil(t *testing.T) {
	Reset()
	if err := Inject("nothing"); err != nil {
		t.Fatalf("unarmed point returned %v", err)
	}
}

func TestErrorAndCounts(t *testing.T) {
	t.Cleanup(Reset)
	if err := Enable("a", "1+2*error"); err != nil {
		t.Fatal(err)
	}
	var got []bool
	for i := 0; i < 5; i++ {
		got = append(got, IsInjected(Inject("a")))
	}
	want := []bool{false, true, true, false, false}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("hit %d: injected=%v want %v (all %v)", i, got[i], want[i], got)
		}
	}
	if err := Inject("b"); err != nil {
		t.Fatalf("other point fired: %v", err)
	}
	if Hits("a") != 5 || Hits("b") != 0 {
		t.Fatalf("hits a=%d b=%d, want every pass counted, fired or not, and none unarmed", Hits("a"), Hits("b"))
	}
	Disable("a")
	if Hits("a") != 0 {
		t.Fatalf("a disarmed point reports %d hits", Hits("a"))
	}
	if err := Inject("a"); err != nil {
		t.Fatalf("disabled point fired: %v", err)
	}
}

// error(ERRNO) injects a failure that is also that errno, for routing tests.
func TestErrorWithErrno(t *testing.T) {
	t.Cleanup(Reset)
	if err := Enable("a", "error(ENOSPC)"); err != nil {
		t.Fatal(err)
	}
	err := Inject("a")
	if !IsInjected(err) || !errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EROFS) || err.Error() != "failpoint a: injected failure: no space left on device" {
		t.Fatalf("%v", err)
	}
	if err := Enable("b", "error"); err != nil {
		t.Fatal(err)
	}
	if err := Inject("b"); errors.Unwrap(err) != nil {
		t.Fatalf("plain error wraps %v", errors.Unwrap(err))
	}
}

func TestBadSpecs(t *testing.T) {
	for _, spec := range []string{"x", "a=explode", "a=0*error", "a=sleep(x)", "a=-1+error", "=error", "a=error(EFOO)", "a=error("} {
		if err := parseAndArm(spec); err == nil {
			t.Errorf("spec %q accepted", spec)
		}
		Reset()
	}
}

func TestPanic(t *testing.T) {
	t.Cleanup(Reset)
	_ = Enable("p", "panic")
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("no panic")
		}
	}()
	_ = Inject("p")
}

// TestKillFromEnvironment arms a point through the environment in a child process and checks
// that the child dies by SIGKILL at that point and not before.
func TestKillFromEnvironment(t *testing.T) {
	if os.Getenv("FAILPOINT_CHILD") == "1" {
		os.Stdout.WriteString("before\n")
		_ = Inject("child.die")
		os.Stdout.WriteString("after\n")
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillFromEnvironment$")
	cmd.Env = append(os.Environ(), "FAILPOINT_CHILD=1", EnvVar+"=child.die=kill")
	out, err := cmd.Output()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != -1 {
		t.Fatalf("child did not die by signal: err=%v out=%q", err, out)
	}
	if string(out) != "before\n" {
		t.Fatalf("child output %q, want only the line before the point", out)
	}
}

func BenchmarkInjectOff(b *testing.B) {
	Reset()
	for i := 0; i < b.N; i++ {
		_ = Inject("storage.put")
	}
}

// TestStopFreezesUntilContinued runs a child that hits a "stop" point: it must be stopped
// (state T) with nothing printed after the point, and go on once it gets SIGCONT.
func TestStopFreezesUntilContinued(t *testing.T) {
	if os.Getenv("FAILPOINT_STOP_CHILD") == "1" {
		_ = Inject("p")
		os.Stdout.WriteString("resumed\n")
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestStopFreezesUntilContinued$")
	cmd.Env = append(os.Environ(), "FAILPOINT_STOP_CHILD=1", EnvVar+"=p=stop")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if stopped = processStopped(cmd.Process.Pid); stopped {
			break
		}
	}
	if !stopped {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("the child never stopped at its point")
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	if string(got) != "resumed\n" {
		t.Fatalf("child printed %q, want resumed", got)
	}
}

// processStopped reads the state letter of /proc/PID/stat.
func processStopped(pid int) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(raw), ')')
	return i > 0 && i+2 < len(raw) && (raw[i+2] == 'T' || raw[i+2] == 't')
}

// Package failpoint provides named fault-injection points that are compiled into every build
// and cost one atomic load when nothing is armed.
//
// Points are armed from the environment variable OMNIGRAPH_FAILPOINTS, read once at start-up,
// or from tests with Enable. The variable holds a semicolon-separated list of name=action
// pairs, for example:
//
//	OMNIGRAPH_FAILPOINTS='storage.put=error;load.after_sidecar=kill'
//
// Actions:
//
//	error          return an *Error from Inject
//	error(ERRNO)   the same, wrapping that errno (ENOSPC, EROFS, EACCES, ENAMETOOLONG, EIO, ...):
//	               a disk full or a read-only root where the test cannot make one
//	kill           SIGKILL the current process (crash tests: nothing runs after this point)
//	panic          panic with the point's name
//	sleep(MS)      sleep MS milliseconds, then continue
//	stop           SIGSTOP the current process: every goroutine freezes (lease renewals too)
//	               until someone sends SIGCONT, then the point returns nil and the step goes
//	               on; this is how a test makes a writer that is paused, not dead (a zombie)
//	N*ACTION       fire ACTION on the first N hits only, then go quiet
//	SKIP+ACTION    let the first SKIP hits pass, then fire ACTION (combines with N*: 2+1*kill)
package failpoint

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// EnvVar names the environment variable that arms failpoints at process start.
const EnvVar = "OMNIGRAPH_FAILPOINTS"

// Error is what Inject returns for an armed "error" action. Errno, when set, is the system
// error it stands for (errors.Is finds it), so callers route it as they would the real one.
type Error struct {
	Name  string
	Errno syscall.Errno
}

func (e *Error) Error() string {
	if e.Errno != 0 {
		return "failpoint " + e.Name + ": injected failure: " + e.Errno.Error()
	}
	return "failpoint " + e.Name + ": injected failure"
}

// Unwrap is the injected errno, or nil.
func (e *Error) Unwrap() error {
	if e.Errno == 0 {
		return nil
	}
	return e.Errno
}

// errnos are the errors error(NAME) can inject.
var errnos = map[string]syscall.Errno{
	"ENOSPC": syscall.ENOSPC, "EDQUOT": syscall.EDQUOT, "EROFS": syscall.EROFS, "EACCES": syscall.EACCES, "EPERM": syscall.EPERM,
	"ENAMETOOLONG": syscall.ENAMETOOLONG, "EIO": syscall.EIO, "ETIMEDOUT": syscall.ETIMEDOUT, "ECONNRESET": syscall.ECONNRESET,
}

// IsInjected reports whether err is, or wraps, an injected failure.
func IsInjected(err error) bool {
	var fe *Error
	return errors.As(err, &fe)
}

type kind int

const (
	kindError kind = iota
	kindKill
	kindPanic
	kindSleep
	kindStop
)

type point struct {
	kind  kind
	errno syscall.Errno
	sleep time.Duration
	skip  int64 // hits to let pass before firing
	count int64 // fires left; <0 = unlimited
	hits  atomic.Int64
}

var (
	armed  atomic.Bool // fast path: false means no point is armed anywhere
	mu     sync.Mutex
	points = map[string]*point{}
)

func init() {
	if spec := os.Getenv(EnvVar); spec != "" {
		if err := parseAndArm(spec); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", EnvVar, err)
			os.Exit(2)
		}
	}
}

func parseAndArm(spec string) error {
	for _, item := range strings.Split(spec, ";") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, action, ok := strings.Cut(item, "=")
		if !ok {
			return fmt.Errorf("%q: want name=action", item)
		}
		if err := Enable(strings.TrimSpace(name), strings.TrimSpace(action)); err != nil {
			return err
		}
	}
	return nil
}

func parseAction(action string) (*point, error) {
	p := &point{count: -1}
	if before, after, ok := strings.Cut(action, "+"); ok {
		n, err := strconv.ParseInt(before, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("action %q: bad skip count", action)
		}
		p.skip, action = n, after
	}
	if before, after, ok := strings.Cut(action, "*"); ok {
		n, err := strconv.ParseInt(before, 10, 64)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("action %q: bad fire count", action)
		}
		p.count, action = n, after
	}
	switch {
	case action == "error":
		p.kind = kindError
	case strings.HasPrefix(action, "error(") && strings.HasSuffix(action, ")"):
		e, ok := errnos[action[len("error("):len(action)-1]]
		if !ok {
			return nil, fmt.Errorf("action %q: unknown errno", action)
		}
		p.kind, p.errno = kindError, e
	case action == "kill":
		p.kind = kindKill
	case action == "panic":
		p.kind = kindPanic
	case action == "stop":
		p.kind = kindStop
	case strings.HasPrefix(action, "sleep(") && strings.HasSuffix(action, ")"):
		ms, err := strconv.Atoi(action[len("sleep(") : len(action)-1])
		if err != nil || ms < 0 {
			return nil, fmt.Errorf("action %q: bad sleep", action)
		}
		p.kind, p.sleep = kindSleep, time.Duration(ms)*time.Millisecond
	default:
		return nil, fmt.Errorf("action %q: want error, error(ERRNO), kill, panic, stop or sleep(MS)", action)
	}
	return p, nil
}

// Enable arms the named point with an action (see the package comment).
func Enable(name, action string) error {
	if name == "" {
		return errors.New("failpoint: empty name")
	}
	p, err := parseAction(action)
	if err != nil {
		return fmt.Errorf("failpoint %s: %w", name, err)
	}
	mu.Lock()
	points[name] = p
	armed.Store(true)
	mu.Unlock()
	return nil
}

// Disable disarms the named point.
func Disable(name string) {
	mu.Lock()
	delete(points, name)
	armed.Store(len(points) > 0)
	mu.Unlock()
}

// Reset disarms every point.
func Reset() {
	mu.Lock()
	points = map[string]*point{}
	armed.Store(false)
	mu.Unlock()
}

// Hits is how many times the named point was reached since it was armed, fired or not; 0
// when it is not armed. A test waits on it to act while a step is under way, not before it.
func Hits(name string) int64 {
	mu.Lock()
	p := points[name]
	mu.Unlock()
	if p == nil {
		return 0
	}
	return p.hits.Load()
}

// Inject runs the named point: nil when it is not armed (the common case, one atomic load),
// otherwise the armed action.
func Inject(name string) error {
	if !armed.Load() {
		return nil
	}
	return fire(name)
}

func fire(name string) error {
	mu.Lock()
	p := points[name]
	mu.Unlock()
	if p == nil {
		return nil
	}
	hit := p.hits.Add(1)
	if hit <= p.skip {
		return nil
	}
	if p.count >= 0 && hit > p.skip+p.count {
		return nil
	}
	switch p.kind {
	case kindKill:
		// A real crash: no deferred function, no buffered write, nothing after this point runs.
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is asynchronous; never return into the caller
	case kindPanic:
		panic("failpoint " + name)
	case kindSleep:
		time.Sleep(p.sleep)
		return nil
	case kindStop:
		// Say where, so a test that waits for the stop knows which step it froze at.
		fmt.Fprintf(os.Stderr, "failpoint %s: stopping (SIGSTOP)\n", name)
		stopUntilContinued()
		return nil
	}
	return &Error{Name: name, Errno: p.errno}
}

// stopUntilContinued stops the process and returns once it has been continued. kill(2) only
// queues SIGSTOP: the group stop happens when some thread of the process takes the signal,
// which on a loaded host can be milliseconds after kill returns. Returning at once let the
// step after the point run in that window (a zombie's fence check passed and its sidecar put
// landed half before the freeze, half after). Waiting for SIGCONT, which only comes after the
// stop took effect, keeps everything after the point behind the freeze.
func stopUntilContinued() {
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
	defer signal.Stop(cont)
	_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	<-cont
}

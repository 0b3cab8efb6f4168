package storage_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// statusErr stands for a cloud SDK's HTTP response error.
type statusErr int

func (e statusErr) Error() string       { return fmt.Sprintf("HTTP %d", int(e)) }
func (e statusErr) HTTPStatusCode() int { return int(e) }

// Real failures of a local root, injected errnos and the cloud SDKs' status codes each land in
// the class a retry decision needs.
func TestClassify(t *testing.T) {
	t.Cleanup(failpoint.Reset)
	ctx := context.Background()
	st := openT(t, t.TempDir())
	tooLong := st.Put(ctx, strings.Repeat("n", 300), []byte("x"))
	if !errors.Is(tooLong, syscall.ENAMETOOLONG) {
		t.Fatalf("300-byte name: %v", tooLong)
	}
	inject := func(action string) error {
		if err := failpoint.Enable("storage.put", action); err != nil {
			t.Fatal(err)
		}
		defer failpoint.Reset()
		return st.Put(ctx, "k", []byte("x"))
	}
	cases := []struct {
		name string
		err  error
		want storage.Class
	}{
		{"name too long", tooLong, storage.Refused},
		{"invalid key", st.Put(ctx, "a/./b", nil), storage.Refused},
		{"injected EACCES", inject("error(EACCES)"), storage.Refused},
		{"injected ENOSPC", inject("error(ENOSPC)"), storage.Transient},
		{"injected EROFS", inject("error(EROFS)"), storage.Transient},
		{"injected EIO", inject("error(EIO)"), storage.Transient},
		{"directory sync failed", &storage.SyncError{Dir: "/r/data", Err: syscall.EIO}, storage.Transient},
		{"directory sync refused", &storage.SyncError{Dir: "/r/data", Err: syscall.EACCES}, storage.Transient}, // the process's, not the key's
		{"injected plain", inject("error"), storage.Unclassified},
		{"deadline", fmt.Errorf("get: %w", context.DeadlineExceeded), storage.Transient},
		{"connection reset", fmt.Errorf("read: %w", syscall.ECONNRESET), storage.Transient},
		{"short body", io.ErrUnexpectedEOF, storage.Transient},
		{"throttled", fmt.Errorf("put: %w", statusErr(429)), storage.Transient},
		{"unavailable", statusErr(503), storage.Transient},
		{"forbidden", statusErr(403), storage.Refused},
		{"other", errors.New("boom"), storage.Unclassified},
		{"nil", nil, storage.Unclassified},
	}
	for _, c := range cases {
		if got := storage.Classify(c.err); got != c.want {
			t.Errorf("%s (%v): %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

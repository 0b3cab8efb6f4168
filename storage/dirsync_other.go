//go:build !unix

package storage

import "github.com/omnigraph/omnigraph-worker/internal/failpoint"

// dirSyncFailed is true only for an injected failure: where directories are not unix ones
// (Windows refuses to flush a directory handle opened for reading) the file system makes a
// name durable itself, and a directory sync is best effort.
func dirSyncFailed(err error) bool { return failpoint.IsInjected(err) }

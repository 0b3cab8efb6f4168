//go:build unix

package storage

import (
	"errors"
	"syscall"
)

// dirSyncFailed reports whether err, from a directory's fsync, is a failure: not the refusal of
// a file system that does not sync directories (some network and FUSE file systems answer
// EINVAL or ENOTSUP), after which there is nothing a sync could have added.
func dirSyncFailed(err error) bool {
	for _, e := range []error{syscall.EINVAL, syscall.ENOTSUP, syscall.EOPNOTSUPP} {
		if errors.Is(err, e) {
			return false
		}
	}
	return true
}

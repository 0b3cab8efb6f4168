package storage

import (
	"errors"

	"golang.org/x/sys/unix"
)

// exchange swaps the names from and to in one step (renameat2 with RENAME_EXCHANGE); both
// must exist (a missing to is fs.ErrNotExist). swapped is false, with no error, on a file
// system that cannot exchange names.
func exchange(from, to string) (swapped bool, err error) {
	err = unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
		return false, nil
	}
	return err == nil, err
}

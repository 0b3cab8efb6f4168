//go:build !unix

package storage

import (
	"io/fs"
	"os"
)

// openFile is os.OpenFile; see openfile_unix.go for what it saves where it differs.
func openFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}

// createEmpty creates name, which must not exist, as an empty file, and closes it.
func createEmpty(name string, perm fs.FileMode) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	return f.Close()
}

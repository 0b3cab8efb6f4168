//go:build unix

package storage

import (
	"io/fs"
	"os"
	"syscall"
)

// openFile is os.OpenFile without the runtime poller. os.OpenFile puts every descriptor in
// non-blocking mode and offers it to epoll, which refuses regular files and directories, and
// then puts it back in blocking mode: four system calls (fcntl twice each way, epoll_ctl) beside
// the open. A local root opens files several times per commit (a spare made and then filled,
// every range read, every directory synced), and on the test VM a system call costs about a
// microsecond: an open, a read and a close took 12.4-12.8 µs through os.Open and 7.6-7.9 µs
// through openFile (BenchmarkOpenRead). A descriptor from os.NewFile is never polled, which is
// all a file on disk ever gets anyway.
func openFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	fd, err := sysOpen(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// createEmpty creates name, which must not exist, as an empty file, and closes it: two system
// calls where os.OpenFile and Close take seven.
func createEmpty(name string, perm fs.FileMode) error {
	fd, err := sysOpen(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if err := syscall.Close(fd); err != nil {
		return &fs.PathError{Op: "close", Path: name, Err: err}
	}
	return nil
}

// sysOpen is open(2) of name as os.OpenFile makes it: close-on-exec, retried when interrupted,
// its error a *fs.PathError.
func sysOpen(name string, flag int, perm fs.FileMode) (int, error) {
	for {
		fd, err := syscall.Open(name, flag|syscall.O_CLOEXEC, uint32(perm.Perm()))
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return fd, nil
	}
}

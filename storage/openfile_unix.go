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
	for {
		fd, err := syscall.Open(name, flag|syscall.O_CLOEXEC, uint32(perm.Perm()))
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return os.NewFile(uintptr(fd), name), nil
	}
}

// createEmpty creates name, which must not exist, as an empty file, and closes it: two system
// calls where os.OpenFile and Close take seven.
func createEmpty(name string, perm fs.FileMode) error {
	for {
		fd, err := syscall.Open(name, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC, uint32(perm.Perm()))
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "open", Path: name, Err: err}
		}
		if err := syscall.Close(fd); err != nil {
			return &fs.PathError{Op: "close", Path: name, Err: err}
		}
		return nil
	}
}

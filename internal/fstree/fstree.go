// Package fstree snapshots a local directory tree, so a test can say that an operation left
// every file as it was.
package fstree

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
)

// Snapshot lists every file under dir, one per line in path order: its path relative to dir
// and its size, and with mtimes also its modification time. Two snapshots are equal when no
// file was added, removed, resized (or, with mtimes, rewritten).
func Snapshot(dir string, mtimes bool) (string, error) {
	var lines []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %d", rel, info.Size())
		if mtimes {
			line += fmt.Sprintf(" %d", info.ModTime().UnixNano())
		}
		lines = append(lines, line)
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n"), err
}

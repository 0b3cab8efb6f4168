//go:build !linux

package storage

// exchange reports that this system offers no atomic exchange of two names; ReplaceIfUnchanged
// compares and renames instead.
func exchange(from, to string) (swapped bool, err error) { return false, nil }

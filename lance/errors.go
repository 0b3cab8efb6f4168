package lance

import (
	"errors"
	"fmt"
)

// FormatError reports a Lance file (manifest, transaction, deletion file) that cannot be decoded.
type FormatError struct {
	File   string
	Offset int64 // -1 when no single offset is to blame
	Reason string
}

func (e *FormatError) Error() string {
	if e.Offset >= 0 {
		return fmt.Sprintf("lance: %s: at byte %d: %s", e.File, e.Offset, e.Reason)
	}
	return fmt.Sprintf("lance: %s: %s", e.File, e.Reason)
}

// ErrorKind is "corrupt": a stored Lance file that does not decode is the dataset's fault and
// no retry of the operation reads it differently. Callers that route errors by a kind string
// use it.
func (e *FormatError) ErrorKind() string { return "corrupt" }

// CommitConflictError is returned when the version a staged transaction would create already
// exists: someone else committed first. Nothing of this transaction became visible.
type CommitConflictError struct {
	Dataset     string
	ReadVersion uint64
	Version     uint64
}

// ErrorKind is "read_set_changed": another writer committed the version first, so the work
// is to be planned again on what it wrote.
func (e *CommitConflictError) ErrorKind() string { return "read_set_changed" }

func (e *CommitConflictError) Error() string {
	return fmt.Sprintf("lance: %s: commit conflict: version %d already exists (transaction read version %d)", e.Dataset, e.Version, e.ReadVersion)
}

// VersionNotFoundError is returned when a requested version (or any version) does not exist.
type VersionNotFoundError struct {
	Dataset string
	Version uint64 // 0: the dataset has no versions at all
}

// ErrorKind is "corrupt": a version a caller asks for by number is one the graph (or the
// caller's own history) says exists, so its absence is damage to the dataset, not a reason to
// give up on the work that needed it. An operator restores it; the work then goes on.
func (e *VersionNotFoundError) ErrorKind() string { return "corrupt" }

func (e *VersionNotFoundError) Error() string {
	if e.Version == 0 {
		return fmt.Sprintf("lance: %s: no dataset here", e.Dataset)
	}
	return fmt.Sprintf("lance: %s: version %d not found", e.Dataset, e.Version)
}

// BranchError reports a branch operation refused: bad name, missing or existing branch.
type BranchError struct {
	Branch string
	Reason string
}

func (e *BranchError) Error() string { return fmt.Sprintf("lance: branch %q: %s", e.Branch, e.Reason) }

// branchExists is the Reason of a CreateBranch that found the ref there.
const branchExists = "already exists"

// Exists says the branch could not be created because its ref is already there.
func (e *BranchError) Exists() bool { return e.Reason == branchExists }

// ErrUnsupported marks a dataset feature this implementation does not read or write.
var ErrUnsupported = errors.New("lance: unsupported")

// RewriteConflictError is returned when a staged Rewrite cannot move onto a later version
// (Staged.Rebase): a fragment it replaces changed or went away since it read it, so its
// rewritten files hold rows as they were then. Nothing became visible; the files it wrote
// stay unreferenced.
type RewriteConflictError struct {
	Dataset     string
	ReadVersion uint64 // the version the rewrite read
	Version     uint64 // the version it was to move onto
	Fragment    uint64 // the fragment that changed (0 with Reason "schema")
	Reason      string
}

// ErrorKind is "read_set_changed": the rows the rewrite read changed under it.
func (e *RewriteConflictError) ErrorKind() string { return "read_set_changed" }

func (e *RewriteConflictError) Error() string {
	return fmt.Sprintf("lance: %s: the rewrite read at version %d cannot move onto version %d: %s", e.Dataset, e.ReadVersion, e.Version, e.Reason)
}

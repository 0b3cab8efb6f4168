// Package ids holds the identifiers of an OmniGraph graph root: table identities and the paths
// and __manifest object ids derived from them, graph commit ids (ULIDs), and branch keys.
package ids

import (
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// TableIdentity names one incarnation of a node or edge type. Neither part is ever zero.
type TableIdentity struct {
	StableTableID      uint64 `json:"stable_table_id"`
	TableIncarnationID uint64 `json:"table_incarnation_id"`
}

// String is the display form used inside object ids and error members.
func (t TableIdentity) String() string {
	return fmt.Sprintf("%016x:%016x", t.StableTableID, t.TableIncarnationID)
}

// Valid reports whether both parts are non-zero.
func (t TableIdentity) Valid() bool { return t.StableTableID != 0 && t.TableIncarnationID != 0 }

// TablePath is the dataset path of a table relative to the graph root.
func TablePath(typeKey string, t TableIdentity) string {
	dir := "nodes"
	if strings.HasPrefix(typeKey, "edge:") {
		dir = "edges"
	}
	return fmt.Sprintf("%s/%016x-%016x", dir, t.StableTableID, t.TableIncarnationID)
}

// Object ids of __manifest rows.
func TableObjectID(t TableIdentity) string { return "table:" + t.String() }

func TableVersionObjectID(t TableIdentity, v uint64) string {
	return fmt.Sprintf("table_version:%s:%020d", t, v)
}

func TombstoneObjectID(t TableIdentity, v uint64) string {
	return fmt.Sprintf("table_tombstone:%s:%020d", t, v)
}

// GraphHeadObjectID is the head row of a branch ("" and "main" both mean main).
func GraphHeadObjectID(branch string) string { return "graph_head:" + BranchKey(branch) }

// BranchKey normalises a branch name: main for "" or "main".
func BranchKey(branch string) string {
	if branch == "" {
		return "main"
	}
	return branch
}

// BranchPtr is the nullable form the manifest and sidecars use: nil for main.
func BranchPtr(branch string) *string {
	if branch == "" || branch == "main" {
		return nil
	}
	b := branch
	return &b
}

var (
	ulidMu      sync.Mutex
	ulidEntropy = ulid.Monotonic(rand.Reader, 0)
)

// NewULID mints a canonical uppercase ULID, monotonic within this process.
func NewULID() string {
	ulidMu.Lock()
	defer ulidMu.Unlock()
	return ulid.MustNew(ulid.Timestamp(time.Now()), ulidEntropy).String()
}

// IsULID reports whether s is a canonical 26-character ULID.
func IsULID(s string) bool {
	if len(s) != 26 {
		return false
	}
	id, err := ulid.ParseStrict(s)
	return err == nil && id.String() == s
}

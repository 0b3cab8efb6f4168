// Package errs holds the typed errors every layer of the worker may return and route on.
//
// Each type carries exactly the fields the reference engine's error variant carries
// (docs/omnigraph-format.md §3), under CamelCase Go names with the reference's
// snake_case names as JSON tags, so the worker can copy them into a dead-letter header.
// Every type is returned as a pointer (*KeyConflict, …) and found with errors.As through
// any amount of fmt.Errorf("…: %w") wrapping.
//
// Kind, Detail and Permanent read the first typed error in the chain (errors.As order); types
// of other packages declare their kind through Classified. What each kind means for the worker
// and the CLI (permanence, operator, exit code, dead-letter reason) is the catalogue's
// (catalogue.go): the one list docs, help and routing derive from.
package errs

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Stable kinds returned by Kind for this package's types. The dead-letter subject suffix uses
// them (docs/omnigraph-format.md §3: key_conflict, resource_limit, invalid, branch_missing, …).
const (
	KindKeyConflict                     = "key_conflict"
	KindResourceLimit                   = "resource_limit"
	KindRecoveryRequired                = "recovery_required"
	KindReadSetChanged                  = "read_set_changed"
	KindPublishedDatasetVersionMismatch = "published_dataset_version_mismatch"
	KindBranchMissing                   = "branch_missing"
	KindInvalid                         = "invalid"
	KindMergeConflict                   = "merge_conflict"
	KindMsgIDReused                     = "msg_id_reused"
	KindStorageRefused                  = "storage_refused"
	KindRetryExhausted                  = "retry_exhausted"
	KindNotFound                        = "not_found"
	// KindUnknown is the kind of a non-nil error that carries no kind (storage, network,
	// context, …).
	KindUnknown = "unknown"
)

// typed is implemented by every error type of this package; errors.As into it finds the
// first typed error of a chain.
type typed interface {
	error
	kind() string
	detail() map[string]any
}

// KeyConflict: a strict insert (append mode) met an id that already exists, or one batch
// carried the same id twice in append/overwrite mode. Retrying will not upsert.
type KeyConflict struct {
	TypeKey  string  `json:"type_key"`            // "node:<Type>" or "edge:<Edge>"
	EntityID *string `json:"entity_id,omitempty"` // the exact id when known
}

// Error is the reference display: "node type 'X' already has this id".
func (e *KeyConflict) Error() string { return typeSubject(e.TypeKey) + " already has this id" }

func (e *KeyConflict) kind() string { return KindKeyConflict }
func (e *KeyConflict) detail() map[string]any {
	d := map[string]any{"type_key": e.TypeKey}
	if e.EntityID != nil {
		d["entity_id"] = *e.EntityID
	}
	return d
}

// ResourceLimitExceeded: a bounded input or plan went over an explicit ceiling before any
// effect. Resource is an opaque discriminator such as "graph_batch_line_bytes" or
// "keyed entities for node:Thing" (docs/omnigraph-format.md §2).
type ResourceLimitExceeded struct {
	Resource string `json:"resource"`
	Limit    uint64 `json:"limit"`
	Actual   uint64 `json:"actual"`
}

func (e *ResourceLimitExceeded) Error() string {
	return fmt.Sprintf("resource limit exceeded for %s: actual %d, limit %d", e.Resource, e.Actual, e.Limit)
}

func (e *ResourceLimitExceeded) kind() string { return KindResourceLimit }
func (e *ResourceLimitExceeded) detail() map[string]any {
	return map[string]any{"resource": e.Resource, "limit": e.Limit, "actual": e.Actual}
}

// MergeConflict is one entity a three-way branch merge cannot reconcile. Kind is one of
// divergent_insert, divergent_update, delete_vs_update (row merge) or orphan_edge,
// unique_violation, cardinality_violation, value_constraint_violation (merged-graph checks).
type MergeConflict struct {
	EntityKind string  `json:"entity_kind"` // "node" or "edge"
	TypeName   string  `json:"type_name"`
	EntityID   *string `json:"entity_id"`
	Kind       string  `json:"kind"`
	Message    string  `json:"message"`
}

// MergeConflicts: a branch merge found conflicts; nothing was published (all or nothing).
type MergeConflicts struct {
	Source    string          `json:"source"`
	Target    string          `json:"target"`
	Conflicts []MergeConflict `json:"merge_conflicts"`
}

func (e *MergeConflicts) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "merge of '%s' into '%s' has %d conflict(s): ", e.Source, e.Target, len(e.Conflicts))
	for i, c := range e.Conflicts {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(e.Conflicts)-3)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(c.Message)
	}
	return b.String()
}

func (e *MergeConflicts) kind() string { return KindMergeConflict }
func (e *MergeConflicts) detail() map[string]any {
	return map[string]any{"source": e.Source, "target": e.Target, "merge_conflicts": e.Conflicts}
}

// RecoveryRequired: a durable recovery intent (sidecar) overlaps this write, or this write's
// own intent stays behind after an effect. Recover first, then retry.
type RecoveryRequired struct {
	OperationID string `json:"operation_id"`
	Reason      string `json:"reason"`
}

func (e *RecoveryRequired) Error() string {
	return "recovery required for operation " + e.OperationID + ": " + e.Reason
}

func (e *RecoveryRequired) kind() string { return KindRecoveryRequired }
func (e *RecoveryRequired) detail() map[string]any {
	return map[string]any{"operation_id": e.OperationID, "reason": e.Reason}
}

// ReadSetChanged: a write-authority member (for example "graph_head:main") moved between
// preparation and the effect gate; nothing was written. Nil means the member was absent.
type ReadSetChanged struct {
	Member   string  `json:"member"`
	Expected *string `json:"expected"`
	Actual   *string `json:"actual"`
}

func (e *ReadSetChanged) Error() string {
	return fmt.Sprintf("write authority '%s' changed during preparation (expected %s, current %s) — reprepare from the current branch state",
		e.Member, orAbsent(e.Expected), orAbsent(e.Actual))
}

func (e *ReadSetChanged) kind() string { return KindReadSetChanged }
func (e *ReadSetChanged) detail() map[string]any {
	return map[string]any{"member": e.Member, "expected": ptrValue(e.Expected), "actual": ptrValue(e.Actual)}
}

// PublishedDatasetVersionMismatch: the caller's expected published version of one dataset is
// not the manifest's current one (a stale view; refresh and retry).
type PublishedDatasetVersionMismatch struct {
	TypeKey                         string `json:"type_key"`
	ExpectedPublishedDatasetVersion uint64 `json:"expected_published_dataset_version"`
	ActualPublishedDatasetVersion   uint64 `json:"actual_published_dataset_version"`
}

func (e *PublishedDatasetVersionMismatch) Error() string {
	return fmt.Sprintf("stale view of %s: expected published dataset version %d but current is %d — refresh and retry",
		datasetSubject(e.TypeKey), e.ExpectedPublishedDatasetVersion, e.ActualPublishedDatasetVersion)
}

func (e *PublishedDatasetVersionMismatch) kind() string { return KindPublishedDatasetVersionMismatch }
func (e *PublishedDatasetVersionMismatch) detail() map[string]any {
	return map[string]any{
		"type_key":                           e.TypeKey,
		"expected_published_dataset_version": e.ExpectedPublishedDatasetVersion,
		"actual_published_dataset_version":   e.ActualPublishedDatasetVersion,
	}
}

// BranchNotFound: the named graph branch does not exist (and no fork base was given).
type BranchNotFound struct {
	Branch string `json:"branch"`
}

func (e *BranchNotFound) Error() string { return "branch '" + e.Branch + "' not found" }

func (e *BranchNotFound) kind() string { return KindBranchMissing }
func (e *BranchNotFound) detail() map[string]any {
	return map[string]any{"branch": e.Branch}
}

// NotFound: a read named what the graph does not hold: a type its schema does not declare
// (TypeKey empty, Name the type given), or no row of a type under an id.
type NotFound struct {
	TypeKey string  `json:"type_key,omitempty"` // "node:<Type>" or "edge:<Edge>"; "" for an unknown type
	Name    string  `json:"name,omitempty"`     // the type name given, when no type has it
	ID      *string `json:"id,omitempty"`       // the id looked up
}

// Error names the type and the id: `node type 'Person' has no row with id "zed"`, or
// `no node or edge type 'Persn'`.
func (e *NotFound) Error() string {
	if e.TypeKey == "" {
		return "no node or edge type '" + e.Name + "'"
	}
	if e.ID == nil {
		return typeSubject(e.TypeKey) + " not found"
	}
	return typeSubject(e.TypeKey) + " has no row with id " + strconv.Quote(*e.ID)
}

func (e *NotFound) kind() string { return KindNotFound }
func (e *NotFound) detail() map[string]any {
	d := map[string]any{}
	if e.TypeKey != "" {
		d["type_key"] = e.TypeKey
	}
	if e.Name != "" {
		d["name"] = e.Name
	}
	if e.ID != nil {
		d["id"] = *e.ID
	}
	return d
}

// MsgIDReused: a message carries the id of a receipt already in the branch's manifest, but not
// its body (the payload hashes differ): a producer reused an id after JetStream's duplicate
// window. Taking it for a redelivery would drop the new body without a trace, so it is
// refused; the first body stays committed in GraphCommitID.
type MsgIDReused struct {
	MsgID                string `json:"msg_id"`
	PayloadSHA256        string `json:"payload_sha256"`         // this message's body
	AppliedPayloadSHA256 string `json:"applied_payload_sha256"` // the body the receipt recorded
	GraphCommitID        string `json:"graph_commit_id"`        // the commit that holds it
}

func (e *MsgIDReused) Error() string {
	return fmt.Sprintf("message id '%s' was already applied in commit %s with another body (sha256 %s, this one %s)",
		e.MsgID, e.GraphCommitID, e.AppliedPayloadSHA256, e.PayloadSHA256)
}

func (e *MsgIDReused) kind() string { return KindMsgIDReused }
func (e *MsgIDReused) detail() map[string]any {
	return map[string]any{"msg_id": e.MsgID, "payload_sha256": e.PayloadSHA256, "applied_payload_sha256": e.AppliedPayloadSHA256,
		"graph_commit_id": e.GraphCommitID}
}

// StorageRefused: the object store refused one key of this write for good (a key it does not
// accept, a name too long, a permission error on that key): the same write never succeeds.
// Cause is the store's error, kept for errors.Is/As.
type StorageRefused struct {
	Op     string `json:"op"`
	Key    string `json:"key"`
	Reason string `json:"reason"`
	Cause  error  `json:"-"`
}

func (e *StorageRefused) Error() string {
	return "storage refused " + e.Op + " of '" + e.Key + "': " + e.Reason
}
func (e *StorageRefused) Unwrap() error { return e.Cause }
func (e *StorageRefused) kind() string  { return KindStorageRefused }
func (e *StorageRefused) detail() map[string]any {
	return map[string]any{"op": e.Op, "key": e.Key, "reason": e.Reason}
}

// RetryExhausted: an error not known to be transient kept failing the same message past the
// retry budget. Last is the last error's text (the error is untyped: as a cause in the chain
// it would add nothing to Kind or Detail).
type RetryExhausted struct {
	Budget     string `json:"retry_budget"`
	FailingFor string `json:"failing_for"`
	Attempts   int    `json:"attempts"`
	Last       string `json:"last_error"`
}

func (e *RetryExhausted) Error() string {
	return fmt.Sprintf("retry budget %s spent: %d attempts over %s, last: %s", e.Budget, e.Attempts, e.FailingFor, e.Last)
}

func (e *RetryExhausted) kind() string { return KindRetryExhausted }
func (e *RetryExhausted) detail() map[string]any {
	return map[string]any{"retry_budget": e.Budget, "failing_for": e.FailingFor, "attempts": e.Attempts, "last_error": e.Last}
}

// InvalidInput: a framing or validation refusal of the batch itself.
type InvalidInput struct {
	Line   int    `json:"line"`   // 1-based batch line; 0 when not line-specific
	Field  string `json:"field"`  // e.g. "type", "data.name", "data.tags[2]"; "" for the whole line
	Reason string `json:"reason"` // what is wrong
}

// Error names the line, the field and the reason, for example
// `line 3, field "data.extra.x": duplicate JSON member 'x'`.
func (e *InvalidInput) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		b.WriteString("line ")
		b.WriteString(strconv.Itoa(e.Line))
	}
	if e.Field != "" {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString("field ")
		b.WriteString(strconv.Quote(e.Field))
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

func (e *InvalidInput) kind() string { return KindInvalid }
func (e *InvalidInput) detail() map[string]any {
	return map[string]any{"line": e.Line, "field": e.Field, "reason": e.Reason}
}

// LineError places an error (typically a *ResourceLimitExceeded, whose fields carry no line)
// on a 1-based batch line. It adds nothing to Kind, Detail or Permanent: they see through it.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return "line " + strconv.Itoa(e.Line) + ": " + e.Err.Error() }
func (e *LineError) Unwrap() error { return e.Err }

// Kind returns the routing kind of err: its first typed error of this package, else its first
// Classified error of another package; "" for nil, KindUnknown for an error chain with neither.
func Kind(err error) string {
	if err == nil {
		return ""
	}
	var t typed
	if errors.As(err, &t) {
		return t.kind()
	}
	if _, k, ok := classified(err); ok {
		return k
	}
	return KindUnknown
}

// Detail returns the fields of the error Kind reads as JSON-able values keyed by their
// snake_case names (uint64 stays uint64, absent optionals are nil or left out as the HTTP
// surface does); nil when err has no typed error, or its Classified error no ErrorDetail.
func Detail(err error) map[string]any {
	if err == nil {
		return nil
	}
	var t typed
	if errors.As(err, &t) {
		return t.detail()
	}
	if c, _, ok := classified(err); ok {
		if d, ok := c.(Detailed); ok {
			return d.ErrorDetail()
		}
	}
	return nil
}

// Permanent reports whether retrying the same input can never succeed, as the catalogue says
// for err's kind. Untyped errors, and errors that need an operator, may succeed later.
func Permanent(err error) bool { return err != nil && byKind[Kind(err)].Permanent }

// typeSubject renders a type key the way the reference does: "node type 'X'",
// "edge type 'X'", otherwise "dataset 'K'".
func typeSubject(typeKey string) string {
	if name, ok := strings.CutPrefix(typeKey, "node:"); ok {
		return "node type '" + name + "'"
	}
	if name, ok := strings.CutPrefix(typeKey, "edge:"); ok {
		return "edge type '" + name + "'"
	}
	return "dataset '" + typeKey + "'"
}

func datasetSubject(typeKey string) string {
	if strings.HasPrefix(typeKey, "node:") || strings.HasPrefix(typeKey, "edge:") {
		return "dataset for " + typeSubject(typeKey)
	}
	return "dataset '" + typeKey + "'"
}

func orAbsent(s *string) string {
	if s == nil {
		return "<absent>"
	}
	return *s
}

func ptrValue(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

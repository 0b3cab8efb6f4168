// Package recovery holds the v9 recovery sidecar: the write-ahead intent every graph write arms
// at __recovery/<operation_id>.json before it moves any Lance table HEAD, rewrites as
// EffectsConfirmed after its table commits, and deletes after the __manifest publish
// (docs/omnigraph-format.md §4).
//
// This file defines the envelope and its exact on-disk JSON: keys in the reference's field
// order, optional keys omitted exactly where the reference skips them, and the reference's
// pretty-printed layout (two-space indent, "key": value, no trailing newline). decode.go reads it
// back strictly, validate.go enforces the shape invariants, build.go, build_merge.go and
// build_schema.go construct and confirm Load, BranchMerge and SchemaApply sidecars, and io.go
// moves them through a storage.Store.
package recovery

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// SchemaVersion is the only sidecar generation this package writes or interprets.
const SchemaVersion uint32 = 9

// Dir is the sidecar directory relative to the graph root.
const Dir = "__recovery"

// WriterKind names the writer that armed a sidecar. Its JSON form is the PascalCase name.
type WriterKind string

const (
	Mutation      WriterKind = "Mutation"
	Load          WriterKind = "Load"
	SchemaApply   WriterKind = "SchemaApply"
	BranchMerge   WriterKind = "BranchMerge"
	EnsureIndices WriterKind = "EnsureIndices"
	Optimize      WriterKind = "Optimize"
)

func (k WriterKind) valid() bool {
	switch k {
	case Mutation, Load, SchemaApply, BranchMerge, EnsureIndices, Optimize:
		return true
	}
	return false
}

// EffectPhase is the durable phase of an exact effect set.
type EffectPhase string

const (
	// Armed is written before the first table HEAD moves.
	Armed EffectPhase = "Armed"
	// EffectsConfirmed is written after every planned effect landed with its exact identity.
	EffectsConfirmed EffectPhase = "EffectsConfirmed"
)

func (p EffectPhase) valid() bool { return p == Armed || p == EffectsConfirmed }

// Sidecar is the v9 envelope (struct RecoverySidecar in the reference).
//
// Nullable keys are pointers (nil = JSON null; Branch nil = main). Always-present arrays are
// written as [] when nil. The payloads this package does not model (EnsureIndices protocol_v8,
// the schema-v6 EnsureIndices rollback, the legacy top-level additional_registrations and
// tombstones) are kept verbatim so such a sidecar can still be listed, recognised and re-written
// without loss.
type Sidecar struct {
	SchemaVersion uint32     `json:"schema_version"`
	OperationID   string     `json:"operation_id"` // ULID, equals the file stem
	StartedAt     string     `json:"started_at"`   // decimal microseconds since the epoch
	Branch        *string    `json:"branch"`
	ActorID       *string    `json:"actor_id"`
	WriterKind    WriterKind `json:"writer_kind"`
	Tables        []TablePin `json:"tables"`
	// MergeSourceCommitID is omitted when nil; it is forbidden for Load and v9 BranchMerge.
	MergeSourceCommitID *string `json:"merge_source_commit_id,omitempty"`
	// AdditionalRegistrations and Tombstones are the pre-v7 SchemaApply delta, omitted when
	// empty; every v9 writer must leave them empty (SchemaApply carries its delta in
	// protocol_v7.intended_delta).
	AdditionalRegistrations []json.RawMessage `json:"additional_registrations,omitempty"`
	Tombstones              []json.RawMessage `json:"tombstones,omitempty"`
	// SchemaApplyManifestPublished is always written; it must be false for Load.
	SchemaApplyManifestPublished  bool    `json:"schema_apply_manifest_published"`
	SchemaApplyTargetSchemaIRHash *string `json:"schema_apply_target_schema_ir_hash,omitempty"`
	// ProtocolV3 is the Mutation/Load payload, ProtocolV4 the BranchMerge payload and
	// ProtocolV7 the SchemaApply payload.
	ProtocolV3              *ProtocolV3     `json:"protocol_v3,omitempty"`
	ProtocolV4              *ProtocolV4     `json:"protocol_v4,omitempty"`
	ProtocolV7              *ProtocolV7     `json:"protocol_v7,omitempty"`
	ProtocolV8              json.RawMessage `json:"protocol_v8,omitempty"`
	EnsureIndicesRollbackV6 json.RawMessage `json:"ensure_indices_rollback_v6,omitempty"`
	// IngestReceipt is this product's extension (the reference ignores unknown keys): the queue
	// receipt a Load publishes with its commit, so a roll-forward publishes it too and a
	// redelivered message is still recognised after recovery finished its commit.
	IngestReceipt *publisher.Receipt `json:"omnigraph_ingest_receipt,omitempty"`

	// stored is the body this process last wrote or read as this sidecar's object: a rewrite
	// replaces the object only while it still holds these bytes (Rewrite). A copy of the
	// struct shares them, which is what a rewrite of a copy needs.
	stored []byte
}

// TablePin is one table the writer intends to move (SidecarTablePin).
type TablePin struct {
	Identity ids.TableIdentity `json:"identity"`
	TableKey string            `json:"table_key"`
	// TablePath is the full location "{root}/nodes|edges/{stable:016x}-{inc:016x}".
	TablePath       string `json:"table_path"`
	ExpectedVersion uint64 `json:"expected_version"` // manifest pin at prepare
	PostCommitPin   uint64 `json:"post_commit_pin"`  // expected_version + 1 for Load
	// ConfirmedVersion is omitted until the sidecar is EffectsConfirmed.
	ConfirmedVersion *uint64 `json:"confirmed_version,omitempty"`
	// TableBranch is the Lance branch of the table; omitted for main.
	TableBranch *string `json:"table_branch,omitempty"`
}

// Transaction is an exact Lance transaction identity (StagedTransactionIdentity).
type Transaction struct {
	ReadVersion uint64 `json:"read_version"`
	UUID        string `json:"uuid"`
}

// Authority is the branch-authority token the write was prepared against
// (RecoveryAuthorityToken).
type Authority struct {
	BranchIdentifier      lance.BranchIdentifier `json:"branch_identifier"`
	GraphHead             *string                `json:"graph_head"` // nil = no head row
	SchemaIdentityDomain  string                 `json:"schema_identity_domain"`
	SchemaIRHash          string                 `json:"schema_ir_hash"`
	SchemaIdentityVersion uint32                 `json:"schema_identity_version"`
}

// Lineage is the pre-minted graph commit the write publishes (RecoveryLineageIntent).
type Lineage struct {
	GraphCommitID        string  `json:"graph_commit_id"`
	Branch               *string `json:"branch"`
	ActorID              *string `json:"actor_id"`
	MergedParentCommitID *string `json:"merged_parent_commit_id"`
	CreatedAt            int64   `json:"created_at"` // microseconds
}

// TableOutcome is one entry of a prepared rollback audit plan.
type TableOutcome struct {
	TableKey    string `json:"table_key"`
	FromVersion uint64 `json:"from_version"`
	ToVersion   uint64 `json:"to_version"`
}

// Effect is one exact physical effect of a Mutation/Load (RecoveryTableEffect).
type Effect struct {
	Identity           ids.TableIdentity `json:"identity"`
	TableKey           string            `json:"table_key"`
	PlannedTransaction Transaction       `json:"planned_transaction"`
	// ConfirmedTransaction is omitted until EffectsConfirmed.
	ConfirmedTransaction *Transaction `json:"confirmed_transaction,omitempty"`
}

// ConfirmedUpdate is the exact manifest update a slot publishes (RecoveryConfirmedTableUpdate).
type ConfirmedUpdate struct {
	TableVersion    uint64                         `json:"table_version"`
	TableBranch     *string                        `json:"table_branch"`
	RowCount        uint64                         `json:"row_count"`
	VersionMetadata publisher.TableVersionMetadata `json:"version_metadata"`
}

// TableUpdate is one output slot of the intended manifest delta (RecoveryTableUpdateSlot).
type TableUpdate struct {
	Identity        ids.TableIdentity `json:"identity"`
	TableKey        string            `json:"table_key"`
	ExpectedVersion uint64            `json:"expected_version"`
	TableBranch     *string           `json:"table_branch"` // always written; null = main
	// Confirmed is omitted until EffectsConfirmed.
	Confirmed *ConfirmedUpdate `json:"confirmed,omitempty"`
}

// IntendedDelta is the complete manifest delta (RecoveryManifestDelta). Registrations, renames
// and tombstones are omitted when empty; only SchemaApply may carry them (they must be empty
// for Mutation/Load and BranchMerge).
type IntendedDelta struct {
	TableUpdates  []TableUpdate  `json:"table_updates"`
	Registrations []Registration `json:"registrations,omitempty"`
	Renames       []Rename       `json:"renames,omitempty"`
	Tombstones    []Tombstone    `json:"tombstones,omitempty"`
}

// Registration is a table a SchemaApply registers in the manifest: the dataset of an added type
// (SidecarTableRegistration).
type Registration struct {
	Identity ids.TableIdentity `json:"identity"`
	TableKey string            `json:"table_key"`
	// TablePath is graph-RELATIVE: "nodes|edges/{stable:016x}-{inc:016x}".
	TablePath string `json:"table_path"`
	// TableBranch is omitted when nil (main); a v9 SchemaApply registration must be on main.
	TableBranch *string `json:"table_branch,omitempty"`
}

// Rename is a metadata-only alias rebinding (SidecarTableRename): the identity and its physical
// path stay, only the table key changes from ExpectedTableKey to TableKey.
type Rename struct {
	Identity         ids.TableIdentity `json:"identity"`
	ExpectedTableKey string            `json:"expected_table_key"`
	ExpectedVersion  uint64            `json:"expected_version"` // the table's manifest pin
	TableKey         string            `json:"table_key"`
	TablePath        string            `json:"table_path"` // graph-relative, as Registration
}

// Tombstone is a table a SchemaApply marks removed (SidecarTombstone).
type Tombstone struct {
	Identity ids.TableIdentity `json:"identity"`
	TableKey string            `json:"table_key"`
	// TombstoneVersion is the table's last published version + 1.
	TombstoneVersion uint64 `json:"tombstone_version"`
}

// ProtocolV3 is the Mutation/Load payload (RecoveryProtocolV3).
type ProtocolV3 struct {
	Authority             Authority `json:"authority"`
	Lineage               Lineage   `json:"lineage"`
	RollbackGraphCommitID string    `json:"rollback_graph_commit_id"`
	// RollbackAuditOutcomes is omitted while nil (no rollback prepared). A non-nil empty slice
	// is a prepared lineage-only rollback and is written as []: nil and empty differ here.
	RollbackAuditOutcomes []TableOutcome `json:"rollback_audit_outcomes,omitzero"`
	EffectPhase           EffectPhase    `json:"effect_phase"`
	Effects               []Effect       `json:"effects"`
	IntendedDelta         IntendedDelta  `json:"intended_delta"`
}

// ProtocolV4 is the BranchMerge payload (RecoveryProtocolV4). Its lineage must carry the
// captured source head as merged_parent_commit_id.
type ProtocolV4 struct {
	Authority             Authority      `json:"authority"`
	Lineage               Lineage        `json:"lineage"`
	RollbackGraphCommitID string         `json:"rollback_graph_commit_id"`
	RollbackAuditOutcomes []TableOutcome `json:"rollback_audit_outcomes,omitzero"` // as in ProtocolV3
	EffectPhase           EffectPhase    `json:"effect_phase"`
	Effects               []MergeEffect  `json:"effects"`
	IntendedDelta         IntendedDelta  `json:"intended_delta"`
}

// ProtocolV7 is the SchemaApply payload (RecoveryProtocolV7). Authority carries the ACCEPTED
// (pre-apply) schema identity; TargetSchemaIRHash names the staged schema the apply promotes.
type ProtocolV7 struct {
	Authority             Authority      `json:"authority"`
	Lineage               Lineage        `json:"lineage"`
	RollbackGraphCommitID string         `json:"rollback_graph_commit_id"`
	RollbackAuditOutcomes []TableOutcome `json:"rollback_audit_outcomes,omitzero"` // as in ProtocolV3
	TargetSchemaIRHash    string         `json:"target_schema_ir_hash"`
	EffectPhase           EffectPhase    `json:"effect_phase"`
	Effects               []SchemaEffect `json:"effects"`
	IntendedDelta         IntendedDelta  `json:"intended_delta"`
}

// SchemaEffectKind tags a SchemaApply effect (RecoverySchemaApplyEffectKind).
type SchemaEffectKind string

const (
	// ExistingOverwrite replaces an already manifest-owned table.
	ExistingOverwrite SchemaEffectKind = "ExistingOverwrite"
	// FirstTouchDataset is the version-one commit that creates an added type's dataset.
	FirstTouchDataset SchemaEffectKind = "FirstTouchDataset"
)

func (k SchemaEffectKind) valid() bool { return k == ExistingOverwrite || k == FirstTouchDataset }

// SchemaEffect is one exact SchemaApply physical effect (RecoverySchemaApplyEffect). On disk
// Kind, PlannedTransaction and ConfirmedTransaction form the internally tagged object under
// "kind": {"kind": Kind, "planned_transaction": ..., "confirmed_transaction": ...}; both
// variants carry the same fields.
type SchemaEffect struct {
	Identity           ids.TableIdentity
	TableKey           string
	Kind               SchemaEffectKind
	PlannedTransaction Transaction
	// ConfirmedTransaction is omitted until EffectsConfirmed.
	ConfirmedTransaction *Transaction
}

// MergeEffect is one BranchMerge physical effect; Kind is written under the key "kind".
type MergeEffect struct {
	Identity ids.TableIdentity `json:"identity"`
	TableKey string            `json:"table_key"`
	Kind     MergeEffectKind   `json:"kind"`
}

// MergeKind tags a MergeEffectKind.
type MergeKind string

const (
	MultiCommitHead MergeKind = "MultiCommitHead"
	RefOnlyFork     MergeKind = "RefOnlyFork"
)

// MergeEffectKind is internally tagged by "kind". MultiCommitHead uses SourceForkVersion,
// PlannedTransactions, ConfirmedVersion and ConfirmedBranchIdentifier; RefOnlyFork uses
// SourceVersion and ConfirmedBranchIdentifier. Fields of the other variant are neither written
// nor read.
type MergeEffectKind struct {
	Kind                      MergeKind
	SourceForkVersion         *uint64
	PlannedTransactions       []Transaction
	ConfirmedVersion          *uint64
	SourceVersion             uint64
	ConfirmedBranchIdentifier *lance.BranchIdentifier
}

// Marshal renders s exactly as the reference writes it (serde_json::to_string_pretty): keys in
// field order, two-space indent, no HTML escaping, no trailing newline. It does not validate.
func Marshal(s *Sidecar) ([]byte, error) {
	if s == nil {
		return nil, fmt.Errorf("recovery: marshal nil sidecar")
	}
	return encode(s, true)
}

// encode writes v as compact or pretty JSON without HTML escaping, so "<", ">" and "&" stay
// literal as serde_json leaves them.
func encode(v any, pretty bool) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if pretty {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// MarshalJSON writes nil Tables as [] and refuses an unknown writer kind.
func (s Sidecar) MarshalJSON() ([]byte, error) {
	if !s.WriterKind.valid() {
		return nil, fmt.Errorf("recovery: unknown writer_kind %q", s.WriterKind)
	}
	type plain Sidecar
	p := plain(s)
	if p.Tables == nil {
		p.Tables = []TablePin{}
	}
	return encode(p, false)
}

// MarshalJSON writes the identifier as {"version_mapping":[[version,"uuid"],...]}.
func (a Authority) MarshalJSON() ([]byte, error) {
	type plain struct {
		BranchIdentifier      branchJSON `json:"branch_identifier"`
		GraphHead             *string    `json:"graph_head"`
		SchemaIdentityDomain  string     `json:"schema_identity_domain"`
		SchemaIRHash          string     `json:"schema_ir_hash"`
		SchemaIdentityVersion uint32     `json:"schema_identity_version"`
	}
	return encode(plain{branchJSON(a.BranchIdentifier), a.GraphHead, a.SchemaIdentityDomain, a.SchemaIRHash, a.SchemaIdentityVersion}, false)
}

// branchJSON encodes a lance.BranchIdentifier without HTML escaping.
type branchJSON lance.BranchIdentifier

func (b branchJSON) MarshalJSON() ([]byte, error) {
	pairs := make([][2]any, len(b))
	for i, m := range b {
		pairs[i] = [2]any{m.ParentVersion, m.UUID}
	}
	return encode(struct {
		VersionMapping [][2]any `json:"version_mapping"`
	}{pairs}, false)
}

// MarshalJSON refuses an unknown phase and writes nil Effects as [].
func (p ProtocolV3) MarshalJSON() ([]byte, error) {
	if !p.EffectPhase.valid() {
		return nil, fmt.Errorf("recovery: unknown effect_phase %q", p.EffectPhase)
	}
	type plain ProtocolV3
	q := plain(p)
	if q.Effects == nil {
		q.Effects = []Effect{}
	}
	return encode(q, false)
}

// MarshalJSON refuses an unknown phase and writes nil Effects as [].
func (p ProtocolV4) MarshalJSON() ([]byte, error) {
	if !p.EffectPhase.valid() {
		return nil, fmt.Errorf("recovery: unknown effect_phase %q", p.EffectPhase)
	}
	type plain ProtocolV4
	q := plain(p)
	if q.Effects == nil {
		q.Effects = []MergeEffect{}
	}
	return encode(q, false)
}

// MarshalJSON refuses an unknown phase and writes nil Effects as [].
func (p ProtocolV7) MarshalJSON() ([]byte, error) {
	if !p.EffectPhase.valid() {
		return nil, fmt.Errorf("recovery: unknown effect_phase %q", p.EffectPhase)
	}
	type plain ProtocolV7
	q := plain(p)
	if q.Effects == nil {
		q.Effects = []SchemaEffect{}
	}
	return encode(q, false)
}

// MarshalJSON writes {"identity","table_key","kind":{"kind",planned,confirmed?}} and refuses an
// unknown kind.
func (e SchemaEffect) MarshalJSON() ([]byte, error) {
	if !e.Kind.valid() {
		return nil, fmt.Errorf("recovery: unknown schema-apply effect kind %q", e.Kind)
	}
	type kind struct {
		Kind                 SchemaEffectKind `json:"kind"`
		PlannedTransaction   Transaction      `json:"planned_transaction"`
		ConfirmedTransaction *Transaction     `json:"confirmed_transaction,omitempty"`
	}
	return encode(struct {
		Identity ids.TableIdentity `json:"identity"`
		TableKey string            `json:"table_key"`
		Kind     kind              `json:"kind"`
	}{e.Identity, e.TableKey, kind{e.Kind, e.PlannedTransaction, e.ConfirmedTransaction}}, false)
}

// MarshalJSON writes nil TableUpdates as [].
func (d IntendedDelta) MarshalJSON() ([]byte, error) {
	type plain IntendedDelta
	q := plain(d)
	if q.TableUpdates == nil {
		q.TableUpdates = []TableUpdate{}
	}
	return encode(q, false)
}

// MarshalJSON writes the internally tagged form: "kind" first, then the variant's fields.
func (k MergeEffectKind) MarshalJSON() ([]byte, error) {
	var bid *branchJSON
	if k.ConfirmedBranchIdentifier != nil {
		b := branchJSON(*k.ConfirmedBranchIdentifier)
		bid = &b
	}
	switch k.Kind {
	case MultiCommitHead:
		planned := k.PlannedTransactions
		if planned == nil {
			planned = []Transaction{}
		}
		return encode(struct {
			Kind                      MergeKind     `json:"kind"`
			SourceForkVersion         *uint64       `json:"source_fork_version,omitempty"`
			PlannedTransactions       []Transaction `json:"planned_transactions"`
			ConfirmedVersion          *uint64       `json:"confirmed_version,omitempty"`
			ConfirmedBranchIdentifier *branchJSON   `json:"confirmed_branch_identifier,omitempty"`
		}{k.Kind, k.SourceForkVersion, planned, k.ConfirmedVersion, bid}, false)
	case RefOnlyFork:
		return encode(struct {
			Kind                      MergeKind   `json:"kind"`
			SourceVersion             uint64      `json:"source_version"`
			ConfirmedBranchIdentifier *branchJSON `json:"confirmed_branch_identifier,omitempty"`
		}{k.Kind, k.SourceVersion, bid}, false)
	}
	return nil, fmt.Errorf("recovery: unknown branch-merge effect kind %q", k.Kind)
}

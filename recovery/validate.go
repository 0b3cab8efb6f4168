package recovery

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/ids"
)

// ErrorKind classifies a refused sidecar.
type ErrorKind string

const (
	// KindCorrupt: not UTF-8, not JSON, or not decodable as the envelope (missing or null
	// required key, wrong type, duplicate key, unknown enum variant).
	KindCorrupt ErrorKind = "corrupt"
	// KindFutureVersion: schema_version > 9, written by a newer binary; upgrade.
	KindFutureVersion ErrorKind = "future_version"
	// KindPreIdentity: schema_version < 9, an identity-less generation that is never upgraded
	// by inference.
	KindPreIdentity ErrorKind = "pre_identity"
	// KindName: the file name is not "<ULID>.json" or disagrees with operation_id.
	KindName ErrorKind = "name"
	// KindShape: a v9 shape invariant is violated.
	KindShape ErrorKind = "shape"
	// KindForeignRoot: a table pin does not name this graph root's canonical table path.
	KindForeignRoot ErrorKind = "foreign_root"
	// KindConfirm: Confirm was given effects that do not match the armed plan.
	KindConfirm ErrorKind = "confirm"
)

// SidecarError is every refusal of this package. Nothing is deleted or rewritten when one is
// returned: the file stays for the caller (and operator) to decide.
type SidecarError struct {
	File   string // location or key of the sidecar
	Kind   ErrorKind
	Reason string
}

func (e *SidecarError) Error() string {
	return "recovery sidecar " + strconv.Quote(e.File) + ": " + e.Reason
}

// ErrorKind routes a refused sidecar: one written by another generation of the format is
// errs.KindDataVersion, every other refusal errs.KindCorrupt. Either way the graph needs an
// operator and the sidecar stays where it is.
func (e *SidecarError) ErrorKind() string {
	if e.Kind == KindFutureVersion || e.Kind == KindPreIdentity {
		return errs.KindDataVersion
	}
	return errs.KindCorrupt
}

// ErrorDetail names the sidecar and what is wrong with it.
func (e *SidecarError) ErrorDetail() map[string]any {
	return map[string]any{"file": e.File, "refusal": string(e.Kind), "reason": e.Reason}
}

func refuse(file string, kind ErrorKind, format string, args ...any) *SidecarError {
	return &SidecarError{File: file, Kind: kind, Reason: fmt.Sprintf(format, args...)}
}

// Parse reads one sidecar body. name is the file's key or location; its last path segment must
// be "<operation_id>.json". root is the graph root location (storage Location("") without the
// trailing '/'); every table pin must name exactly "{root}/nodes|edges/{stable:016x}-{inc:016x}".
// Every refusal is a *SidecarError; Parse never modifies anything.
func Parse(name string, data []byte, root string) (*Sidecar, error) {
	if !utf8.Valid(data) {
		return nil, refuse(name, KindCorrupt, "is not valid UTF-8")
	}
	if !json.Valid(data) {
		return nil, refuse(name, KindCorrupt, "is not valid JSON: %v", syntaxError(data))
	}
	top, err := object(data)
	if err != nil {
		return nil, refuse(name, KindCorrupt, "failed to decode: %v", err)
	}
	var version uint32
	if err := top.req("schema_version", into(&version)); err != nil {
		return nil, refuse(name, KindCorrupt, "has no readable schema_version: %v", err)
	}
	if err := versionGate(name, version); err != nil {
		return nil, err
	}
	var s Sidecar
	if err := s.UnmarshalJSON(data); err != nil {
		return nil, refuse(name, KindCorrupt, "failed to decode: %v", err)
	}
	if err := checkName(name, s.OperationID); err != nil {
		return nil, err
	}
	if err := s.validate(name, root); err != nil {
		return nil, err
	}
	return &s, nil
}

func syntaxError(data []byte) error {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	return fmt.Errorf("invalid JSON")
}

func versionGate(file string, version uint32) error {
	switch {
	case version > SchemaVersion:
		return refuse(file, KindFutureVersion, "declares schema_version=%d, newer than the maximum this binary supports (schema_version=%d); refusing to interpret — upgrade or remove the sidecar with operator review", version, SchemaVersion)
	case version < SchemaVersion:
		return refuse(file, KindPreIdentity, "declares schema_version=%d: pre-v9 sidecars carry no explicit table identity and are refused; the storage strand is rebuilt rather than upgraded, and recovery never infers table ownership from an alias or path", version)
	}
	return nil
}

// checkName requires the last segment of name to be "<operation_id>.json" with a canonical ULID.
func checkName(name, operationID string) error {
	base := name[strings.LastIndexByte(name, '/')+1:]
	stem, ok := strings.CutSuffix(base, ".json")
	if !ok {
		return refuse(name, KindName, "file name %q does not end in .json", base)
	}
	if !ids.IsULID(stem) {
		return refuse(name, KindName, "file stem %q is not a canonical ULID", stem)
	}
	if operationID != stem {
		return refuse(name, KindName, "operation_id %q does not equal the file stem %q", operationID, stem)
	}
	return nil
}

// Validate checks every invariant Parse checks except the file name: the version, a ULID
// operation_id, the writer's shape, and that every pin names its canonical path under root.
func (s *Sidecar) Validate(root string) error {
	if s == nil {
		return refuse("<nil>", KindShape, "nil sidecar")
	}
	return s.validate(Key(s.OperationID), root)
}

func (s *Sidecar) validate(file, root string) error {
	if err := s.validateShape(file); err != nil {
		return err
	}
	return s.checkPinRoots(file, root)
}

// validateShape is validate without the graph-root binding of the pin paths.
func (s *Sidecar) validateShape(file string) error {
	if err := versionGate(file, s.SchemaVersion); err != nil {
		return err
	}
	if !ids.IsULID(s.OperationID) {
		return refuse(file, KindName, "operation_id %q is not a canonical ULID", s.OperationID)
	}
	bad := func(format string, args ...any) error {
		return refuse(file, KindShape, "invalid schema-v%d %s shape: %s", s.SchemaVersion, s.WriterKind, fmt.Sprintf(format, args...))
	}
	if s.SchemaApplyManifestPublished || s.SchemaApplyTargetSchemaIRHash != nil {
		return bad("SchemaApply confirmation fields belong to schema-v5 only")
	}
	if s.EnsureIndicesRollbackV6 != nil {
		return bad("the EnsureIndices fixed rollback belongs to schema-v6 only")
	}
	switch s.WriterKind {
	case Load, Mutation:
		return s.validateV3(bad)
	case BranchMerge:
		return s.validateV4(bad)
	case SchemaApply:
		return s.validateV7(bad)
	case EnsureIndices:
		// Its exact payload is carried verbatim, not interpreted here.
		switch {
		case s.ProtocolV3 != nil || s.ProtocolV4 != nil || s.ProtocolV7 != nil:
			return bad("carries another writer's protocol")
		case s.ProtocolV8 == nil:
			return bad("missing required protocol_v8 payload")
		}
		return validatePins(bad, s.Tables, false)
	case Optimize:
		if s.ProtocolV3 != nil || s.ProtocolV4 != nil || s.ProtocolV7 != nil || s.ProtocolV8 != nil ||
			len(s.AdditionalRegistrations) > 0 || len(s.Tombstones) > 0 {
			return bad("Optimize must carry only identity-bearing table pins")
		}
		return validatePins(bad, s.Tables, true)
	}
	return bad("unknown writer_kind")
}

// TablePath is the canonical table path under root for a "node:"/"edge:" table key.
func TablePath(root, tableKey string, id ids.TableIdentity) (string, bool) {
	if !strings.HasPrefix(tableKey, "node:") && !strings.HasPrefix(tableKey, "edge:") {
		return "", false
	}
	return strings.TrimRight(root, "/") + "/" + ids.TablePath(tableKey, id), true
}

// relPath is the pin's table path relative to the graph root at rootLoc.
func (p TablePin) relPath(rootLoc string) (string, error) {
	rel, ok := strings.CutPrefix(p.TablePath, rootLoc+"/")
	if !ok {
		return "", fmt.Errorf("table path %s is outside the root %s", p.TablePath, rootLoc)
	}
	return rel, nil
}

// checkPinRoots binds every pin to this graph root: a sidecar copied from another graph must not
// point recovery at that graph's datasets.
func (s *Sidecar) checkPinRoots(file, root string) error {
	for _, p := range s.Tables {
		want, _ := TablePath(root, p.TableKey, p.Identity)
		if p.TablePath != want {
			return refuse(file, KindForeignRoot, "binds table identity %s alias %q to foreign or non-canonical path %q; expected exact graph-owned path %q", p.Identity, p.TableKey, p.TablePath, want)
		}
	}
	return nil
}

// validatePins: non-zero identities, node:/edge: aliases, canonical path suffix, unique
// identities and aliases.
func validatePins(bad func(string, ...any) error, pins []TablePin, nonEmpty bool) error {
	if nonEmpty && len(pins) == 0 {
		return bad("table pin set must not be empty")
	}
	seenID := map[ids.TableIdentity]bool{}
	seenKey := map[string]bool{}
	for _, p := range pins {
		if !p.Identity.Valid() {
			return bad("invalid table identity %s (both components must be non-zero)", p.Identity)
		}
		suffix, ok := TablePath("", p.TableKey, p.Identity)
		if !ok {
			return bad("invalid table key %q", p.TableKey)
		}
		if path := strings.TrimRight(p.TablePath, "/"); path != suffix[1:] && !strings.HasSuffix(path, suffix) {
			return bad("table pin identity %s alias %q uses path %q, expected canonical suffix %q", p.Identity, p.TableKey, p.TablePath, suffix[1:])
		}
		if seenID[p.Identity] {
			return bad("duplicate table identity %s in pin set", p.Identity)
		}
		if seenKey[p.TableKey] {
			return bad("duplicate table alias %q in pin set", p.TableKey)
		}
		seenID[p.Identity], seenKey[p.TableKey] = true, true
	}
	return nil
}

func validateAuthority(bad func(string, ...any) error, a Authority) error {
	if a.SchemaIdentityDomain == "" || a.SchemaIRHash == "" || a.SchemaIdentityVersion == 0 {
		return bad("authority must carry a non-empty schema identity domain and hash and a non-zero identity version")
	}
	return nil
}

// graphBranch treats nil and "main" alike, as the envelope/lineage comparison does.
func graphBranch(b *string) string {
	if b == nil || *b == "main" {
		return "\x00main"
	}
	return *b
}

func sameOpt[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// validateLineage covers the envelope/lineage agreement both exact protocols require.
func (s *Sidecar) validateLineage(bad func(string, ...any) error, l Lineage, rollbackID string) error {
	if graphBranch(s.Branch) != graphBranch(l.Branch) {
		return bad("sidecar branch does not match the lineage branch")
	}
	if !sameOpt(s.ActorID, l.ActorID) {
		return bad("sidecar actor_id does not match the lineage actor_id")
	}
	if rollbackID == l.GraphCommitID {
		return bad("original and rollback graph commit ids must differ")
	}
	return nil
}

func validateOutcomes(bad func(string, ...any) error, outcomes []TableOutcome, pins []TablePin) error {
	aliases := map[string]bool{}
	for _, p := range pins {
		aliases[p.TableKey] = true
	}
	seen := map[string]bool{}
	for _, o := range outcomes {
		if seen[o.TableKey] || !aliases[o.TableKey] {
			return bad("rollback audit outcomes must name a unique subset of the table pins")
		}
		seen[o.TableKey] = true
	}
	return nil
}

func emptyDelta(d IntendedDelta) bool {
	return len(d.Registrations) == 0 && len(d.Renames) == 0 && len(d.Tombstones) == 0
}

// validateV3 is the Mutation/Load shape (validate_mutation_load_shape), plus the Load pin rules
// of §4.1: at least one pin and post_commit_pin == expected_version + 1.
func (s *Sidecar) validateV3(bad func(string, ...any) error) error {
	p := s.ProtocolV3
	if p == nil {
		return bad("missing required protocol_v3 payload")
	}
	if s.ProtocolV4 != nil || s.ProtocolV7 != nil || s.ProtocolV8 != nil || s.MergeSourceCommitID != nil {
		return bad("Mutation/Load sidecars must carry only the protocol_v3 writer payload")
	}
	if err := validateAuthority(bad, p.Authority); err != nil {
		return err
	}
	if len(s.AdditionalRegistrations) > 0 || len(s.Tombstones) > 0 || !emptyDelta(p.IntendedDelta) {
		return bad("Mutation/Load sidecars cannot register, rename or tombstone tables")
	}
	if err := s.validateLineage(bad, p.Lineage, p.RollbackGraphCommitID); err != nil {
		return err
	}
	if p.Lineage.MergedParentCommitID != nil {
		return bad("Mutation/Load lineage cannot carry a merged parent")
	}
	if !p.EffectPhase.valid() {
		return bad("unknown effect_phase %q", p.EffectPhase)
	}
	if err := validatePins(bad, s.Tables, s.WriterKind == Load); err != nil {
		return err
	}
	if err := validateOutcomes(bad, p.RollbackAuditOutcomes, s.Tables); err != nil {
		return err
	}

	effects := map[ids.TableIdentity]*Effect{}
	uuids := map[string]bool{}
	for i := range p.Effects {
		e := &p.Effects[i]
		if effects[e.Identity] != nil || uuids[e.PlannedTransaction.UUID] {
			return bad("table pins, planned transaction identities and intended-delta slots are not one-to-one")
		}
		effects[e.Identity], uuids[e.PlannedTransaction.UUID] = e, true
	}
	slots := map[ids.TableIdentity]*TableUpdate{}
	for i := range p.IntendedDelta.TableUpdates {
		u := &p.IntendedDelta.TableUpdates[i]
		if slots[u.Identity] != nil {
			return bad("table pins, planned transaction identities and intended-delta slots are not one-to-one")
		}
		slots[u.Identity] = u
	}
	if len(effects) != len(s.Tables) || len(slots) != len(s.Tables) {
		return bad("table pins, planned transaction identities and intended-delta slots are not one-to-one")
	}
	for _, pin := range s.Tables {
		e, u := effects[pin.Identity], slots[pin.Identity]
		if e == nil || u == nil {
			return bad("table pins, planned transaction identities and intended-delta slots are not one-to-one")
		}
		if e.TableKey != pin.TableKey || u.TableKey != pin.TableKey {
			return bad("identity %s has inconsistent aliases across pin/effect/slot", pin.Identity)
		}
		if s.WriterKind == Load && (pin.ExpectedVersion == ^uint64(0) || pin.PostCommitPin != pin.ExpectedVersion+1) {
			return bad("pin %q post_commit_pin %d is not expected_version %d + 1", pin.TableKey, pin.PostCommitPin, pin.ExpectedVersion)
		}
		if e.PlannedTransaction.ReadVersion != pin.ExpectedVersion {
			return bad("planned transaction for %q reads version %d, pin expects %d", pin.TableKey, e.PlannedTransaction.ReadVersion, pin.ExpectedVersion)
		}
		if u.ExpectedVersion != pin.ExpectedVersion || !sameOpt(u.TableBranch, pin.TableBranch) {
			return bad("intended-delta pre-state for %q does not match its table pin", pin.TableKey)
		}
		switch p.EffectPhase {
		case Armed:
			if e.ConfirmedTransaction != nil || u.Confirmed != nil || pin.ConfirmedVersion != nil {
				return bad("Armed effect %q already carries confirmation", pin.TableKey)
			}
		case EffectsConfirmed:
			switch {
			case e.ConfirmedTransaction == nil:
				return bad("EffectsConfirmed effect %q lacks a confirmed transaction", pin.TableKey)
			case u.Confirmed == nil:
				return bad("EffectsConfirmed effect %q lacks a confirmed manifest update", pin.TableKey)
			case *e.ConfirmedTransaction != e.PlannedTransaction:
				return bad("confirmed transaction for %q differs from its planned identity", pin.TableKey)
			case !sameOpt(pin.ConfirmedVersion, &u.Confirmed.TableVersion) || !sameOpt(u.Confirmed.TableBranch, pin.TableBranch):
				return bad("confirmed update for %q does not match its table pin", pin.TableKey)
			}
		}
	}
	return nil
}

// validateV4 checks the BranchMerge envelope (the first part of validate_branch_merge_v4_shape):
// payload exclusivity, authority, lineage, pin/effect/slot correspondence and per-slot phase
// rules. The per-table transaction-chain and first-touch rules are left to the merge writer.
func (s *Sidecar) validateV4(bad func(string, ...any) error) error {
	if s.ProtocolV3 != nil || s.ProtocolV7 != nil || s.ProtocolV8 != nil {
		return bad("BranchMerge sidecar carries another writer protocol")
	}
	if s.MergeSourceCommitID != nil || len(s.AdditionalRegistrations) > 0 || len(s.Tombstones) > 0 {
		return bad("BranchMerge must carry lineage and delta only in protocol_v4")
	}
	p := s.ProtocolV4
	if p == nil {
		return bad("missing required protocol_v4 payload")
	}
	if err := validateAuthority(bad, p.Authority); err != nil {
		return err
	}
	if !emptyDelta(p.IntendedDelta) {
		return bad("BranchMerge cannot register, rename or tombstone tables")
	}
	if err := s.validateLineage(bad, p.Lineage, p.RollbackGraphCommitID); err != nil {
		return err
	}
	if p.Lineage.MergedParentCommitID == nil {
		return bad("BranchMerge lineage must carry the captured source commit")
	}
	if !p.EffectPhase.valid() {
		return bad("unknown effect_phase %q", p.EffectPhase)
	}
	if err := validatePins(bad, s.Tables, true); err != nil {
		return err
	}
	slots := map[ids.TableIdentity]*TableUpdate{}
	slotKeys := map[string]bool{}
	for i := range p.IntendedDelta.TableUpdates {
		u := &p.IntendedDelta.TableUpdates[i]
		if !u.Identity.Valid() || slots[u.Identity] != nil || slotKeys[u.TableKey] {
			return bad("intended-delta slots must have unique valid identities and aliases")
		}
		slots[u.Identity], slotKeys[u.TableKey] = u, true
		if (p.EffectPhase == Armed) != (u.Confirmed == nil) {
			return bad("manifest slot %q confirmation does not match phase %s", u.TableKey, p.EffectPhase)
		}
		if u.Confirmed != nil && !sameOpt(u.Confirmed.TableBranch, u.TableBranch) {
			return bad("confirmed output branch for %q differs from its planned slot", u.TableKey)
		}
	}
	effects := map[ids.TableIdentity]*MergeEffect{}
	for i := range p.Effects {
		e := &p.Effects[i]
		if effects[e.Identity] != nil {
			return bad("physical table pins and effects must be one-to-one")
		}
		if e.Kind.Kind != MultiCommitHead && e.Kind.Kind != RefOnlyFork {
			return bad("unknown effect kind %q", e.Kind.Kind)
		}
		effects[e.Identity] = e
	}
	if len(effects) != len(s.Tables) {
		return bad("physical table pins and effects must be one-to-one")
	}
	if err := validateOutcomes(bad, p.RollbackAuditOutcomes, s.Tables); err != nil {
		return err
	}
	for _, pin := range s.Tables {
		e, u := effects[pin.Identity], slots[pin.Identity]
		if e == nil || u == nil {
			return bad("physical table pins/effects must be one-to-one and a subset of the intended-delta slots")
		}
		if e.TableKey != pin.TableKey || u.TableKey != pin.TableKey {
			return bad("identity %s has inconsistent aliases across pin/effect/slot", pin.Identity)
		}
		if u.ExpectedVersion != pin.ExpectedVersion || !sameOpt(u.TableBranch, pin.TableBranch) {
			return bad("intended-delta pre-state for %q does not match its table pin", pin.TableKey)
		}
	}
	return nil
}

// relTablePath is the graph-relative canonical path of a "node:"/"edge:" table key.
func relTablePath(tableKey string, id ids.TableIdentity) (string, bool) {
	path, ok := TablePath("", tableKey, id)
	if !ok {
		return "", false
	}
	return path[1:], true
}

// validateV7 is the SchemaApply shape (validate_schema_apply_v7_shape): a main-only envelope
// whose authority, lineage and delta live only in protocol_v7; pins, effects and slots one-to-one;
// first-touch effects exactly the registrations; registrations, renames and tombstones
// identity-disjoint; and the per-phase confirmation rules of the exact effects.
func (s *Sidecar) validateV7(bad func(string, ...any) error) error {
	if s.Branch != nil || s.ProtocolV3 != nil || s.ProtocolV4 != nil || s.ProtocolV8 != nil ||
		s.MergeSourceCommitID != nil || len(s.AdditionalRegistrations) > 0 || len(s.Tombstones) > 0 {
		return bad("SchemaApply must target main and carry authority/delta only in protocol_v7")
	}
	p := s.ProtocolV7
	if p == nil {
		return bad("missing required protocol_v7 payload")
	}
	if err := validateAuthority(bad, p.Authority); err != nil {
		return err
	}
	if p.TargetSchemaIRHash == "" {
		return bad("SchemaApply has an empty target schema identity")
	}
	if !sameOpt(s.ActorID, p.Lineage.ActorID) || p.Lineage.Branch != nil || p.Lineage.MergedParentCommitID != nil {
		return bad("sidecar actor/main lineage fields do not match")
	}
	if p.Lineage.GraphCommitID == "" || p.RollbackGraphCommitID == "" || p.RollbackGraphCommitID == p.Lineage.GraphCommitID {
		return bad("original and rollback commit ids must be non-empty and distinct")
	}
	if !p.EffectPhase.valid() {
		return bad("unknown effect_phase %q", p.EffectPhase)
	}
	if err := validatePins(bad, s.Tables, false); err != nil {
		return err
	}

	// Pins, effects and slots: unique and one-to-one by identity; planned uuids unique, non-empty.
	const oneToOne = "pins, effects, transaction UUIDs, and delta slots must be unique and one-to-one"
	effects := map[ids.TableIdentity]*SchemaEffect{}
	uuids := map[string]bool{}
	firstTouch := map[ids.TableIdentity]bool{}
	for i := range p.Effects {
		e := &p.Effects[i]
		if !e.Kind.valid() {
			return bad("unknown effect kind %q", e.Kind)
		}
		u := e.PlannedTransaction.UUID
		if effects[e.Identity] != nil || u == "" || uuids[u] {
			return bad(oneToOne)
		}
		effects[e.Identity], uuids[u] = e, true
		if e.Kind == FirstTouchDataset {
			firstTouch[e.Identity] = true
		}
	}
	slots := map[ids.TableIdentity]*TableUpdate{}
	for i := range p.IntendedDelta.TableUpdates {
		u := &p.IntendedDelta.TableUpdates[i]
		if slots[u.Identity] != nil {
			return bad(oneToOne)
		}
		slots[u.Identity] = u
	}
	if len(effects) != len(s.Tables) || len(slots) != len(s.Tables) {
		return bad(oneToOne)
	}
	for _, pin := range s.Tables {
		if effects[pin.Identity] == nil || slots[pin.Identity] == nil {
			return bad(oneToOne)
		}
	}

	// Registrations are exactly the first-touch effects; registrations, renames and tombstones
	// are each unique and pairwise identity-disjoint.
	d := p.IntendedDelta
	const disjoint = "first-touch effects must match unique registration identities, while registrations, renames, and tombstones remain identity-disjoint"
	regs := map[ids.TableIdentity]*Registration{}
	for i := range d.Registrations {
		r := &d.Registrations[i]
		if regs[r.Identity] != nil || !firstTouch[r.Identity] {
			return bad(disjoint)
		}
		regs[r.Identity] = r
	}
	if len(regs) != len(firstTouch) {
		return bad(disjoint)
	}
	renames := map[ids.TableIdentity]*Rename{}
	for i := range d.Renames {
		r := &d.Renames[i]
		if renames[r.Identity] != nil || regs[r.Identity] != nil {
			return bad(disjoint)
		}
		renames[r.Identity] = r
	}
	tombs := map[ids.TableIdentity]bool{}
	for _, t := range d.Tombstones {
		if tombs[t.Identity] || regs[t.Identity] != nil || renames[t.Identity] != nil {
			return bad(disjoint)
		}
		tombs[t.Identity] = true
	}

	for _, r := range d.Registrations {
		if !r.Identity.Valid() {
			return bad("invalid registration identity %s (both components must be non-zero)", r.Identity)
		}
		want, ok := relTablePath(r.TableKey, r.Identity)
		if !ok {
			return bad("registration identity %s has invalid table key %q", r.Identity, r.TableKey)
		}
		if r.TablePath != want {
			return bad("registration identity %s alias %q has path %q, expected %q", r.Identity, r.TableKey, r.TablePath, want)
		}
		if e := effects[r.Identity]; e.TableKey != r.TableKey {
			return bad("first-touch identity %s has registration alias %q but effect alias %q", r.Identity, r.TableKey, e.TableKey)
		}
	}
	for _, r := range d.Renames {
		if !r.Identity.Valid() {
			return bad("invalid rename identity %s (both components must be non-zero)", r.Identity)
		}
		oldPath, okOld := relTablePath(r.ExpectedTableKey, r.Identity)
		newPath, okNew := relTablePath(r.TableKey, r.Identity)
		if !okOld || !okNew {
			return bad("rename identity %s has an invalid table key (%q -> %q)", r.Identity, r.ExpectedTableKey, r.TableKey)
		}
		if r.ExpectedVersion == 0 || r.ExpectedTableKey == r.TableKey || r.TablePath != oldPath || r.TablePath != newPath {
			return bad("rename identity %s must carry a live expected version, change alias, and preserve canonical path %q", r.Identity, r.TablePath)
		}
		if u := slots[r.Identity]; u != nil && (u.TableKey != r.TableKey || u.ExpectedVersion != r.ExpectedVersion) {
			return bad("rename identity %s does not match its physical output alias/version", r.Identity)
		}
	}
	live := map[string]bool{}
	bind := func(id ids.TableIdentity, alias string) error {
		if live[alias] {
			return bad("delta binds more than one live identity to alias %q (including %s)", alias, id)
		}
		live[alias] = true
		return nil
	}
	for _, r := range d.Registrations {
		if err := bind(r.Identity, r.TableKey); err != nil {
			return err
		}
	}
	for _, r := range d.Renames {
		if err := bind(r.Identity, r.TableKey); err != nil {
			return err
		}
	}
	for _, t := range d.Tombstones {
		if !t.Identity.Valid() {
			return bad("invalid tombstone identity %s (both components must be non-zero)", t.Identity)
		}
		if t.TombstoneVersion == 0 {
			return bad("tombstone %q has tombstone_version 0; it must be at least 1", t.TableKey)
		}
	}
	for _, r := range d.Registrations {
		if r.TableBranch != nil {
			return bad("first-touch registrations must target main")
		}
	}

	// Rollback audit outcomes name the aliases a rollback restores: a renamed table's old alias.
	aliases := map[string]bool{}
	for _, pin := range s.Tables {
		if r := renames[pin.Identity]; r != nil {
			aliases[r.ExpectedTableKey] = true
		} else {
			aliases[pin.TableKey] = true
		}
	}
	seen := map[string]bool{}
	for _, o := range p.RollbackAuditOutcomes {
		if seen[o.TableKey] || !aliases[o.TableKey] {
			return bad("rollback audit outcomes must name a unique subset of restored table aliases")
		}
		seen[o.TableKey] = true
	}

	for _, pin := range s.Tables {
		e, u := effects[pin.Identity], slots[pin.Identity]
		if pin.TableBranch != nil {
			return bad("table %q must target main", pin.TableKey)
		}
		if e.TableKey != pin.TableKey || u.TableKey != pin.TableKey {
			return bad("identity %s has inconsistent aliases across pin/effect/slot", pin.Identity)
		}
		post := pin.ExpectedVersion + 1
		if post == 0 { // saturating, as the reference adds
			post = pin.ExpectedVersion
		}
		if e.PlannedTransaction.ReadVersion != pin.ExpectedVersion || pin.PostCommitPin != post ||
			u.ExpectedVersion != pin.ExpectedVersion || u.TableBranch != nil {
			return bad("effect %q does not match its pin/delta pre-state", pin.TableKey)
		}
		if (e.Kind == FirstTouchDataset) != (pin.ExpectedVersion == 0) {
			return bad("effect %q has inconsistent first-touch identity", pin.TableKey)
		}
		switch p.EffectPhase {
		case Armed:
			if e.ConfirmedTransaction != nil || u.Confirmed != nil || pin.ConfirmedVersion != nil {
				return bad("Armed effect %q already carries confirmation", pin.TableKey)
			}
		case EffectsConfirmed:
			switch {
			case e.ConfirmedTransaction == nil:
				return bad("EffectsConfirmed effect %q lacks transaction confirmation", pin.TableKey)
			case u.Confirmed == nil:
				return bad("EffectsConfirmed effect %q lacks a manifest output", pin.TableKey)
			case *e.ConfirmedTransaction != e.PlannedTransaction || u.Confirmed.TableVersion != pin.PostCommitPin ||
				u.Confirmed.TableBranch != nil || !sameOpt(pin.ConfirmedVersion, &u.Confirmed.TableVersion):
				return bad("effect %q confirmation differs from its exact plan", pin.TableKey)
			}
		}
	}
	return nil
}

package recovery

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// Decoding is strict in the ways serde_json is and encoding/json is not, so a file the reference
// would refuse is never quietly read here:
//
//   - keys match exactly (encoding/json folds case: "Schema_Version" would match);
//   - a duplicate key in any object this package reads is refused;
//   - a required key that is missing is refused instead of becoming a zero value;
//   - null is accepted only where the reference has an Option, never for a number, string,
//     array, bool or struct;
//   - unknown enum variants are refused.
//
// Unknown keys are ignored, as serde ignores them. Every error names the path of the value.

// fields is one decoded JSON object: its members by exact key.
type fields map[string]json.RawMessage

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// object reads a JSON object, refusing null, non-objects and duplicate keys.
func object(raw json.RawMessage) (fields, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("expected an object, found %s", describe(raw))
	}
	f := fields{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("object key is not a string")
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if _, dup := f[key]; dup {
			return nil, fmt.Errorf("duplicate field `%s`", key)
		}
		f[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after object")
	}
	return f, nil
}

func describe(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case 'n':
		return "null"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a bool"
	}
	return "a number"
}

// at prefixes err with the path element key.
func at(key string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", key, err)
}

// req decodes a required, non-nullable member into dst.
func (f fields) req(key string, dst func(json.RawMessage) error) error {
	raw, ok := f[key]
	if !ok {
		return fmt.Errorf("missing field `%s`", key)
	}
	if isNull(raw) {
		return fmt.Errorf("%s: invalid type: null", key)
	}
	return at(key, dst(raw))
}

// opt decodes an Option member: absent and null both leave dst untouched and report false.
func (f fields) opt(key string, dst func(json.RawMessage) error) (bool, error) {
	raw, ok := f[key]
	if !ok || isNull(raw) {
		return false, nil
	}
	return true, at(key, dst(raw))
}

// def decodes a #[serde(default)] member that is not an Option: absent is fine, null is not.
func (f fields) def(key string, dst func(json.RawMessage) error) error {
	raw, ok := f[key]
	if !ok {
		return nil
	}
	if isNull(raw) {
		return fmt.Errorf("%s: invalid type: null", key)
	}
	return at(key, dst(raw))
}

// into decodes a scalar with encoding/json, which already refuses wrong types, fractions,
// signs and overflow for the integer kinds.
func into[T any](dst *T) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		if isNull(raw) {
			return fmt.Errorf("invalid type: null")
		}
		return json.Unmarshal(raw, dst)
	}
}

// ptr decodes an Option scalar into a freshly allocated value.
func ptr[T any](dst **T) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		v := new(T)
		if err := into(v)(raw); err != nil {
			return err
		}
		*dst = v
		return nil
	}
}

// unmarshaler is implemented by the pointer of every struct type this file decodes.
type unmarshaler[T any] interface {
	*T
	UnmarshalJSON([]byte) error
}

// list decodes a JSON array element by element, naming the failing index. An empty array
// yields a non-nil empty slice.
func list[T any, P unmarshaler[T]](dst *[]T) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		var items []json.RawMessage
		if isNull(raw) {
			return fmt.Errorf("invalid type: null")
		}
		if err := json.Unmarshal(raw, &items); err != nil {
			return err
		}
		out := make([]T, len(items))
		for i, item := range items {
			if err := P(&out[i]).UnmarshalJSON(item); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
		*dst = out
		return nil
	}
}

// rawList decodes an array whose elements are kept verbatim (payloads this package does not
// model). An empty array yields nil, which is written back as an omitted key.
func rawList(dst *[]json.RawMessage) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return err
		}
		if len(items) > 0 {
			*dst = items
		}
		return nil
	}
}

// rawObject keeps an object payload verbatim after checking it is an object.
func rawObject(dst *json.RawMessage) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		if _, err := object(raw); err != nil {
			return err
		}
		*dst = append(json.RawMessage(nil), raw...)
		return nil
	}
}

func identity(dst *ids.TableIdentity) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		f, err := object(raw)
		if err != nil {
			return err
		}
		return first(
			f.req("stable_table_id", into(&dst.StableTableID)),
			f.req("table_incarnation_id", into(&dst.TableIncarnationID)),
		)
	}
}

func versionMetadata(dst *publisher.TableVersionMetadata) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		f, err := object(raw)
		if err != nil {
			return err
		}
		return first(
			f.req("manifest_path", into(&dst.ManifestPath)),
			ignore(f.opt("manifest_size", ptr(&dst.ManifestSize))),
			ignore(f.opt("e_tag", ptr(&dst.ETag))),
			ignore(f.opt("naming_scheme", ptr(&dst.NamingScheme))),
		)
	}
}

// branchIdentifier reads {"version_mapping":[[u64,"uuid"],...]} strictly.
func branchIdentifier(dst *lance.BranchIdentifier) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		f, err := object(raw)
		if err != nil {
			return err
		}
		var pairs [][]json.RawMessage
		if err := f.req("version_mapping", into(&pairs)); err != nil {
			return err
		}
		out := make(lance.BranchIdentifier, len(pairs))
		for i, p := range pairs {
			if len(p) != 2 {
				return fmt.Errorf("version_mapping[%d]: expected a [version, uuid] pair", i)
			}
			if err := first(into(&out[i].ParentVersion)(p[0]), into(&out[i].UUID)(p[1])); err != nil {
				return fmt.Errorf("version_mapping[%d]: %w", i, err)
			}
		}
		*dst = out
		return nil
	}
}

func optBranchIdentifier(dst **lance.BranchIdentifier) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		var b lance.BranchIdentifier
		if err := branchIdentifier(&b)(raw); err != nil {
			return err
		}
		*dst = &b
		return nil
	}
}

func nested[T any, P unmarshaler[T]](dst *T) func(json.RawMessage) error {
	return func(raw json.RawMessage) error { return P(dst).UnmarshalJSON(raw) }
}

func optNested[T any, P unmarshaler[T]](dst **T) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		v := new(T)
		if err := P(v).UnmarshalJSON(raw); err != nil {
			return err
		}
		*dst = v
		return nil
	}
}

// first returns the first non-nil error, so a report names one problem.
func first(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func ignore(_ bool, err error) error { return err }

// UnmarshalJSON reads a sidecar strictly (see the comment at the top of this file). It does not
// check the schema version or any invariant; Parse does.
func (s *Sidecar) UnmarshalJSON(raw []byte) error {
	f, err := object(raw)
	if err != nil {
		return err
	}
	var v Sidecar
	err = first(
		f.req("schema_version", into(&v.SchemaVersion)),
		f.req("operation_id", into(&v.OperationID)),
		f.req("started_at", into(&v.StartedAt)),
		ignore(f.opt("branch", ptr(&v.Branch))),
		ignore(f.opt("actor_id", ptr(&v.ActorID))),
		f.req("writer_kind", writerKind(&v.WriterKind)),
		f.req("tables", list(&v.Tables)),
		ignore(f.opt("merge_source_commit_id", ptr(&v.MergeSourceCommitID))),
		f.def("additional_registrations", rawList(&v.AdditionalRegistrations)),
		f.def("tombstones", rawList(&v.Tombstones)),
		f.def("schema_apply_manifest_published", into(&v.SchemaApplyManifestPublished)),
		ignore(f.opt("schema_apply_target_schema_ir_hash", ptr(&v.SchemaApplyTargetSchemaIRHash))),
		ignore(f.opt("protocol_v3", optNested(&v.ProtocolV3))),
		ignore(f.opt("protocol_v4", optNested(&v.ProtocolV4))),
		ignore(f.opt("protocol_v7", optNested(&v.ProtocolV7))),
		ignore(f.opt("protocol_v8", rawObject(&v.ProtocolV8))),
		ignore(f.opt("ensure_indices_rollback_v6", rawObject(&v.EnsureIndicesRollbackV6))),
		ignore(f.opt("omnigraph_ingest_receipt", ptr(&v.IngestReceipt))),
	)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

func writerKind(dst *WriterKind) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		var name string
		if err := into(&name)(raw); err != nil {
			return err
		}
		if !WriterKind(name).valid() {
			return fmt.Errorf("unknown variant `%s`", name)
		}
		*dst = WriterKind(name)
		return nil
	}
}

func effectPhase(dst *EffectPhase) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		var name string
		if err := into(&name)(raw); err != nil {
			return err
		}
		if !EffectPhase(name).valid() {
			return fmt.Errorf("unknown variant `%s`", name)
		}
		*dst = EffectPhase(name)
		return nil
	}
}

func (p *TablePin) UnmarshalJSON(raw []byte) error {
	f, err := object(raw)
	if err != nil {
		return err
	}
	var v TablePin
	if err := first(
		f.req("identity", identity(&v.Identity)),
		f.req("table_key", into(&v.TableKey)),
		f.req("table_path", into(&v.TablePath)),
		f.req("expected_version", into(&v.ExpectedVersion)),
		f.req("post_commit_pin", into(&v.PostCommitPin)),
		ignore(f.opt("confirmed_version", ptr(&v.ConfirmedVersion))),
		ignore(f.opt("table_branch", ptr(&v.TableBranch))),
	); err != nil {
		return err
	}
	*p = v
	return nil
}

func (t *Transaction) UnmarshalJSON(raw []byte) error {
	f, err := object(raw)
	if err != nil {
		return err
	}
	var v Transaction
	if err := first(
		f.req("read_version", into(&v.ReadVersion)),
		f.req("uuid", into(&v.UUID)),
	); err != nil {
		return err
	}
	*t = v
	return nil
}

func (a *Authority) UnmarshalJSON(raw []byte) error {
	f, err := object(raw)
	if err != nil {
		return err
	}
	var v Authority
	if err := first(
		f.req("branch_identifier", branchIdentifier(&v.BranchIdentifier)),
		ignore(f.opt("graph_head", ptr(&v.GraphHead))),
		f.req("schema_identity_domain", into(&v.SchemaIdentityDomain)),
		f.req("schema_ir_hash", into(&v.SchemaIRHash)),
		f.req("schema_identity_version", into(&v.SchemaIdentityVersion)),
	); err != nil {
		return err
	}
	*a = v
	return nil
}

func (l *Lineage) UnmarshalJSON(raw []byte) error {
	f, err := object(raw)
	if err != nil {
		return err
	}
	var v Lineage
	if err := first(
		f.req("graph_commit_id", into(&v.GraphCommitID)),
		ignore(f.opt("branch", ptr(&v.Branch))),
		ignore(f.opt("actor_id", ptr(&v.ActorID))),
		ignore(f.opt("merged_parent_commit_id", ptr(&v.MergedParentCommitID))),
		f.req("created_at", into(&v.CreatedAt)),
	); err != nil {
		return err
	}
	*l = v
	return nil
}

func (o *TableOutcome) UnmarshalJSON(raw []byte) error {
	f, err := object(raw)
	if err != nil {
		return err
	}
	var v TableOutcome
	if err := first(
		f.req("table_key", into(&v.TableKey)),
		f.req("from_version", into(&v.FromVersion)),
		f.req("to_version", into(&v.ToVersion)),
	); err != nil {
		return err
	}
	*o = v
	return nil
}

func (e *Effect) UnmarshalJSON(raw []byte) error {
	f, err := object(raw)
	if err != nil {
		return err
	}
	var v Effect
	if err := first(
		f.req("identity", identity(&v.Identity)),
		f.req("table_key", into(&v.TableKey)),
		f.req("planned_transaction", nested(&v.PlannedTransaction)),
		ignore(f.opt("confirmed_transaction", optNested(&v.ConfirmedTransaction))),
	); err != nil {
		return err
	}
	*e = v
	return nil
}

func (c *ConfirmedUpdate) UnmarshalJSON(raw []byte) error {
	f, err := object(raw)
	if err != nil {
		return err
	}
	var v ConfirmedUpdate
	if err := first(
		f.req("table_version", into(&v.TableVersion)),
		ignore(f.opt("table_branch", ptr(&v.TableBranch))),
		f.req("row_count", into(&v.RowCount)),
		f.req("version_metadata", versionMetadata(&v.VersionMetadata)),
	); err != nil {
		return err
	}
	*c = v
	return nil
}

func (u *TableUpdate) UnmarshalJSON(raw []byte) error {
	f, err := object(raw)
	if err != nil {
		return err
	}
	var v TableUpdate
	if err := first(
		f.req("identity", identity(&v.Identity)),
		f.req("table_key", into(&v.TableKey)),
		f.req("expected_version", into(&v.ExpectedVersion)),
		ignore(f.opt("table_branch", ptr(&v.TableBranch))),
		ignore(f.opt("confirmed", optNested(&v.Confirmed))),
	); err != nil {
		return err
	}
	*u = v
	return nil
}

func (d *IntendedDelta) UnmarshalJSON(raw []byte) error {
	f, err := object(raw)
	if err != nil {
		return err
	}
	var v IntendedDelta
	if err := first(
		f.req("table_updates", list(&v.TableUpdates)),
		f.def("registrations", list(&v.Registrations)),
		f.def("renames", list(&v.Renames)),
		f.def("tombstones", list(&v.Tombstones)),
	); err != nil {
		return err
	}
	*d = v
	return nil
}

func (r *Registration) UnmarshalJSON(raw []byte) error {
	f, err := object(raw)
	if err != nil {
		return err
	}
	var v Registration
	if err := first(
		f.req("identity", identity(&v.Identity)),
		f.req("table_key", into(&v.TableKey)),
		f.req("table_path", into(&v.TablePath)),
		ignore(f.opt("table_branch", ptr(&v.TableBranch))),
	); err != nil {
		return err
	}
	*r = v
	return nil
}

func (r *Rename) UnmarshalJSON(raw []byte) error {
	f, err := object(raw)
	if err != nil {
		return err
	}
	var v Rename
	if err := first(
		f.req("identity", identity(&v.Identity)),
		f.req("expected_table_key", into(&v.ExpectedTableKey)),
		f.req("expected_version", into(&v.ExpectedVersion)),
		f.req("table_key", into(&v.TableKey)),
		f.req("table_path", into(&v.TablePath)),
	); err != nil {
		return err
	}
	*r = v
	return nil
}

func (t *Tombstone) UnmarshalJSON(raw []byte) error {
	f, err := object(raw)
	if err != nil {
		return err
	}
	var v Tombstone
	if err := first(
		f.req("identity", identity(&v.Identity)),
		f.req("table_key", into(&v.TableKey)),
		f.req("tombstone_version", into(&v.TombstoneVersion)),
	); err != nil {
		return err
	}
	*t = v
	return nil
}

// common reads the members ProtocolV3, ProtocolV4 and ProtocolV7 share, except effects.
func common(f fields, a *Authority, l *Lineage, rollback *string, outcomes *[]TableOutcome, phase *EffectPhase, delta *IntendedDelta) error {
	return first(
		f.req("authority", nested(a)),
		f.req("lineage", nested(l)),
		f.req("rollback_graph_commit_id", into(rollback)),
		ignore(f.opt("rollback_audit_outcomes", list(outcomes))),
		f.req("effect_phase", effectPhase(phase)),
		f.req("intended_delta", nested(delta)),
	)
}

func (p *ProtocolV3) UnmarshalJSON(raw []byte) error {
	f, err := object(raw)
	if err != nil {
		return err
	}
	var v ProtocolV3
	if err := first(
		common(f, &v.Authority, &v.Lineage, &v.RollbackGraphCommitID, &v.RollbackAuditOutcomes, &v.EffectPhase, &v.IntendedDelta),
		f.req("effects", list(&v.Effects)),
	); err != nil {
		return err
	}
	*p = v
	return nil
}

func (p *ProtocolV4) UnmarshalJSON(raw []byte) error {
	f, err := object(raw)
	if err != nil {
		return err
	}
	var v ProtocolV4
	if err := first(
		common(f, &v.Authority, &v.Lineage, &v.RollbackGraphCommitID, &v.RollbackAuditOutcomes, &v.EffectPhase, &v.IntendedDelta),
		f.req("effects", list(&v.Effects)),
	); err != nil {
		return err
	}
	*p = v
	return nil
}

func (p *ProtocolV7) UnmarshalJSON(raw []byte) error {
	f, err := object(raw)
	if err != nil {
		return err
	}
	var v ProtocolV7
	if err := first(
		common(f, &v.Authority, &v.Lineage, &v.RollbackGraphCommitID, &v.RollbackAuditOutcomes, &v.EffectPhase, &v.IntendedDelta),
		f.req("target_schema_ir_hash", into(&v.TargetSchemaIRHash)),
		f.req("effects", list(&v.Effects)),
	); err != nil {
		return err
	}
	*p = v
	return nil
}

// UnmarshalJSON reads the effect and its internally tagged "kind" object; both variants carry
// planned_transaction (required) and confirmed_transaction (Option).
func (e *SchemaEffect) UnmarshalJSON(raw []byte) error {
	f, err := object(raw)
	if err != nil {
		return err
	}
	var v SchemaEffect
	kind := func(raw json.RawMessage) error {
		k, err := object(raw)
		if err != nil {
			return err
		}
		var tag string
		if err := k.req("kind", into(&tag)); err != nil {
			return err
		}
		if !SchemaEffectKind(tag).valid() {
			return fmt.Errorf("kind: unknown variant `%s`", tag)
		}
		v.Kind = SchemaEffectKind(tag)
		return first(
			k.req("planned_transaction", nested(&v.PlannedTransaction)),
			ignore(k.opt("confirmed_transaction", optNested(&v.ConfirmedTransaction))),
		)
	}
	if err := first(
		f.req("identity", identity(&v.Identity)),
		f.req("table_key", into(&v.TableKey)),
		f.req("kind", kind),
	); err != nil {
		return err
	}
	*e = v
	return nil
}

func (e *MergeEffect) UnmarshalJSON(raw []byte) error {
	f, err := object(raw)
	if err != nil {
		return err
	}
	var v MergeEffect
	if err := first(
		f.req("identity", identity(&v.Identity)),
		f.req("table_key", into(&v.TableKey)),
		f.req("kind", nested(&v.Kind)),
	); err != nil {
		return err
	}
	*e = v
	return nil
}

func (k *MergeEffectKind) UnmarshalJSON(raw []byte) error {
	f, err := object(raw)
	if err != nil {
		return err
	}
	var v MergeEffectKind
	var tag string
	if err := f.req("kind", into(&tag)); err != nil {
		return err
	}
	v.Kind = MergeKind(tag)
	switch v.Kind {
	case MultiCommitHead:
		err = first(
			ignore(f.opt("source_fork_version", ptr(&v.SourceForkVersion))),
			f.req("planned_transactions", list(&v.PlannedTransactions)),
			ignore(f.opt("confirmed_version", ptr(&v.ConfirmedVersion))),
			ignore(f.opt("confirmed_branch_identifier", optBranchIdentifier(&v.ConfirmedBranchIdentifier))),
		)
	case RefOnlyFork:
		err = first(
			f.req("source_version", into(&v.SourceVersion)),
			ignore(f.opt("confirmed_branch_identifier", optBranchIdentifier(&v.ConfirmedBranchIdentifier))),
		)
	default:
		err = fmt.Errorf("kind: unknown variant `%s`", tag)
	}
	if err != nil {
		return err
	}
	*k = v
	return nil
}

package recovery

import (
	"slices"
	"strconv"
	"time"

	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// SchemaApplyTable is one table a SchemaApply writes: an existing table it overwrites
// (FirstTouch false, ExpectedVersion = its manifest pin) or an added type's new dataset
// (FirstTouch true, ExpectedVersion 0).
type SchemaApplyTable struct {
	Identity        ids.TableIdentity
	TableKey        string // "node:<Type>" or "edge:<Edge>"; a renamed table's NEW key
	ExpectedVersion uint64
	FirstTouch      bool
}

// SchemaApplySpec is everything a SchemaApply knows when it arms recovery. A SchemaApply always
// publishes on main.
type SchemaApplySpec struct {
	Root    string  // graph root location, as LoadSpec.Root
	ActorID *string // must equal Lineage.ActorID
	// Authority is main's token: its branch identifier, its exact graph head and the ACCEPTED
	// (pre-apply) schema identity.
	Authority Authority
	// Lineage is the pre-minted graph commit; GraphCommitID must be a ULID, Branch nil (main)
	// and MergedParentCommitID nil.
	Lineage            Lineage
	TargetSchemaIRHash string
	// Tables may be empty (a metadata-only apply); order is kept.
	Tables []SchemaApplyTable
	// Registrations are exactly the FirstTouch tables' identities (graph-relative paths);
	// Renames and Tombstones are the metadata-only rebinds and removals.
	Registrations []Registration
	Renames       []Rename
	Tombstones    []Tombstone
}

// NewSchemaApplySidecar builds an Armed v9 SchemaApply sidecar (protocol_v7) with a fresh
// operation_id and rollback_graph_commit_id, one pin per table (post_commit_pin =
// expected_version + 1, path "{Root}/nodes|edges/{stable:016x}-{inc:016x}", on main), one effect
// per table with a pre-minted planned transaction {read_version: ExpectedVersion, uuid:
// "omnigraph-schema-<ULID>"} (FirstTouchDataset for a first-touch table, else
// ExistingOverwrite), one intended-delta slot per table, and the given registrations, renames and
// tombstones. The result is validated exactly as Parse would validate it.
func NewSchemaApplySidecar(spec SchemaApplySpec) (*Sidecar, error) {
	op := ids.NewULID()
	file := Key(op)
	if !ids.IsULID(spec.Lineage.GraphCommitID) {
		return nil, refuse(file, KindShape, "lineage graph_commit_id %q is not a canonical ULID", spec.Lineage.GraphCommitID)
	}
	rollback := ids.NewULID()
	for rollback == spec.Lineage.GraphCommitID || rollback == op {
		rollback = ids.NewULID()
	}
	s := &Sidecar{
		SchemaVersion: SchemaVersion,
		OperationID:   op,
		StartedAt:     strconv.FormatInt(time.Now().UnixMicro(), 10),
		ActorID:       spec.ActorID,
		WriterKind:    SchemaApply,
		Tables:        make([]TablePin, 0, len(spec.Tables)),
		ProtocolV7: &ProtocolV7{
			Authority:             spec.Authority,
			Lineage:               spec.Lineage,
			RollbackGraphCommitID: rollback,
			TargetSchemaIRHash:    spec.TargetSchemaIRHash,
			EffectPhase:           Armed,
			Effects:               make([]SchemaEffect, 0, len(spec.Tables)),
			IntendedDelta: IntendedDelta{
				TableUpdates:  make([]TableUpdate, 0, len(spec.Tables)),
				Registrations: cloneDelta(spec.Registrations),
				Renames:       slices.Clone(spec.Renames),
				Tombstones:    slices.Clone(spec.Tombstones),
			},
		},
	}
	p := s.ProtocolV7
	for _, t := range spec.Tables {
		path, ok := TablePath(spec.Root, t.TableKey, t.Identity)
		if !ok {
			return nil, refuse(file, KindShape, "invalid table key %q", t.TableKey)
		}
		if t.ExpectedVersion == ^uint64(0) {
			return nil, refuse(file, KindShape, "table %q expected_version has no successor", t.TableKey)
		}
		kind := ExistingOverwrite
		if t.FirstTouch {
			kind = FirstTouchDataset
		}
		s.Tables = append(s.Tables, TablePin{
			Identity:        t.Identity,
			TableKey:        t.TableKey,
			TablePath:       path,
			ExpectedVersion: t.ExpectedVersion,
			PostCommitPin:   t.ExpectedVersion + 1,
		})
		p.Effects = append(p.Effects, SchemaEffect{
			Identity:           t.Identity,
			TableKey:           t.TableKey,
			Kind:               kind,
			PlannedTransaction: Transaction{ReadVersion: t.ExpectedVersion, UUID: "omnigraph-schema-" + ids.NewULID()},
		})
		p.IntendedDelta.TableUpdates = append(p.IntendedDelta.TableUpdates, TableUpdate{
			Identity:        t.Identity,
			TableKey:        t.TableKey,
			ExpectedVersion: t.ExpectedVersion,
		})
	}
	if err := s.validate(file, spec.Root); err != nil {
		return nil, err
	}
	return s, nil
}

// cloneDelta copies registrations together with their branch pointers.
func cloneDelta(rs []Registration) []Registration {
	out := slices.Clone(rs)
	for i := range out {
		out[i].TableBranch = copyOpt(out[i].TableBranch)
	}
	return out
}

// SchemaApplyDone is what one table effect achieved: the Lance transaction that committed and
// the exact manifest update the apply will publish for it.
type SchemaApplyDone struct {
	Transaction Transaction
	Update      publisher.DatasetUpdate
}

// ConfirmSchemaApply returns the EffectsConfirmed form of an Armed SchemaApply sidecar: every
// effect gets its confirmed_transaction, every slot its exact confirmed update, every pin its
// confirmed_version. done holds one result per planned table, keyed by identity; a metadata-only
// apply (no tables) passes none and only the phase moves.
//
// It refuses (*SidecarError, KindConfirm) a missing or extra table, a committed transaction that
// differs from the planned one, and an update that names another identity or alias, or whose
// version is not the pin's post_commit_pin or whose branch is not main. s itself is never
// modified, as with Confirm.
func (s *Sidecar) ConfirmSchemaApply(done map[ids.TableIdentity]SchemaApplyDone) (*Sidecar, error) {
	file := Key(s.OperationID)
	if err := s.validateShape(file); err != nil {
		return nil, err
	}
	p := s.ProtocolV7
	if s.WriterKind != SchemaApply || p == nil {
		return nil, refuse(file, KindConfirm, "only a SchemaApply sidecar can be confirmed here")
	}
	if p.EffectPhase != Armed {
		return nil, refuse(file, KindConfirm, "sidecar is already %s", p.EffectPhase)
	}
	if len(done) != len(p.Effects) {
		return nil, refuse(file, KindConfirm, "confirmation key set differs from the planned effects (%d results for %d effects)", len(done), len(p.Effects))
	}
	pins := make(map[ids.TableIdentity]*TablePin, len(s.Tables))
	for i := range s.Tables {
		pins[s.Tables[i].Identity] = &s.Tables[i]
	}
	for _, e := range p.Effects {
		d, ok := done[e.Identity]
		if !ok {
			return nil, refuse(file, KindConfirm, "confirmation key set differs from the planned effects (no result for %q)", e.TableKey)
		}
		if d.Transaction != e.PlannedTransaction {
			return nil, refuse(file, KindConfirm, "table %q committed transaction {read_version: %d, uuid: %q}, planned {read_version: %d, uuid: %q}; leaving recovery Armed",
				e.TableKey, d.Transaction.ReadVersion, d.Transaction.UUID, e.PlannedTransaction.ReadVersion, e.PlannedTransaction.UUID)
		}
		pin, u := pins[e.Identity], d.Update
		if u.Identity != e.Identity || u.TableKey != e.TableKey || u.Version != pin.PostCommitPin || !sameOpt(u.Branch, pin.TableBranch) {
			return nil, refuse(file, KindConfirm, "table %q achieved %s %q version %d on branch %s, planned %s %q version %d on branch %s; leaving recovery Armed",
				e.TableKey, u.Identity, u.TableKey, u.Version, branchText(u.Branch), e.Identity, e.TableKey, pin.PostCommitPin, branchText(pin.TableBranch))
		}
	}

	c := s.confirmCopy()
	cp := *p
	cp.Effects = slices.Clone(p.Effects)
	cp.IntendedDelta.TableUpdates = slices.Clone(p.IntendedDelta.TableUpdates)
	c.ProtocolV7 = &cp
	for i := range cp.Effects {
		txn := done[cp.Effects[i].Identity].Transaction
		cp.Effects[i].ConfirmedTransaction = &txn
	}
	for i := range cp.IntendedDelta.TableUpdates {
		u := done[cp.IntendedDelta.TableUpdates[i].Identity].Update
		cp.IntendedDelta.TableUpdates[i].Confirmed = &ConfirmedUpdate{
			TableVersion:    u.Version,
			TableBranch:     copyOpt(u.Branch),
			RowCount:        u.RowCount,
			VersionMetadata: copyMeta(u.Meta),
		}
	}
	for i := range c.Tables {
		v := done[c.Tables[i].Identity].Update.Version
		c.Tables[i].ConfirmedVersion = &v
	}
	cp.EffectPhase = EffectsConfirmed
	if err := c.validateShape(file); err != nil {
		return nil, err
	}
	return c, nil
}

package recovery

import (
	"slices"
	"strconv"
	"time"

	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// PlannedTable is one table a Load prepared: where it stands and the Lance transaction identity
// pre-minted for its single commit.
type PlannedTable struct {
	Identity        ids.TableIdentity
	TableKey        string  // "node:<Type>" or "edge:<Edge>"
	ExpectedVersion uint64  // manifest pin at prepare
	TableBranch     *string // Lance branch the commit lands on (first-touch fork: the graph branch); nil = main
	// Transaction is the planned commit; ReadVersion must equal ExpectedVersion and UUID must
	// be non-empty and unique across the sidecar.
	Transaction Transaction
}

// LoadSpec is everything a Load knows when it arms recovery.
type LoadSpec struct {
	// Root is the graph root location the table pins are built under: storage
	// Location("") without the trailing '/', e.g. "/data/g1" or "s3://bucket/g1".
	Root      string
	Branch    *string // graph branch; nil = main
	ActorID   *string // must equal Lineage.ActorID
	Authority Authority
	// Lineage is the pre-minted graph commit; its GraphCommitID must be a ULID and its Branch
	// and ActorID must agree with the envelope. MergedParentCommitID must be nil.
	Lineage Lineage
	Tables  []PlannedTable // at least one; order is kept
}

// NewLoadSidecar builds an Armed v9 Load sidecar with a fresh operation_id and a fresh
// rollback_graph_commit_id, one pin per table (post_commit_pin = expected_version + 1, path
// "{Root}/nodes|edges/{stable:016x}-{inc:016x}"), one planned effect and one manifest slot per
// pin. The result is validated exactly as Parse would validate it.
func NewLoadSidecar(spec LoadSpec) (*Sidecar, error) {
	op := ids.NewULID()
	file := Key(op)
	if len(spec.Tables) == 0 {
		return nil, refuse(file, KindShape, "a Load sidecar needs at least one table")
	}
	if !ids.IsULID(spec.Lineage.GraphCommitID) {
		return nil, refuse(file, KindShape, "lineage graph_commit_id %q is not a canonical ULID", spec.Lineage.GraphCommitID)
	}
	s := &Sidecar{
		SchemaVersion: SchemaVersion,
		OperationID:   op,
		StartedAt:     strconv.FormatInt(time.Now().UnixMicro(), 10),
		Branch:        spec.Branch,
		ActorID:       spec.ActorID,
		WriterKind:    Load,
		Tables:        make([]TablePin, 0, len(spec.Tables)),
		ProtocolV3: &ProtocolV3{
			Authority:             spec.Authority,
			Lineage:               spec.Lineage,
			RollbackGraphCommitID: ids.NewULID(),
			EffectPhase:           Armed,
			Effects:               make([]Effect, 0, len(spec.Tables)),
			IntendedDelta:         IntendedDelta{TableUpdates: make([]TableUpdate, 0, len(spec.Tables))},
		},
	}
	for _, t := range spec.Tables {
		path, ok := TablePath(spec.Root, t.TableKey, t.Identity)
		if !ok {
			return nil, refuse(file, KindShape, "invalid table key %q", t.TableKey)
		}
		if t.ExpectedVersion == ^uint64(0) {
			return nil, refuse(file, KindShape, "table %q expected_version has no successor", t.TableKey)
		}
		if t.Transaction.UUID == "" {
			return nil, refuse(file, KindShape, "table %q has no planned transaction uuid", t.TableKey)
		}
		s.Tables = append(s.Tables, TablePin{
			Identity:        t.Identity,
			TableKey:        t.TableKey,
			TablePath:       path,
			ExpectedVersion: t.ExpectedVersion,
			PostCommitPin:   t.ExpectedVersion + 1,
			TableBranch:     t.TableBranch,
		})
		s.ProtocolV3.Effects = append(s.ProtocolV3.Effects, Effect{
			Identity:           t.Identity,
			TableKey:           t.TableKey,
			PlannedTransaction: t.Transaction,
		})
		s.ProtocolV3.IntendedDelta.TableUpdates = append(s.ProtocolV3.IntendedDelta.TableUpdates, TableUpdate{
			Identity:        t.Identity,
			TableKey:        t.TableKey,
			ExpectedVersion: t.ExpectedVersion,
			TableBranch:     t.TableBranch,
		})
	}
	if err := s.validate(file, spec.Root); err != nil {
		return nil, err
	}
	return s, nil
}

// Confirm returns the EffectsConfirmed form of an Armed Mutation/Load sidecar: every effect gets
// its confirmed_transaction, every slot its exact confirmed update, every pin its
// confirmed_version. updates are the exact manifest updates the writer will publish and
// committed the transaction identities Lance reported, one per planned table each.
//
// It refuses (*SidecarError, KindConfirm) a missing or extra table, a committed transaction that
// differs from the planned one, and an update whose version is not the pin's post_commit_pin or
// whose branch is not the pin's table_branch. s itself is never modified, so after a refusal or
// a failed Rewrite the caller still holds the Armed sidecar that is on disk.
func (s *Sidecar) Confirm(updates []publisher.DatasetUpdate, committed map[ids.TableIdentity]Transaction) (*Sidecar, error) {
	file := Key(s.OperationID)
	if err := s.validateShape(file); err != nil {
		return nil, err
	}
	p := s.ProtocolV3
	if p == nil || (s.WriterKind != Load && s.WriterKind != Mutation) {
		return nil, refuse(file, KindConfirm, "only a Mutation/Load sidecar can be confirmed")
	}
	if p.EffectPhase != Armed {
		return nil, refuse(file, KindConfirm, "sidecar is already %s", p.EffectPhase)
	}
	byID := make(map[ids.TableIdentity]*publisher.DatasetUpdate, len(updates))
	for i := range updates {
		if byID[updates[i].Identity] != nil {
			return nil, refuse(file, KindConfirm, "duplicate update for table identity %s", updates[i].Identity)
		}
		byID[updates[i].Identity] = &updates[i]
	}
	if len(byID) != len(p.Effects) || len(committed) != len(p.Effects) {
		return nil, refuse(file, KindConfirm, "confirmation key set differs from the planned effects")
	}
	pins := make(map[ids.TableIdentity]*TablePin, len(s.Tables))
	for i := range s.Tables {
		pins[s.Tables[i].Identity] = &s.Tables[i]
	}
	for _, e := range p.Effects {
		u := byID[e.Identity]
		txn, had := committed[e.Identity]
		if u == nil || !had {
			return nil, refuse(file, KindConfirm, "confirmation key set differs from the planned effects (no result for %q)", e.TableKey)
		}
		if txn != e.PlannedTransaction {
			return nil, refuse(file, KindConfirm, "table %q committed transaction {read_version: %d, uuid: %q}, planned {read_version: %d, uuid: %q}; leaving recovery Armed",
				e.TableKey, txn.ReadVersion, txn.UUID, e.PlannedTransaction.ReadVersion, e.PlannedTransaction.UUID)
		}
		pin := pins[e.Identity]
		if u.TableKey != e.TableKey || u.Version != pin.PostCommitPin || !sameOpt(u.Branch, pin.TableBranch) {
			return nil, refuse(file, KindConfirm, "table %q achieved version %d on branch %s, planned %d on branch %s; leaving recovery Armed",
				e.TableKey, u.Version, branchText(u.Branch), pin.PostCommitPin, branchText(pin.TableBranch))
		}
	}

	c := s.confirmCopy()
	cp := c.ProtocolV3
	for i := range cp.Effects {
		txn := committed[cp.Effects[i].Identity]
		cp.Effects[i].ConfirmedTransaction = &txn
	}
	for i := range cp.IntendedDelta.TableUpdates {
		u := byID[cp.IntendedDelta.TableUpdates[i].Identity]
		cp.IntendedDelta.TableUpdates[i].Confirmed = &ConfirmedUpdate{
			TableVersion:    u.Version,
			TableBranch:     copyOpt(u.Branch),
			RowCount:        u.RowCount,
			VersionMetadata: copyMeta(u.Meta),
		}
	}
	for i := range c.Tables {
		v := byID[c.Tables[i].Identity].Version
		c.Tables[i].ConfirmedVersion = &v
	}
	cp.EffectPhase = EffectsConfirmed
	if err := c.validateShape(file); err != nil {
		return nil, err
	}
	return c, nil
}

// confirmCopy copies s for a confirmation: everything a confirmation writes (the pins, the
// protocol block, its effects and its intended table updates) gets storage of its own, and the
// rest is shared with s. Neither sidecar is changed in place afterwards, so s stays exactly the
// Armed sidecar on disk.
func (s *Sidecar) confirmCopy() *Sidecar {
	c := *s
	c.Tables = slices.Clone(s.Tables)
	if s.ProtocolV3 != nil {
		p := *s.ProtocolV3
		p.Effects = slices.Clone(p.Effects)
		p.IntendedDelta.TableUpdates = slices.Clone(p.IntendedDelta.TableUpdates)
		c.ProtocolV3 = &p
	}
	if s.ProtocolV4 != nil {
		p := *s.ProtocolV4
		p.Effects = slices.Clone(p.Effects)
		p.IntendedDelta.TableUpdates = slices.Clone(p.IntendedDelta.TableUpdates)
		c.ProtocolV4 = &p
	}
	return &c
}

func copyOpt[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func copyMeta(m publisher.TableVersionMetadata) publisher.TableVersionMetadata {
	return publisher.TableVersionMetadata{
		ManifestPath: m.ManifestPath,
		ManifestSize: copyOpt(m.ManifestSize),
		ETag:         copyOpt(m.ETag),
		NamingScheme: copyOpt(m.NamingScheme),
	}
}

func branchText(b *string) string {
	if b == nil {
		return "main"
	}
	return strconv.Quote(*b)
}

// StartedAtMicros reads started_at. The reference tolerates an unparsable value (it falls back
// to the current time), so Parse does not refuse one; ok is false then.
func (s *Sidecar) StartedAtMicros() (int64, bool) {
	v, err := strconv.ParseInt(s.StartedAt, 10, 64)
	return v, err == nil
}

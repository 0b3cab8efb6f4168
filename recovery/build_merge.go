package recovery

import (
	"strconv"
	"time"

	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// MaxMergeChain is the most data transactions one BranchMerge may commit to one table
// (MAX_BRANCH_MERGE_DATA_TRANSACTIONS).
const MaxMergeChain = 1024

// MergeTable is one table a BranchMerge will move physically.
type MergeTable struct {
	Identity        ids.TableIdentity
	TableKey        string
	ExpectedVersion uint64  // the target's manifest pin at prepare
	TableBranch     *string // the Lance branch the effect lands on (the target's; nil = main)
	Kind            MergeKind
	// MultiCommitHead: the ordered chain (read versions ExpectedVersion, +1, …) and, for a
	// first-touch target, the inherited version its ref is forked at (= ExpectedVersion).
	Chain             []Transaction
	SourceForkVersion *uint64
	// RefOnlyFork: the source table version the target's new ref is created from.
	SourceVersion uint64
}

// PostCommitPin is the table version the effect ends at.
func (t *MergeTable) PostCommitPin() uint64 {
	if t.Kind == RefOnlyFork {
		return t.SourceVersion
	}
	return t.ExpectedVersion + uint64(len(t.Chain))
}

// MergePointer is a manifest slot a BranchMerge publishes with no physical effect: the target
// adopts a table version that already exists elsewhere (for example a main version).
type MergePointer struct {
	Identity        ids.TableIdentity
	TableKey        string
	ExpectedVersion uint64
	TableBranch     *string // the table branch the slot will point at (the adopted version's)
}

// MergeSpec is everything a BranchMerge knows when it arms recovery.
type MergeSpec struct {
	Root      string
	Branch    *string // the target graph branch; nil = main
	ActorID   *string
	Authority Authority // the target's token
	Lineage   Lineage   // MergedParentCommitID = the captured source head
	Tables    []MergeTable
	Pointers  []MergePointer
}

// NewMergeSidecar builds an Armed v9 BranchMerge sidecar (protocol_v4): one pin and one effect
// per physical table, one intended-delta slot per physical table and per pointer.
func NewMergeSidecar(spec MergeSpec) (*Sidecar, error) {
	op := ids.NewULID()
	file := Key(op)
	if len(spec.Tables) == 0 {
		return nil, refuse(file, KindShape, "a BranchMerge sidecar needs at least one physical table")
	}
	s := &Sidecar{
		SchemaVersion: SchemaVersion,
		OperationID:   op,
		StartedAt:     strconv.FormatInt(time.Now().UnixMicro(), 10),
		Branch:        spec.Branch,
		ActorID:       spec.ActorID,
		WriterKind:    BranchMerge,
		ProtocolV4: &ProtocolV4{
			Authority:             spec.Authority,
			Lineage:               spec.Lineage,
			RollbackGraphCommitID: ids.NewULID(),
			EffectPhase:           Armed,
		},
	}
	p := s.ProtocolV4
	for _, t := range spec.Tables {
		path, ok := TablePath(spec.Root, t.TableKey, t.Identity)
		if !ok {
			return nil, refuse(file, KindShape, "invalid table key %q", t.TableKey)
		}
		kind := MergeEffectKind{Kind: t.Kind}
		switch t.Kind {
		case MultiCommitHead:
			if len(t.Chain) == 0 || len(t.Chain) > MaxMergeChain {
				return nil, refuse(file, KindShape, "table %q chain has %d transactions (1..%d)", t.TableKey, len(t.Chain), MaxMergeChain)
			}
			for i, tx := range t.Chain {
				if tx.ReadVersion != t.ExpectedVersion+uint64(i) || tx.UUID == "" {
					return nil, refuse(file, KindShape, "table %q chain step %d is not contiguous from %d", t.TableKey, i, t.ExpectedVersion)
				}
			}
			kind.PlannedTransactions = t.Chain
			kind.SourceForkVersion = t.SourceForkVersion
		case RefOnlyFork:
			kind.SourceVersion = t.SourceVersion
		default:
			return nil, refuse(file, KindShape, "table %q: unknown effect kind %q", t.TableKey, t.Kind)
		}
		s.Tables = append(s.Tables, TablePin{Identity: t.Identity, TableKey: t.TableKey, TablePath: path,
			ExpectedVersion: t.ExpectedVersion, PostCommitPin: t.PostCommitPin(), TableBranch: t.TableBranch})
		p.Effects = append(p.Effects, MergeEffect{Identity: t.Identity, TableKey: t.TableKey, Kind: kind})
		p.IntendedDelta.TableUpdates = append(p.IntendedDelta.TableUpdates, TableUpdate{Identity: t.Identity, TableKey: t.TableKey,
			ExpectedVersion: t.ExpectedVersion, TableBranch: t.TableBranch})
	}
	for _, t := range spec.Pointers {
		p.IntendedDelta.TableUpdates = append(p.IntendedDelta.TableUpdates, TableUpdate{Identity: t.Identity, TableKey: t.TableKey,
			ExpectedVersion: t.ExpectedVersion, TableBranch: t.TableBranch})
	}
	if err := s.validate(file, spec.Root); err != nil {
		return nil, err
	}
	return s, nil
}

// ConfirmMerge returns the EffectsConfirmed form of an Armed BranchMerge sidecar. updates are
// the exact manifest updates the merge will publish (one per intended-delta slot); refs are the
// branch identifiers of the table refs the merge created (first-touch forks and ref-only forks).
// A physical table must have reached exactly its post-commit pin.
func (s *Sidecar) ConfirmMerge(updates []publisher.DatasetUpdate, refs map[ids.TableIdentity]lance.BranchIdentifier) (*Sidecar, error) {
	file := Key(s.OperationID)
	p := s.ProtocolV4
	if s.WriterKind != BranchMerge || p == nil {
		return nil, refuse(file, KindConfirm, "only a BranchMerge sidecar can be confirmed here")
	}
	if p.EffectPhase != Armed {
		return nil, refuse(file, KindConfirm, "sidecar is already %s", p.EffectPhase)
	}
	byID := make(map[ids.TableIdentity]*publisher.DatasetUpdate, len(updates))
	for i := range updates {
		byID[updates[i].Identity] = &updates[i]
	}
	if len(byID) != len(p.IntendedDelta.TableUpdates) {
		return nil, refuse(file, KindConfirm, "confirmation covers %d tables, the intended delta %d", len(byID), len(p.IntendedDelta.TableUpdates))
	}
	c := s.confirmCopy()
	cp := c.ProtocolV4
	for i := range c.Tables {
		pin := &c.Tables[i]
		u := byID[pin.Identity]
		if u == nil || u.Version != pin.PostCommitPin || !sameOpt(u.Branch, pin.TableBranch) {
			return nil, refuse(file, KindConfirm, "table %q did not reach its planned version %d on branch %s; leaving recovery Armed",
				pin.TableKey, pin.PostCommitPin, branchText(pin.TableBranch))
		}
		v := u.Version
		pin.ConfirmedVersion = &v
	}
	for i := range cp.Effects {
		e := &cp.Effects[i]
		if e.Kind.Kind == MultiCommitHead {
			v := byID[e.Identity].Version
			e.Kind.ConfirmedVersion = &v
		}
		if id, ok := refs[e.Identity]; ok {
			id := append(lance.BranchIdentifier{}, id...)
			e.Kind.ConfirmedBranchIdentifier = &id
		}
	}
	for i := range cp.IntendedDelta.TableUpdates {
		slot := &cp.IntendedDelta.TableUpdates[i]
		u := byID[slot.Identity]
		if u == nil {
			return nil, refuse(file, KindConfirm, "no confirmed update for %q", slot.TableKey)
		}
		slot.Confirmed = &ConfirmedUpdate{TableVersion: u.Version, TableBranch: copyOpt(u.Branch), RowCount: u.RowCount, VersionMetadata: copyMeta(u.Meta)}
	}
	cp.EffectPhase = EffectsConfirmed
	if err := c.validateShape(file); err != nil {
		return nil, err
	}
	return c, nil
}

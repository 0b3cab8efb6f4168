package publisher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// Dir is the __manifest dataset's directory under the graph root.
const Dir = "__manifest"

// RetryBudget is how many times a publish rescans and retries after losing the manifest CAS.
const RetryBudget = 5

// StampError refuses a __manifest whose internal schema version is not the one this build writes.
type StampError struct {
	Found  string // "" when the stamp is missing
	Reason string
}

func (e *StampError) Error() string { return "__manifest: " + e.Reason }

// ErrorKind is errs.KindManifestStamp: the graph needs an operator, not a retry.
func (e *StampError) ErrorKind() string { return errs.KindManifestStamp }

// ErrorDetail gives the stamp found ("" when missing) and the refusal.
func (e *StampError) ErrorDetail() map[string]any {
	return map[string]any{"found": e.Found, "reason": e.Reason}
}

func checkStamp(s *schema.Schema) error {
	raw, ok := s.Metadata[StampKey]
	if !ok {
		return &StampError{Reason: fmt.Sprintf("missing %s stamp: an interrupted init or a corrupt graph; refusing to open", StampKey)}
	}
	v, err := strconv.Atoi(string(raw))
	switch {
	case err != nil:
		return &StampError{Found: string(raw), Reason: fmt.Sprintf("unreadable %s stamp %q", StampKey, raw)}
	case v < StampVersion:
		return &StampError{Found: string(raw), Reason: fmt.Sprintf("internal schema version %d is older than %d: rebuild the graph (export, init, load)", v, StampVersion)}
	case v > StampVersion:
		return &StampError{Found: string(raw), Reason: fmt.Sprintf("internal schema version %d is newer than %d: upgrade omnigraph-worker to a build that writes it", v, StampVersion)}
	}
	return nil
}

// Publisher publishes graph commits on one branch of a graph root's __manifest. It is meant to
// be owned by the single writer of that branch and is not safe for concurrent use.
type Publisher struct {
	root   storage.Store
	store  storage.Store // root/__manifest
	branch string        // "" for main
	ds     *lance.Dataset
	state  *State
}

// Create writes __manifest version 1 of a new graph: one table row and one table_version row
// per table, and the genesis commit with graph_head:main pointing at it. v is the data file
// version __manifest declares for good (zero: lance's default); the graph's other tables
// created later follow it (FileVersion).
func Create(ctx context.Context, root storage.Store, regs []Registration, versions []DatasetUpdate, genesis Lineage, v file.Version) error {
	var rows []Row
	for _, r := range regs {
		rows = append(rows, registrationRow(r))
	}
	for _, u := range versions {
		rows = append(rows, versionRow(u))
	}
	rows = append(rows, lineageRows("", genesis, "", 1)...)
	s, err := schema.FromArrow(ManifestSchema())
	if err != nil {
		return err
	}
	rec := rowsRecord(rows)
	defer rec.Release()
	_, err = lance.Create(ctx, root.Sub(Dir), s, []arrow.Record{rec}, lance.CreateOptions{FileVersion: v})
	return err
}

// FileVersion is the data file version the graph's __manifest declares: the version every
// table the graph creates after its init is made at, so one graph never mixes versions.
func FileVersion(ctx context.Context, root storage.Store) (file.Version, error) {
	ds, err := lance.Open(ctx, root.Sub(Dir))
	if err != nil {
		return file.Version{}, err
	}
	v, ok := ds.FileVersion()
	if !ok {
		m := ds.Manifest()
		return file.Version{}, &lance.DataVersionError{Dataset: root.Sub(Dir).URI(), Op: "write", Declared: m.DataVersion}
	}
	return v, nil
}

// Open returns a publisher for branch ("" or "main" for main). The snapshot is read lazily.
func Open(root storage.Store, branch string) *Publisher {
	if branch == "main" {
		branch = ""
	}
	return &Publisher{root: root, store: root.Sub(Dir), branch: branch}
}

// Store is the __manifest dataset's store.
func (p *Publisher) Store() storage.Store { return p.store }

// Snapshot returns the state of the latest __manifest version of the branch. A cached state is
// reused while no newer version exists (one existence probe); otherwise the manifest is
// rescanned. The returned state is shared and advances with this publisher's own publishes:
// read it, do not modify it.
func (p *Publisher) Snapshot(ctx context.Context) (*State, error) {
	if p.ds != nil {
		latest, err := p.ds.Latest(ctx)
		if err != nil {
			return nil, err
		}
		if latest.Version() == p.ds.Version() {
			return p.state, nil
		}
	}
	ds, err := lance.Open(ctx, p.store, lance.WithBranch(p.branch))
	if err != nil {
		var be *lance.BranchError
		if errors.As(err, &be) {
			return nil, &errs.BranchNotFound{Branch: p.branch}
		}
		return nil, err
	}
	st, err := p.load(ctx, ds)
	if err != nil {
		return nil, err
	}
	p.ds, p.state = ds, st
	return st, nil
}

// Cached is the state the last Snapshot or publish left, without asking storage whether a
// newer version exists (nil before the first). A writer that revalidates before it publishes
// may prepare on it: whatever another process published meanwhile, the revalidation's own
// Snapshot sees.
func (p *Publisher) Cached() *State {
	if p.ds == nil {
		return nil
	}
	return p.state
}

// SnapshotAt reads the state of an older __manifest version of the branch (not cached).
func (p *Publisher) SnapshotAt(ctx context.Context, version uint64) (*State, error) {
	ds, err := lance.Open(ctx, p.store, lance.WithBranch(p.branch), lance.AtVersion(version))
	if err != nil {
		return nil, err
	}
	return p.load(ctx, ds)
}

// Dataset is the __manifest version the current snapshot was read from.
func (p *Publisher) Dataset() *lance.Dataset { return p.ds }

// load builds the state of ds: from a checkpoint and the rows after it when one checks out,
// else by folding every row.
func (p *Publisher) load(ctx context.Context, ds *lance.Dataset) (*State, error) {
	if err := checkStamp(ds.Schema()); err != nil {
		return nil, err
	}
	st, status, err := p.fromCheckpoint(ctx, ds)
	if err != nil || st != nil {
		return st, err
	}
	if st, err = p.scan(ctx, ds); err != nil {
		return nil, err
	}
	st.CheckpointStatus = "full scan: " + status
	return st, nil
}

func (p *Publisher) scan(ctx context.Context, ds *lance.Dataset) (*State, error) {
	st := newState(p.branch)
	st.ManifestVersion, st.ds = ds.Version(), ds
	err := ds.Each(ctx, lance.ScanOptions{Columns: manifestColumns, WithRowAddress: true}, func(rec arrow.Record) error {
		rows, addrs, err := recordRows(rec)
		if err != nil {
			return err
		}
		return st.apply(rows, addrs)
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// DatasetUpdate moves a table's published version.
type DatasetUpdate struct {
	Identity ids.TableIdentity
	TableKey string
	Version  uint64
	Branch   *string // Lance branch owning Version; nil = main
	RowCount uint64
	Meta     TableVersionMetadata
}

// Registration registers a table identity under a table key.
type Registration struct {
	Identity ids.TableIdentity
	TableKey string
}

// Rename rebinds a registered, live table to another table key of the same kind (a schema
// apply's rename_type): its identity, path and versions stay. The table must still be bound to
// ExpectedTableKey.
type Rename struct {
	Identity         ids.TableIdentity
	ExpectedTableKey string
	TableKey         string
}

// Tombstone removes a live table from the branch's current version (a schema apply's
// drop_type): a table_tombstone row at Version, one past the table's last published version.
// Its dataset stays on disk; earlier graph versions still read it.
type Tombstone struct {
	Identity ids.TableIdentity
	TableKey string
	Version  uint64
}

// Expectation requires a table's published version before the publish.
type Expectation struct {
	TableKey string
	Version  uint64
}

// Lineage is the graph commit a publish records; its id is minted once by the caller and stays
// the same across retries.
type Lineage struct {
	CommitID     string
	ActorID      string
	MergedParent string
	CreatedAt    int64 // µs since the epoch
}

// ExactHead is the ExactGraphHead precondition: the branch's identifier and exact head
// (nil = the head row must be absent), checked on every attempt.
type ExactHead struct {
	Identifier lance.BranchIdentifier
	Head       *string
}

// Request is one publish.
type Request struct {
	Registrations []Registration
	Renames       []Rename
	Updates       []DatasetUpdate
	Tombstones    []Tombstone
	Expected      map[ids.TableIdentity]Expectation
	Lineage       *Lineage
	Precondition  *ExactHead // nil: any head
	Receipt       *Receipt   // written in the same commit (its GraphCommitID is filled in)
	// BeforeCommit, when set, runs in every attempt after the attempt's files are staged and
	// before its manifest commit; an error ends the publish with nothing visible. A writer uses
	// it to finish a step that must precede the commit (its recovery confirmation) while the
	// publish stages, so it must be idempotent.
	BeforeCommit func() error
	// Known, when set, is the state the caller read with Snapshot and checked its precondition
	// against since, this publisher publishing nothing in between (a writer's revalidation
	// under its write gate): the first attempt takes it instead of probing storage for a newer
	// __manifest version, a round trip the caller has just made. Nothing is weakened: the
	// commit creates the next version only if it is absent, so a version published meanwhile
	// by anyone else loses this attempt the race, and the retry rescans as after any lost race.
	// A state this publisher no longer holds is ignored.
	Known *State
}

// Result is what a publish made visible.
type Result struct {
	ManifestVersion uint64
	CommitID        string
	ParentCommitID  string
	Commit          Commit // the graph_commit row written (with a lineage)
	State           *State
}

// Publish makes the request visible as exactly one new __manifest version. Losing the CAS to a
// concurrent publisher rescans and retries (RetryBudget times); precondition and expectation
// failures are returned typed and are not retried.
func (p *Publisher) Publish(ctx context.Context, req Request) (*Result, error) {
	var lastErr error
	for attempt := 0; attempt <= RetryBudget; attempt++ {
		res, err := p.attempt(ctx, &req)
		if err == nil {
			return res, nil
		}
		var ce *lance.CommitConflictError
		if !errors.As(err, &ce) {
			return nil, err
		}
		lastErr = err
		p.ds, p.state = nil, nil // lost the race: rescan from the winner's version
	}
	return nil, fmt.Errorf("publisher: manifest publish exhausted %d retries against concurrent writers: %w", RetryBudget, lastErr)
}

// BranchIdentifier reads the branch's identifier fresh (main's is empty).
func (p *Publisher) BranchIdentifier(ctx context.Context) (lance.BranchIdentifier, error) {
	if p.branch == "" {
		return lance.BranchIdentifier{}, nil
	}
	ref, err := lance.ReadBranchRef(ctx, p.store, p.branch)
	if err != nil {
		return nil, err
	}
	return ref.Identifier, nil
}

func identifierJSON(b lance.BranchIdentifier) *string {
	raw, _ := json.Marshal(b)
	s := string(raw)
	return &s
}

// CheckExactHead compares the branch's live identifier and the exact head in st with pre: a
// mismatch is *errs.ReadSetChanged naming the member; other errors are I/O. The publisher runs
// it on every attempt; writers and recovery run it to revalidate their captured token.
func (p *Publisher) CheckExactHead(ctx context.Context, st *State, pre *ExactHead) error {
	bk := ids.BranchKey(p.branch)
	want := identifierJSON(pre.Identifier)
	got, err := p.BranchIdentifier(ctx)
	if err != nil {
		var be *lance.BranchError
		if errors.As(err, &be) {
			return &errs.ReadSetChanged{Member: "branch_identifier:" + bk, Expected: want}
		}
		return err
	}
	if !got.Equal(pre.Identifier) {
		return &errs.ReadSetChanged{Member: "branch_identifier:" + bk, Expected: want, Actual: identifierJSON(got)}
	}
	head, ok := st.Head(p.branch)
	var actual *string
	if ok {
		actual = &head
	}
	if (actual == nil) != (pre.Head == nil) || actual != nil && *actual != *pre.Head {
		return &errs.ReadSetChanged{Member: "graph_head:" + bk, Expected: pre.Head, Actual: actual}
	}
	return nil
}

func (p *Publisher) attempt(ctx context.Context, req *Request) (*Result, error) {
	if err := failpoint.Inject("publisher.attempt"); err != nil {
		return nil, err
	}
	st := req.Known
	req.Known = nil // the first attempt only: a retry follows a lost race
	if st == nil || st != p.state || p.ds == nil {
		var err error
		if st, err = p.Snapshot(ctx); err != nil {
			return nil, err
		}
	}
	if req.Precondition != nil {
		if err := p.CheckExactHead(ctx, st, req.Precondition); err != nil {
			return nil, err
		}
	}
	for id, exp := range req.Expected {
		if reg, ok := st.registrations[id]; ok && reg.tableKey != exp.TableKey {
			return nil, &errs.ReadSetChanged{Member: "dataset_binding:" + id.String()}
		}
		if actual := st.liveVersion(id); actual != exp.Version {
			return nil, &errs.PublishedDatasetVersionMismatch{TypeKey: exp.TableKey, ExpectedPublishedDatasetVersion: exp.Version, ActualPublishedDatasetVersion: actual}
		}
	}
	newVersion := st.ManifestVersion + 1
	rows, err := p.pendingRows(st, req, newVersion)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return &Result{ManifestVersion: st.ManifestVersion, State: st}, nil
	}
	binds := req.Registrations
	for _, r := range req.Renames {
		binds = append(binds[:len(binds):len(binds)], Registration{Identity: r.Identity, TableKey: r.TableKey})
	}
	if err := st.checkNewBindings(binds, req.Renames, req.Tombstones); err != nil {
		return nil, err
	}
	parent := st.lineageHead
	if err := p.write(ctx, st, rows, newVersion, req.BeforeCommit, false); err != nil {
		return nil, err
	}
	res := &Result{ManifestVersion: newVersion, State: st}
	if req.Lineage != nil {
		res.CommitID = req.Lineage.CommitID
		res.Commit = Commit{ID: res.CommitID, ManifestVersion: newVersion}
		if h := st.lineageHead; h != nil && h.ID == res.CommitID {
			res.Commit = *h
		}
		if parent != nil {
			res.ParentCommitID = parent.ID
		}
	}
	return res, nil
}

// write commits rows as one new __manifest version (replacing the rows of the same object ids)
// and folds them into st, the state of the version before.
// fresh says the rows not replaced in place are known to be new (no lookup for an old row).
func (p *Publisher) write(ctx context.Context, st *State, rows []Row, newVersion uint64, beforeCommit func() error, fresh bool) error {
	var remove []lance.RowAddress
	for i := range rows {
		r := &rows[i]
		if a, ok := st.addr[r.ObjectID]; ok {
			remove = append(remove, a)
		} else if !fresh && !replacedInPlace(r.ObjectType) && st.held(r) {
			a, ok, err := lookupRow(ctx, p.ds, r.ObjectID)
			if err != nil {
				return err
			}
			if ok {
				remove = append(remove, a)
			}
		}
	}
	rec := rowsRecord(rows)
	defer rec.Release()
	// The publish that completes the newest tier of fragments merges it in its own commit, its
	// rows written after the tier's: the merge compact would otherwise make in a commit of its
	// own, one more file and one more commit in the writer's chain. A publish whose replaced
	// rows all lie in the newest small fragments (the last publishes' graph head and table
	// versions, as a stream of loads makes them) rewrites those few rows with its own instead
	// of writing a deletion file: one object fewer. Either way the fragments read are ones
	// this process just wrote, read from memory.
	var staged *lance.Staged
	var tail []arrow.Record
	var err error
	merge := p.ds.TailRun(CompactionFanout, uint64(len(rows)))
	if merge == nil {
		merge = p.ds.SmallTailHolding(remove, CompactionFanout)
	}
	if merge != nil {
		staged, tail, err = p.ds.StageRewriteRowsMerging(ctx, remove, []arrow.Record{rec}, merge, stageOptions)
		defer func() {
			for _, r := range tail {
				r.Release()
			}
		}()
	} else {
		staged, err = p.ds.StageRewriteRows(ctx, remove, []arrow.Record{rec}, stageOptions)
	}
	if err != nil {
		return err
	}
	if beforeCommit != nil {
		// The data and deletion files are written now, unreferenced until the commit, so that
		// they land while the caller finishes its own step.
		if err := staged.WriteTransaction(ctx); err != nil {
			return err
		}
		if err := beforeCommit(); err != nil {
			return err
		}
	}
	if err := failpoint.Inject("publisher.before_commit"); err != nil {
		return err
	}
	ds, err := p.ds.Commit(ctx, staged)
	if err != nil {
		return err
	}
	added := ds.AddedFragments(p.ds.Manifest())
	var before int64 // the merged tier's rows, ahead of the new ones
	for _, r := range tail {
		before += r.NumRows()
	}
	if len(added) != 1 || added[0].PhysicalRows != uint64(before)+uint64(len(rows)) {
		p.ds, p.state = nil, nil // committed but unexpected: rescan on next use
		return fmt.Errorf("publisher: commit added %d fragments, want one of %d rows", len(added), before+int64(len(rows)))
	}
	if err := st.readdressRows(tail, added); err != nil {
		p.ds, p.state = nil, nil
		return err
	}
	addrs := make([]uint64, len(rows))
	for i := range rows {
		addrs[i] = added[0].ID<<32 | uint64(before+int64(i))
	}
	// Fold the committed rows in place: the state is the writer's own and copying it per
	// publish would make every commit cost as much as the whole manifest.
	if err := st.apply(rows, addrs); err != nil {
		p.ds, p.state = nil, nil
		return err
	}
	st.ManifestVersion, st.ds = newVersion, ds
	p.ds = ds
	p.compact(ctx)
	p.maybeCheckpoint(ctx)
	return nil
}

// stageOptions: __manifest commits record their transactions inline only (no _transactions/
// file per publish).
var stageOptions = lance.StageOptions{InlineTransactionOnly: true}

// CompactionFanout is the size-tier fanout of __manifest tail compaction: every publish adds
// one small fragment, and once the newest tier holds this many they are merged into one. The
// fragment count (and with it the Lance manifest each commit writes) then grows with the
// logarithm of the commit count instead of linearly.
const CompactionFanout = 16

// compact merges the manifest's small tail fragments after a publish, when the publish did
// not (write merges the tier it completes; what is left is a cascade into the next tier, or a
// tier completed by deletions). It is physical only (the rows and their meaning do not
// change) and best effort: a failure, or losing a race to another writer, leaves the
// fragments as they are and the next snapshot rescans.
func (p *Publisher) compact(ctx context.Context) {
	for {
		if !p.compactOnce(ctx) {
			return
		}
	}
}

// compactOnce is one merge of compact; false when there was none to make or it failed.
func (p *Publisher) compactOnce(ctx context.Context) bool {
	staged, merged, err := p.ds.CompactTail(ctx, CompactionFanout, stageOptions)
	defer func() {
		for _, r := range merged {
			r.Release()
		}
	}()
	if err != nil || staged == nil {
		if err != nil {
			p.ds, p.state = nil, nil
		}
		return false
	}
	if err := failpoint.Inject("publisher.compact"); err != nil {
		return false
	}
	ds, err := p.ds.Commit(ctx, staged)
	if err != nil {
		p.ds, p.state = nil, nil
		return false
	}
	// The merged rows moved to the new fragments, in the order the merge read them.
	if err := p.state.readdressRows(merged, ds.AddedFragments(p.ds.Manifest())); err != nil {
		p.ds, p.state = nil, nil
		return false
	}
	p.ds = ds
	p.state.ManifestVersion, p.state.ds = ds.Version(), ds
	return true
}

// pendingRows builds the rows of one attempt: registrations, table versions, lineage, receipt.
func (p *Publisher) pendingRows(st *State, req *Request, newVersion uint64) ([]Row, error) {
	var rows []Row
	for _, r := range req.Registrations {
		if !r.Identity.Valid() {
			return nil, fmt.Errorf("publisher: registration of %s with a zero identity", r.TableKey)
		}
		if reg, ok := st.registrations[r.Identity]; ok {
			if reg.tableKey != r.TableKey {
				return nil, fmt.Errorf("publisher: %s is already registered as %s", r.Identity, reg.tableKey)
			}
			continue
		}
		rows = append(rows, registrationRow(r))
	}
	renamed := map[ids.TableIdentity]string{}
	for _, r := range req.Renames {
		reg, ok := st.registrations[r.Identity]
		switch {
		case !ok || st.liveVersion(r.Identity) == 0 || st.tombstoned(r.Identity):
			return nil, fmt.Errorf("publisher: rename of %s (%s): no live table with that identity", r.ExpectedTableKey, r.Identity)
		case reg.tableKey != r.ExpectedTableKey:
			return nil, &errs.ReadSetChanged{Member: "dataset_binding:" + r.Identity.String()}
		case ids.TablePath(r.TableKey, r.Identity) != reg.path:
			return nil, fmt.Errorf("publisher: renaming %s to %s would move its dataset %s", r.ExpectedTableKey, r.TableKey, reg.path)
		}
		if _, twice := renamed[r.Identity]; twice {
			return nil, fmt.Errorf("publisher: %s renamed twice in one publish", r.Identity)
		}
		renamed[r.Identity] = r.TableKey
		if r.TableKey != r.ExpectedTableKey {
			rows = append(rows, registrationRow(Registration{Identity: r.Identity, TableKey: r.TableKey}))
		}
	}
	registered := func(id ids.TableIdentity, key string) bool {
		if to, ok := renamed[id]; ok {
			return to == key
		}
		if reg, ok := st.registrations[id]; ok {
			return reg.tableKey == key
		}
		for _, r := range req.Registrations {
			if r.Identity == id && r.TableKey == key {
				return true
			}
		}
		return false
	}
	claimed := map[string]bool{}
	for _, u := range req.Updates {
		if !registered(u.Identity, u.TableKey) {
			return nil, fmt.Errorf("publisher: update of %s (%s) which is not registered under that key", u.TableKey, u.Identity)
		}
		oid := ids.TableVersionObjectID(u.Identity, u.Version)
		if claimed[oid] {
			return nil, fmt.Errorf("publisher: %s claimed twice in one publish", oid)
		}
		claimed[oid] = true
		rows = append(rows, versionRow(u))
	}
	for _, t := range req.Tombstones {
		switch {
		case !registered(t.Identity, t.TableKey):
			return nil, fmt.Errorf("publisher: tombstone of %s (%s) which is not registered under that key", t.TableKey, t.Identity)
		case t.Version == 0 || t.Version <= st.liveVersion(t.Identity) || st.tombstones[t.Identity] >= t.Version:
			return nil, fmt.Errorf("publisher: tombstone of %s at version %d: the table is at %d", t.TableKey, t.Version, st.liveVersion(t.Identity))
		}
		rows = append(rows, Row{ObjectID: ids.TombstoneObjectID(t.Identity, t.Version), ObjectType: TypeTombstone, TableKey: t.TableKey,
			StableTableID: u64p(t.Identity.StableTableID), TableIncarnationID: u64p(t.Identity.TableIncarnationID), TableVersion: u64p(t.Version)})
	}
	if l := req.Lineage; l != nil {
		parent, lin := "", *l
		if h := st.lineageHead; h != nil {
			parent = h.ID
			// A commit is never older than its parent: lineage walks stop at the first common
			// ancestor in created_at order (engine merge), which needs that even across a
			// writer whose clock is behind the last one's.
			if lin.CreatedAt <= h.Meta.CreatedAt {
				lin.CreatedAt = h.Meta.CreatedAt + 1
			}
		}
		rows = append(rows, lineageRows(p.branch, lin, parent, newVersion)...)
		if rc := req.Receipt; rc != nil {
			r := *rc
			r.GraphCommitID = l.CommitID
			r.Branch = ids.BranchKey(p.branch)
			rows = append(rows, Row{ObjectID: ReceiptObjectID(r.ReceiptKey()), ObjectType: TypeIngestReceipt, Metadata: jsonString(r),
				TableVersion: u64p(newVersion), TableBranch: ids.BranchPtr(p.branch)})
		}
	} else if req.Receipt != nil {
		return nil, errors.New("publisher: a receipt needs a lineage commit")
	}
	return rows, nil
}

// VersionMetadata is the table_version metadata of a dataset version: its manifest's path (for
// object stores, the key path without the bucket), size and naming scheme.
func VersionMetadata(ds *lance.Dataset) TableVersionMetadata {
	loc, size := ds.ManifestLocation()
	if i := strings.Index(loc, "://"); i >= 0 {
		rest := loc[i+3:]
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			loc = rest[j+1:]
		}
	}
	sz := uint64(size)
	scheme := ds.NamingScheme()
	return TableVersionMetadata{ManifestPath: loc, ManifestSize: &sz, NamingScheme: &scheme}
}

func registrationRow(r Registration) Row {
	loc := ids.TablePath(r.TableKey, r.Identity)
	return Row{ObjectID: ids.TableObjectID(r.Identity), ObjectType: TypeTable, Location: &loc, TableKey: r.TableKey,
		StableTableID: u64p(r.Identity.StableTableID), TableIncarnationID: u64p(r.Identity.TableIncarnationID)}
}

func versionRow(u DatasetUpdate) Row {
	return Row{ObjectID: ids.TableVersionObjectID(u.Identity, u.Version), ObjectType: TypeTableVersion, Metadata: jsonString(u.Meta),
		TableKey: u.TableKey, StableTableID: u64p(u.Identity.StableTableID), TableIncarnationID: u64p(u.Identity.TableIncarnationID),
		TableVersion: u64p(u.Version), TableBranch: u.Branch, RowCount: u64p(u.RowCount)}
}

// lineageRows are a graph commit's two rows: the graph_commit row (created by the manifest
// version it lands in) and the branch's graph_head row pointing at it.
func lineageRows(branch string, l Lineage, parent string, version uint64) []Row {
	meta := GraphCommitMetadata{ParentCommitID: parent, ActorID: l.ActorID, MergedParentCommitID: l.MergedParent, CreatedAt: l.CreatedAt}
	head := GraphHeadMetadata{HeadCommitID: l.CommitID, ParentCommitID: parent}
	return []Row{
		{ObjectID: l.CommitID, ObjectType: TypeGraphCommit, Metadata: jsonString(meta), TableVersion: u64p(version), TableBranch: ids.BranchPtr(branch)},
		{ObjectID: ids.GraphHeadObjectID(branch), ObjectType: TypeGraphHead, Metadata: jsonString(head)},
	}
}

package publisher

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/lance"
)

// TableEntry is one live table of a snapshot: its registration joined to its latest version.
type TableEntry struct {
	Identity ids.TableIdentity
	TableKey string
	Path     string
	Version  uint64
	Branch   *string // Lance branch owning Version; nil = main
	RowCount uint64
	Meta     TableVersionMetadata
}

// Commit is a graph_commit row.
type Commit struct {
	ID              string
	ManifestVersion uint64
	Branch          *string
	Meta            GraphCommitMetadata
}

type registration struct {
	tableKey, path string
}

type versionEntry struct {
	version  uint64
	branch   *string
	rowCount uint64
	meta     TableVersionMetadata
}

// State is the folded content of one __manifest version on one branch. A single writer keeps
// it and folds its own publishes in, so a commit never rescans the whole manifest.
//
// What it holds does not grow with the messages ever applied, but for two key filters of a few
// bits a key: heads, tables, registrations and tombstones (which follow the schema and the
// branches), the newest RecentReceipts receipts, and commits up to CommitCacheBytes. Any
// older receipt or commit is found exactly in __manifest (Receipt, Commit), behind the filter
// that rules out, without reading storage, every key never written.
type State struct {
	ManifestVersion uint64
	Branch          string
	Heads           map[string]string // branch key -> head commit id (absence preserved)

	registrations map[ids.TableIdentity]registration
	versions      map[ids.TableIdentity]versionEntry
	tombstones    map[ids.TableIdentity]uint64
	// addr: object_id -> row of the rows a publish replaces in place (graph heads, table
	// registrations). Every other row is written once under a fresh id, so holding an address
	// per row (most of them commits, receipts and table versions, one or more per message)
	// would cost memory for nothing; should one be written again all the same, held tells so
	// and the publish looks its old row up (lookupRow).
	addr        map[string]lance.RowAddress
	lineageHead *Commit

	receiptKeys *keyFilter // object ids of every ingest_receipt row
	commitKeys  *keyFilter // ids of every graph_commit row
	recent      *receiptWindow
	commits     *commitCache

	// ds is the __manifest version the state describes: where its exact lookups read.
	ds *lance.Dataset
	// checkpointed is the highest fragment id the newest checkpoint of this state covers
	// (rows in fragments above it are what the next open folds on top of the checkpoint);
	// hasCheckpoint says whether one exists at all.
	checkpointed  uint64
	hasCheckpoint bool
	// CheckpointStatus says how the state was built: from which checkpoint, or why a full
	// scan (none, or one refused and why).
	CheckpointStatus string
	lookups          atomic.Int64
}

// replacedInPlace says whether rows of an object type are rewritten under the same id.
func replacedInPlace(objectType string) bool {
	return objectType == TypeGraphHead || objectType == TypeTable
}

// held says whether the state may already hold a row with r's object id, for a row of a type
// whose addresses it does not keep: a commit or receipt the key filters cannot rule out, a
// table version not above the newest one it has seen for that table (every row ever written
// is at or below it).
func (s *State) held(r *Row) bool {
	switch r.ObjectType {
	case TypeGraphCommit:
		return s.commitKeys.mayContain(r.ObjectID)
	case TypeIngestReceipt:
		return s.receiptKeys.mayContain(r.ObjectID)
	case TypeTableVersion:
		id, err := identityOf(r)
		if err != nil || r.TableVersion == nil {
			return true
		}
		cur, ok := s.versions[id]
		return ok && *r.TableVersion <= cur.version
	}
	return !replacedInPlace(r.ObjectType)
}

func newState(branch string) *State {
	return &State{Branch: branch, Heads: map[string]string{},
		registrations: map[ids.TableIdentity]registration{}, versions: map[ids.TableIdentity]versionEntry{},
		tombstones: map[ids.TableIdentity]uint64{}, addr: map[string]lance.RowAddress{},
		receiptKeys: &keyFilter{}, commitKeys: &keyFilter{}, recent: newReceiptWindow(RecentReceipts), commits: newCommitCache(CommitCacheBytes)}
}

// Head is the exact graph_head of a branch: ok=false when the row is absent (a fresh branch).
func (s *State) Head(branch string) (string, bool) {
	h, ok := s.Heads[ids.BranchKey(branch)]
	return h, ok
}

// LineageHead is the newest visible graph commit: the parent of the next one.
func (s *State) LineageHead() *Commit { return s.lineageHead }

// Receipt looks up an ingest receipt by key (message id or stream:sequence), exactly: from the
// recent receipts, else (when the key filter cannot rule the key out) from __manifest.
func (s *State) Receipt(ctx context.Context, key string) (Receipt, bool, error) {
	if rc, ok := s.recent.get(key); ok {
		return rc, true, nil
	}
	oid := ReceiptObjectID(key)
	if !s.receiptKeys.mayContain(oid) {
		return Receipt{}, false, nil
	}
	s.lookups.Add(1)
	row, ok, err := lookupObject(ctx, s.ds, oid)
	if err != nil || !ok {
		return Receipt{}, false, err
	}
	rc, err := receiptOf(row)
	if err != nil {
		return Receipt{}, false, fmt.Errorf("publisher: __manifest row %q: %w", oid, err)
	}
	return rc, true, nil
}

// Commit looks up a graph commit by id, exactly: from the lineage head and the commit cache,
// else (when the key filter cannot rule the id out) from __manifest, loading with it the
// newest commits up to its manifest version below (0: any), which is where a lineage walk
// goes next.
func (s *State) Commit(ctx context.Context, id string, below uint64) (Commit, bool, error) {
	if h := s.lineageHead; h != nil && h.ID == id {
		return *h, true, nil
	}
	if c, ok := s.commits.get(id); ok {
		return c, true, nil
	}
	if id == "" || !s.commitKeys.mayContain(id) {
		return Commit{}, false, nil
	}
	s.lookups.Add(1)
	// Half the cache: the walk's own newer commits stay.
	cs, ok, err := loadCommits(ctx, s.ds, id, below, s.commits.max/2/commitBytes(&Commit{ID: id}))
	if err != nil {
		return Commit{}, false, err
	}
	var want Commit
	for _, c := range cs {
		if c.ID == id {
			want = c
		} else {
			s.commits.put(c)
		}
	}
	if ok {
		s.commits.put(want)
	}
	return want, ok, nil
}

// AllCommits reads every graph commit of the state's manifest version (a full scan).
func (s *State) AllCommits(ctx context.Context) ([]Commit, error) {
	s.lookups.Add(1)
	return allCommits(ctx, s.ds)
}

// DiskLookups counts the state's reads of __manifest past its memory: exact receipt and commit
// lookups and commit loads.
func (s *State) DiskLookups() int64 { return s.lookups.Load() }

// FilterBytes is the memory of the state's two key filters.
func (s *State) FilterBytes() int { return s.receiptKeys.bytes() + s.commitKeys.bytes() }

// Tables lists the live tables sorted by table key.
func (s *State) Tables() []TableEntry {
	var out []TableEntry
	for id, v := range s.versions {
		if t, ok := s.tombstones[id]; ok && t >= v.version {
			continue
		}
		reg, ok := s.registrations[id]
		if !ok {
			continue
		}
		out = append(out, TableEntry{Identity: id, TableKey: reg.tableKey, Path: reg.path, Version: v.version,
			Branch: v.branch, RowCount: v.rowCount, Meta: v.meta})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TableKey < out[j].TableKey })
	return out
}

// Table returns the live table with the given key.
func (s *State) Table(key string) (TableEntry, bool) {
	for _, t := range s.Tables() {
		if t.TableKey == key {
			return t, true
		}
	}
	return TableEntry{}, false
}

// tombstoned says whether the table's newest row is a tombstone.
func (s *State) tombstoned(id ids.TableIdentity) bool {
	t, dead := s.tombstones[id]
	return dead && t >= s.versions[id].version
}

// liveVersion is what an expectation compares against: the latest live version, the max
// tombstone of a tombstone-only identity, or 0 for an unknown one.
func (s *State) liveVersion(id ids.TableIdentity) uint64 {
	v, ok := s.versions[id]
	t, dead := s.tombstones[id]
	switch {
	case ok && (!dead || t < v.version):
		return v.version
	case dead:
		return t
	}
	return 0
}

// apply folds rows (with their addresses) into the state.
func (s *State) apply(rows []Row, addrs []uint64) error {
	for i := range rows {
		r := &rows[i]
		if addrs != nil && replacedInPlace(r.ObjectType) {
			s.addr[r.ObjectID] = lance.RowAddress(addrs[i])
		}
		if err := s.applyRow(r); err != nil {
			return &ManifestError{ObjectID: r.ObjectID, Reason: err.Error(), Err: err}
		}
	}
	return s.checkAliases()
}

// readdressRows records the addresses of rows written, in the order of recs, into frags from
// the first fragment's first row on, each fragment holding its PhysicalRows of them (a merged
// tier ahead of a publish's rows, or a tail merge): those whose addresses the state keeps.
func (s *State) readdressRows(recs []arrow.Record, frags []lance.Fragment) error {
	f, off := 0, uint64(0)
	for _, rec := range recs {
		col := rec.Schema().FieldIndices("object_id")
		if len(col) != 1 {
			return fmt.Errorf("publisher: merged rows without an object_id column")
		}
		oid, ok := rec.Column(col[0]).(*array.String)
		if !ok {
			return fmt.Errorf("publisher: merged rows' object_id is %s, not a string", rec.Column(col[0]).DataType())
		}
		for i := 0; i < oid.Len(); i++ {
			for f < len(frags) && off == frags[f].PhysicalRows {
				f, off = f+1, 0
			}
			if f == len(frags) {
				return fmt.Errorf("publisher: more merged rows than the new fragments hold")
			}
			if _, ok := s.addr[oid.Value(i)]; ok {
				s.addr[oid.Value(i)] = lance.RowAddress(frags[f].ID<<32 | off)
			}
			off++
		}
	}
	return nil
}

func identityOf(r *Row) (ids.TableIdentity, error) {
	if r.StableTableID == nil || r.TableIncarnationID == nil {
		return ids.TableIdentity{}, fmt.Errorf("%s row without table identity", r.ObjectType)
	}
	id := ids.TableIdentity{StableTableID: *r.StableTableID, TableIncarnationID: *r.TableIncarnationID}
	if !id.Valid() {
		return id, fmt.Errorf("zero table identity")
	}
	return id, nil
}

func (s *State) applyRow(r *Row) error {
	switch r.ObjectType {
	case TypeTable:
		id, err := identityOf(r)
		if err != nil {
			return err
		}
		if r.ObjectID != ids.TableObjectID(id) || r.Location == nil || *r.Location != ids.TablePath(r.TableKey, id) {
			return fmt.Errorf("table row is not canonical for identity %s", id)
		}
		s.registrations[id] = registration{tableKey: r.TableKey, path: *r.Location}
	case TypeTableVersion:
		id, err := identityOf(r)
		if err != nil {
			return err
		}
		if r.TableVersion == nil || r.RowCount == nil || r.Metadata == nil || r.ObjectID != ids.TableVersionObjectID(id, *r.TableVersion) {
			return fmt.Errorf("table_version row incomplete or not canonical")
		}
		var meta TableVersionMetadata
		if err := json.Unmarshal([]byte(*r.Metadata), &meta); err != nil {
			return err
		}
		if cur, ok := s.versions[id]; !ok || *r.TableVersion >= cur.version {
			s.versions[id] = versionEntry{version: *r.TableVersion, branch: r.TableBranch, rowCount: *r.RowCount, meta: meta}
		}
	case TypeTombstone:
		id, err := identityOf(r)
		if err != nil {
			return err
		}
		if r.TableVersion == nil {
			return fmt.Errorf("tombstone without version")
		}
		if *r.TableVersion > s.tombstones[id] {
			s.tombstones[id] = *r.TableVersion
		}
	case TypeGraphCommit:
		c, err := commitOf(r)
		if err != nil {
			return err
		}
		s.commitKeys.add(c.ID)
		s.commits.put(c)
		if h := s.lineageHead; h == nil || commitAfter(c, *h) {
			s.lineageHead = &c
		}
	case TypeGraphHead:
		var meta GraphHeadMetadata
		if r.Metadata == nil {
			return fmt.Errorf("graph_head without metadata")
		}
		if err := json.Unmarshal([]byte(*r.Metadata), &meta); err != nil {
			return err
		}
		s.Heads[r.ObjectID[len("graph_head:"):]] = meta.HeadCommitID
	case TypeIngestReceipt:
		rc, err := receiptOf(r)
		if err != nil {
			return err
		}
		s.receiptKeys.add(r.ObjectID)
		s.recent.put(r.ObjectID[len(TypeIngestReceipt)+1:], rc)
	}
	return nil
}

func commitOf(r *Row) (Commit, error) {
	var meta GraphCommitMetadata
	if r.Metadata != nil {
		if err := json.Unmarshal([]byte(*r.Metadata), &meta); err != nil {
			return Commit{}, err
		}
	}
	c := Commit{ID: r.ObjectID, Branch: r.TableBranch, Meta: meta}
	if r.TableVersion != nil {
		c.ManifestVersion = *r.TableVersion
	}
	return c, nil
}

func receiptOf(r *Row) (Receipt, error) {
	var rc Receipt
	if r.Metadata == nil {
		return rc, fmt.Errorf("receipt without metadata")
	}
	if err := json.Unmarshal([]byte(*r.Metadata), &rc); err != nil {
		return rc, err
	}
	if r.TableVersion != nil {
		rc.ManifestVersion = *r.TableVersion
	}
	return rc, nil
}

// commitAfter orders graph commits by (manifest version, created_at, id).
func commitAfter(a, b Commit) bool {
	if a.ManifestVersion != b.ManifestVersion {
		return a.ManifestVersion > b.ManifestVersion
	}
	if a.Meta.CreatedAt != b.Meta.CreatedAt {
		return a.Meta.CreatedAt > b.Meta.CreatedAt
	}
	return a.ID > b.ID
}

// checkNewBindings refuses a registration that would bind a table key already held by another
// live identity (checked before writing, so the manifest never holds such a pair).
func (s *State) checkNewBindings(regs []Registration, renames []Rename, gone []Tombstone) error {
	leaving := map[ids.TableIdentity]bool{}
	for _, r := range renames {
		leaving[r.Identity] = true
	}
	for _, t := range gone {
		leaving[t.Identity] = true
	}
	batch := map[string]ids.TableIdentity{}
	for _, r := range regs {
		if other, ok := batch[r.TableKey]; ok && other != r.Identity {
			return fmt.Errorf("publisher: table key %s is bound to both %s and %s", r.TableKey, other, r.Identity)
		}
		batch[r.TableKey] = r.Identity
		if t, ok := s.Table(r.TableKey); ok && t.Identity != r.Identity && !leaving[t.Identity] {
			return fmt.Errorf("publisher: table key %s is bound to both %s and %s", r.TableKey, t.Identity, r.Identity)
		}
	}
	return nil
}

// checkAliases refuses two live identities bound to one table key.
func (s *State) checkAliases() error {
	seen := map[string]ids.TableIdentity{}
	for _, t := range s.Tables() {
		if other, dup := seen[t.TableKey]; dup {
			return &ManifestError{Reason: fmt.Sprintf("table key %s is bound to both %s and %s", t.TableKey, other, t.Identity)}
		}
		seen[t.TableKey] = t.Identity
	}
	return nil
}

// ManifestError is a __manifest whose rows do not fold into one graph state: a row that is not
// canonical or not decodable, a table key bound to two live identities, a column missing. No
// write of this build makes one, so no retry gets past it.
type ManifestError struct {
	ObjectID string // the offending row; "" when no single row is to blame
	Reason   string
	Err      error // the decoding error, when there is one
}

func (e *ManifestError) Error() string {
	if e.ObjectID != "" {
		return fmt.Sprintf("publisher: __manifest row %q: %s", e.ObjectID, e.Reason)
	}
	return "publisher: __manifest: " + e.Reason
}

func (e *ManifestError) Unwrap() error { return e.Err }

// ErrorKind is errs.KindCorrupt: the graph needs an operator, not a retry.
func (e *ManifestError) ErrorKind() string { return errs.KindCorrupt }

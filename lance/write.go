package lance

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/omnigraph/omnigraph-worker/internal/parallel"
	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// Data format every dataset this package creates is pinned to.
const (
	DataFormat     = "lance"
	DataVersion    = "2.2"   // what Create declares when CreateOptions.FileVersion is unset, as the reference OmniGraph pins it
	maxRowsPerFile = 1 << 20 // lance's default max_rows_per_file: a new fragment per million rows
)

// Transaction property the product writes on insert-only commits.
const InsertAbsenceProperty = "omnigraph.insert_absence"

// StageOptions carry what a caller may fix in advance about a transaction.
type StageOptions struct {
	// UUID pre-mints the transaction identity (hyphenated UUIDv4); empty mints a fresh one.
	UUID string
	// Properties become transaction_properties.
	Properties map[string]string
	// FileOptions tune data-file pages (tests use small pages).
	FileOptions file.Options
	// InlineTransactionOnly records the transaction only inline in the manifest (its
	// transaction section), with no _transactions/ file: Lance's FLAG_DISABLE_TRANSACTION_FILE
	// mode (writer flag 32). Readers, ours and the official engine's, read the inline section
	// first; it saves the commit a file.
	InlineTransactionOnly bool
	// Slots, when set, stages the indices of an index build (StageIndices) side by side, each
	// in a goroutine holding one slot while it builds or folds; callers sharing one bound
	// their work together. nil stages them one after another.
	Slots *parallel.Slots
}

// Staged is a transaction whose data and deletion files are encoded but which no version
// references yet. Its files (data, deletion, transaction) are written together, side by side,
// by WriteTransaction or at the latest by Commit, before the manifest; dropping it leaves at
// most unreferenced files.
type Staged struct {
	Txn  *Transaction
	base *Dataset // the version the transaction was built from (Txn.ReadVersion)
	// files are the encoded data and deletion files not written yet.
	files []pendingFile
	// txnWritten: every file, the _transactions one included, is written.
	txnWritten bool
	// inlineOnly: no _transactions/ file (StageOptions.InlineTransactionOnly).
	inlineOnly bool
	// ahead: the files written ahead it names (fileWrites.ahead), or nil.
	ahead *Encoded
	// unnamed: the keys of files written with names not yet durable (WriteAhead, ahead's),
	// which WriteTransaction makes durable before any commit names them.
	unnamed []string
}

// TransactionFileName is the transaction_file its commit records: "" when the transaction is
// recorded inline only.
func (s *Staged) TransactionFileName() string {
	if s.inlineOnly {
		return ""
	}
	return s.Txn.FileName()
}

// pendingFile is an encoded file a staged transaction writes before its manifest: data, or
// when parts is set, their concatenation (storage.Compose).
type pendingFile struct {
	key       string
	data      []byte
	parts     []storage.Part
	failpoint string
	what      string
}

// fileWrites collects the files one staging encodes.
type fileWrites struct {
	files []pendingFile
	// ahead: files written ahead (Encoded.WriteAhead) the transaction names, which its commit
	// marks as possibly referenced before it writes its manifest.
	ahead *Encoded
}

func (w *fileWrites) add(key string, data []byte, failpoint, what string) {
	w.files = append(w.files, pendingFile{key: key, data: data, failpoint: failpoint, what: what})
}

// addParts adds a file made of parts: ranges of stored files and bytes.
func (w *fileWrites) addParts(key string, parts []storage.Part, failpoint, what string) {
	w.files = append(w.files, pendingFile{key: key, parts: parts, failpoint: failpoint, what: what})
}

// put writes f into dir (composed from its parts, or its bytes), keeping a small data or
// deletion file's bytes for reads back (rememberWritten).
func (f pendingFile) put(ctx context.Context, dir storage.Store) error {
	if f.parts != nil {
		return storage.Compose(ctx, dir, f.key, f.parts)
	}
	if err := dir.Put(ctx, f.key, f.data); err != nil {
		return err
	}
	rememberWritten(dir.Location(f.key), f.key, f.data)
	return nil
}

// fileWriteConcurrency bounds how many of a transaction's files are written at once.
const fileWriteConcurrency = 8

// WriteTransaction writes the staged transaction's files not written yet, the _transactions
// one included, and makes the names of those written ahead (WriteAhead, Encoded.WriteAhead)
// durable: after it, Commit only writes the manifest. A caller can run it while other work
// of the commit runs (the sidecar's arming). Like staged data files, an uncommitted
// transaction file is unreferenced and harmless. Txn must not change afterwards.
func (s *Staged) WriteTransaction(ctx context.Context) error {
	if _, err := s.writeFiles(ctx); err != nil {
		return err
	}
	keys := s.unnamed
	if s.ahead != nil {
		keys = append(slices.Clip(keys), s.ahead.keys()...) // written into this directory (fits)
	}
	if err := storage.SyncNames(ctx, s.base.dir, keys); err != nil {
		return fmt.Errorf("lance: make the names of the files written ahead durable: %w", err)
	}
	s.unnamed = nil
	return nil
}

// WriteAhead writes the staged transaction's files now, off the turn of its commit, which
// then writes none: they are named by no version until it commits. Their names are not made
// durable here (storage.Unreferenced): the commit's WriteTransaction does that, with one sync
// of each directory for every file written into it ahead by then.
func (s *Staged) WriteAhead(ctx context.Context) error {
	keys, err := s.writeFiles(storage.Unreferenced(ctx))
	s.unnamed = append(s.unnamed, keys...)
	return err
}

// writeFiles writes the files not written yet, the _transactions one included, and returns
// their keys.
func (s *Staged) writeFiles(ctx context.Context) ([]string, error) {
	if s.txnWritten {
		return nil, nil
	}
	files := s.files
	if !s.inlineOnly {
		files = append(files, pendingFile{key: "_transactions/" + s.Txn.FileName(), data: encodeTransaction(s.Txn),
			failpoint: "lance.commit.before_txn_file", what: "transaction file"})
	}
	err := parallel.Each(files, fileWriteConcurrency, func(f pendingFile) error {
		if err := inject(f.failpoint); err != nil {
			return err
		}
		if err := f.put(ctx, s.base.dir); err != nil {
			return fmt.Errorf("lance: write %s: %w", f.what, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(files))
	for i, f := range files {
		keys[i] = f.key
	}
	s.files, s.txnWritten = nil, true
	return keys, nil
}

// Rebind moves a transaction staged ahead of its turn (its Txn.ReadVersion set by the caller)
// onto d, the version it reads: d must be that version of the same dataset and branch. A chain
// of transactions can so be staged, and their files written, before the first commits.
func (s *Staged) Rebind(d *Dataset) error {
	if d.dir.URI() != s.base.dir.URI() || d.Version() != s.Txn.ReadVersion {
		return fmt.Errorf("lance: rebind a transaction reading version %d onto %s version %d", s.Txn.ReadVersion, d.dir.URI(), d.Version())
	}
	s.base = d
	return nil
}

// CreateOptions configure a new dataset.
type CreateOptions struct {
	// DisableStableRowIDs turns off stable row ids (on by default, as OmniGraph does).
	DisableStableRowIDs bool
	// V1Naming writes manifests with the legacy V1 names (readers handle both).
	V1Naming bool
	Config   map[string]string
	Stage    StageOptions
	// FileVersion is the data file version the dataset declares and every file of it will
	// have, for good (zero: DataVersion). Create refuses a version this build cannot write.
	FileVersion file.Version
}

// Create writes version 1 of a new dataset at st with the given schema and initial rows (which
// may be none: a zero-fragment table). It fails with *CommitConflictError if version 1 exists.
func Create(ctx context.Context, st storage.Store, s *schema.Schema, recs []arrow.Record, opts CreateOptions) (*Dataset, error) {
	scheme := namingV2
	if opts.V1Naming {
		scheme = namingV1
	}
	empty := &Manifest{Schema: s, DataFormat: DataFormat, DataVersion: DataVersion}
	if !opts.FileVersion.IsZero() {
		empty.DataVersion = opts.FileVersion.String()
	}
	if !opts.DisableStableRowIDs {
		empty.ReaderFlags, empty.WriterFlags = FlagStableRowIDs, FlagStableRowIDs
	}
	base := &Dataset{root: st, dir: st, scheme: scheme, manifest: empty}
	w := &fileWrites{}
	frags, err := base.writeFragments(s, recs, opts.Stage.FileOptions, w)
	if err != nil {
		return nil, err
	}
	staged := base.newStaged(opts.Stage, Operation{Kind: OpOverwrite, Fragments: frags, Schema: s, ConfigUpsert: opts.Config}, w)
	return base.Commit(ctx, staged)
}

func (d *Dataset) newStaged(o StageOptions, op Operation, w *fileWrites) *Staged {
	id := o.UUID
	if id == "" {
		id = NewUUID()
	}
	st := &Staged{base: d, Txn: &Transaction{ReadVersion: d.readVersion(), UUID: id, Properties: o.Properties, Op: op}, inlineOnly: o.InlineTransactionOnly}
	if w != nil {
		st.files, st.ahead = w.files, w.ahead
	}
	return st
}

// readVersion is 0 for a dataset being created (no manifest on storage yet).
func (d *Dataset) readVersion() uint64 { return d.manifest.Version }

// StageAppend encodes recs as new fragments and returns an Append transaction.
func (d *Dataset) StageAppend(ctx context.Context, recs []arrow.Record, o StageOptions) (*Staged, error) {
	w := &fileWrites{}
	frags, err := d.writeFragments(d.Schema(), recs, o.FileOptions, w)
	if err != nil {
		return nil, err
	}
	return d.newStaged(o, Operation{Kind: OpAppend, Fragments: frags}, w), nil
}

// StageInsertOnlyUpdate encodes recs as new fragments and returns the insert-only filtered
// Update (RewriteRows, no removed or updated fragments, every field preserved) that OmniGraph
// commits for a strict insert.
func (d *Dataset) StageInsertOnlyUpdate(ctx context.Context, recs []arrow.Record, o StageOptions) (*Staged, error) {
	w := &fileWrites{}
	frags, err := d.writeFragments(d.Schema(), recs, o.FileOptions, w)
	if err != nil {
		return nil, err
	}
	return d.stageInsertOnly(frags, o, w), nil
}

// stageInsertOnly is the staged insert-only Update of new fragments frags whose files w
// writes: StageInsertOnlyUpdate's, and StageInsertOnlyUpdateEncoded's for files encoded ahead.
func (d *Dataset) stageInsertOnly(frags []Fragment, o StageOptions, w *fileWrites) *Staged {
	return d.newStaged(o, Operation{Kind: OpUpdate, Fragments: frags, UpdateMode: UpdateRewriteRows, FieldsForPreservingFragBitmap: d.fieldIDs()}, w)
}

// StageOverwrite replaces the whole table with recs (none: a zero-fragment overwrite). A nil
// schema keeps the current one.
func (d *Dataset) StageOverwrite(ctx context.Context, s *schema.Schema, recs []arrow.Record, o StageOptions) (*Staged, error) {
	if s == nil {
		s = d.Schema()
	}
	w := &fileWrites{}
	frags, err := d.writeFragments(s, recs, o.FileOptions, w)
	if err != nil {
		return nil, err
	}
	return d.newStaged(o, Operation{Kind: OpOverwrite, Fragments: frags, Schema: s}, w), nil
}

// StageRestore returns a Restore transaction that makes version v current again.
func (d *Dataset) StageRestore(ctx context.Context, v uint64, o StageOptions) (*Staged, error) {
	if v == 0 || v > d.Version() {
		return nil, &VersionNotFoundError{Dataset: d.dir.URI(), Version: v}
	}
	if _, _, _, _, err := readManifest(ctx, d.dir, d.scheme, v); err != nil {
		return nil, err
	}
	return d.newStaged(o, Operation{Kind: OpRestore, RestoreVersion: v}, nil), nil
}

// StageDelete encodes new cumulative deletion files for every fragment with rows matching f and
// returns a Delete transaction. Fragments left with no live row are removed instead.
func (d *Dataset) StageDelete(ctx context.Context, f Filter, o StageOptions) (*Staged, error) {
	w := &fileWrites{}
	updated, removed, err := d.deleteMatching(ctx, f, w)
	if err != nil {
		return nil, err
	}
	return d.newStaged(o, Operation{Kind: OpDelete, UpdatedFragments: updated, RemovedFragmentIDs: removed, Predicate: f.SQL}, w), nil
}

// StageUpsert replaces the rows whose key column matches a key in recs and inserts the rest, as
// one Update (RewriteRows): old rows are masked by deletion files, recs become new fragments.
func (d *Dataset) StageUpsert(ctx context.Context, key string, recs []arrow.Record, o StageOptions) (*Staged, error) {
	keys, err := columnKeys(recs, key)
	if err != nil {
		return nil, err
	}
	w := &fileWrites{}
	updated, removed, err := d.deleteMatching(ctx, In(key, keys...), w)
	if err != nil {
		return nil, err
	}
	frags, err := d.writeFragments(d.Schema(), recs, o.FileOptions, w)
	if err != nil {
		return nil, err
	}
	return d.newStaged(o, d.rewriteRowsOp(updated, removed, frags), w), nil
}

// rewriteRowsOp is the Update a RewriteRows write commits, as Lance's merge_insert records it:
// the replaced rows are masked by deletion files and written anew in new fragments, so no
// column of an existing fragment changes in place (fields_modified is empty, and the indices
// go on covering the fragments that only gained deletions), and every field is listed as
// changed for rows that keep their ids in a new fragment.
func (d *Dataset) rewriteRowsOp(updated []Fragment, removed []uint64, frags []Fragment) Operation {
	return Operation{Kind: OpUpdate, UpdatedFragments: updated, RemovedFragmentIDs: removed, Fragments: frags,
		UpdateMode: UpdateRewriteRows, FieldsForPreservingFragBitmap: d.fieldIDs()}
}

// StageRewriteRows replaces the rows at the given addresses (and inserts the rest) with recs,
// as one Update (RewriteRows): each touched fragment gets a new cumulative deletion file, recs
// become new fragments. Unlike StageUpsert it reads no data column, only the deletion files of
// the touched fragments, so a caller that keeps a key -> address index pays for what it changes.
func (d *Dataset) StageRewriteRows(ctx context.Context, remove []RowAddress, recs []arrow.Record, o StageOptions) (*Staged, error) {
	w := &fileWrites{}
	updated, removed, err := d.deleteAddresses(ctx, remove, w)
	if err != nil {
		return nil, err
	}
	frags, err := d.writeFragments(d.Schema(), recs, o.FileOptions, w)
	if err != nil {
		return nil, err
	}
	return d.newStaged(o, d.rewriteRowsOp(updated, removed, frags), w), nil
}

// AddedFragments returns the fragments of this version that the given older manifest lacks,
// e.g. the ones a commit just added (their ids are assigned at commit).
func (d *Dataset) AddedFragments(older *Manifest) []Fragment {
	had := map[uint64]bool{}
	for i := range older.Fragments {
		had[older.Fragments[i].ID] = true
	}
	var out []Fragment
	for _, f := range d.manifest.Fragments {
		if !had[f.ID] {
			out = append(out, f)
		}
	}
	return out
}

// fieldIDs is every field id of the schema in pre-order, as Update's field lists spell them.
func (d *Dataset) fieldIDs() []uint32 {
	ids := d.Schema().FieldIDs()
	out := make([]uint32, len(ids))
	for i, id := range ids {
		out[i] = uint32(id)
	}
	return out
}

// Commit makes a staged transaction visible as exactly version ReadVersion+1, with no retry:
// if that version already exists it returns *CommitConflictError and nothing becomes visible.
func (d *Dataset) Commit(ctx context.Context, s *Staged) (*Dataset, error) {
	pc, err := d.PrepareCommit(ctx, s)
	if err != nil {
		return nil, err
	}
	return pc.Commit(ctx)
}

// PreparedCommit is a staged transaction's next manifest, built and encoded but not written:
// Dataset is the version its Commit makes visible, so that a caller can name that version
// (its manifest's location and size, its rows) in a write it makes beside the commit.
type PreparedCommit struct {
	s    *Staged
	next *Dataset
	body []byte
}

// PrepareCommit builds the manifest Commit would write for s, with no request.
func (d *Dataset) PrepareCommit(ctx context.Context, s *Staged) (*PreparedCommit, error) {
	base := s.base
	if base == nil || base.dir.URI() != d.dir.URI() {
		return nil, errors.New("lance: staged transaction belongs to another dataset or branch")
	}
	m, carried, err := base.buildManifest(ctx, s.Txn)
	if err != nil {
		return nil, err
	}
	txnBytes := encodeTransaction(s.Txn)
	m.TransactionFile = s.TransactionFileName()
	if s.inlineOnly {
		m.WriterFlags |= FlagDisableTransactionFile
	}
	var reuse fragmentCodes
	if base.codes != nil {
		reuse = make(fragmentCodes, len(m.Fragments))
		for i, from := range carried {
			if from >= 0 {
				reuse[i] = base.codes[from]
			}
		}
	}
	body, codes := marshalManifestFileReusing(m, txnBytes, reuse)
	key := manifestKey(base.scheme, m.Version)
	next := &Dataset{root: base.root, dir: base.dir, branch: base.branch, scheme: base.scheme, manifest: m, key: key, size: int64(len(body)), codes: codes}
	return &PreparedCommit{s: s, next: next, body: body}, nil
}

// Dataset is the version the commit makes visible, as Commit returns it once it has.
func (pc *PreparedCommit) Dataset() *Dataset { return pc.next }

// Commit writes the staged files not yet written, then the manifest, at exactly its version:
// *CommitConflictError, with nothing visible, when that version already exists.
func (pc *PreparedCommit) Commit(ctx context.Context) (*Dataset, error) {
	s, base, next := pc.s, pc.s.base, pc.next
	if err := s.WriteTransaction(ctx); err != nil {
		return nil, err
	}
	if err := inject("lance.commit.before_manifest"); err != nil {
		return nil, err
	}
	if s.ahead != nil {
		s.ahead.named.Store(true) // from here on the manifest may name them
	}
	if err := base.dir.PutIfAbsent(ctx, next.key, pc.body); err != nil {
		if errors.Is(err, storage.ErrAlreadyExists) {
			return nil, &CommitConflictError{Dataset: base.dir.URI(), ReadVersion: s.Txn.ReadVersion, Version: next.manifest.Version}
		}
		return nil, fmt.Errorf("lance: write manifest version %d: %w", next.manifest.Version, err)
	}
	if err := inject("lance.commit.after_manifest"); err != nil {
		return nil, err
	}
	// No _versions/latest_version_hint.json is written: readers only consult it on stores with
	// unordered listings, a missing or stale hint never changes what they find, and it would
	// cost every commit one more object write.
	return next, nil
}

// buildManifest applies txn to this version, producing the manifest of version+1. carried[i]
// is the index in this version of the fragment m.Fragments[i] when that fragment is carried
// over unchanged, else -1.
func (d *Dataset) buildManifest(ctx context.Context, txn *Transaction) (m *Manifest, carried []int, err error) {
	m, err = d.applyTxn(ctx, txn)
	if err != nil {
		return nil, nil, err
	}
	carried = make([]int, len(m.Fragments))
	for i := range carried {
		carried[i] = -1
	}
	old := d.manifest.Fragments
	switch op := &txn.Op; op.Kind {
	case OpAppend:
		for i := range old {
			carried[i] = i
		}
	case OpRewrite:
		// Every fragment outside the groups is carried; the new ones have fresh ids.
		at := make(map[uint64]int, len(old))
		for i := range old {
			at[old[i].ID] = i
		}
		for _, g := range txn.Op.Groups {
			for _, f := range g.OldFragments {
				delete(at, f.ID)
			}
		}
		for i := range m.Fragments {
			if j, ok := at[m.Fragments[i].ID]; ok {
				carried[i] = j
			}
		}
	case OpDelete, OpUpdate:
		// replaceFragments keeps the old order, dropping removed fragments and replacing
		// updated ones: the rest are carried.
		changed := map[uint64]bool{}
		for i := range op.UpdatedFragments {
			changed[op.UpdatedFragments[i].ID] = true
		}
		j := 0
		for i := range m.Fragments {
			id := m.Fragments[i].ID
			for j < len(old) && old[j].ID != id {
				j++
			}
			if j == len(old) {
				break // the added fragments, after the carried ones
			}
			if !changed[id] {
				carried[i] = j
			}
			j++
		}
	}
	return m, carried, nil
}

// applyTxn applies txn to this version's manifest.
func (d *Dataset) applyTxn(ctx context.Context, txn *Transaction) (*Manifest, error) {
	old := d.manifest
	stable := old.StableRowIDs()
	m := *old
	m.Version = old.Version + 1
	m.Timestamp = time.Now().UTC()
	m.WriterLibrary, m.WriterVersion = WriterLibrary, WriterVersion
	m.Tag = ""
	op := &txn.Op
	var added []Fragment
	// The new fragments that arrive with every row's stable id (rows an Update moved):
	// indices may go on covering them.
	var pureUpdated []int
	var rewritten [][]uint64 // a Rewrite's new fragment ids, group by group
	switch op.Kind {
	case OpAppend:
		m.Fragments = append(cloneFragments(old.Fragments), op.Fragments...)
		added = m.Fragments[len(old.Fragments):]
	case OpOverwrite:
		if err := checkAddedFiles(d.dir.URI(), old, op.Fragments); err != nil {
			return nil, err
		}
		m.Schema = op.Schema
		m.Fragments = cloneFragments(op.Fragments)
		for i := range m.Fragments {
			m.Fragments[i].ID = uint64(i)
		}
		if len(op.Fragments) > 0 {
			last := uint32(len(op.Fragments) - 1)
			if m.MaxFragmentID == nil || *m.MaxFragmentID < last {
				m.MaxFragmentID = &last
			}
		}
		if len(op.ConfigUpsert) > 0 {
			m.Config = mergeMaps(old.Config, op.ConfigUpsert)
		}
		stableAssign(&m, m.Fragments, stable)
	case OpDelete, OpUpdate:
		frags := replaceFragments(old.Fragments, op.UpdatedFragments, op.RemovedFragmentIDs)
		n := len(frags)
		m.Fragments = append(frags, op.Fragments...)
		added = m.Fragments[n:]
		for i := range added {
			if added[i].hasRowIDs() {
				pureUpdated = append(pureUpdated, i)
			}
		}
	case OpRewrite:
		for _, g := range op.Groups {
			if err := checkAddedFiles(d.dir.URI(), old, g.NewFragments); err != nil {
				return nil, err
			}
		}
		frags, ids, err := rewriteFragments(&m, old, op.Groups, stable)
		if err != nil {
			return nil, err
		}
		m.Fragments, rewritten = frags, ids
	case OpCreateIndex:
		for i := range op.NewIndices {
			if err := d.checkNewIndex(&op.NewIndices[i]); err != nil {
				return nil, err
			}
		}
	case OpRestore:
		src, _, _, _, err := readManifest(ctx, d.dir, d.scheme, op.RestoreVersion)
		if err != nil {
			return nil, err
		}
		m.Schema, m.Fragments, m.Config, m.TableMetadata = src.Schema, cloneFragments(src.Fragments), src.Config, src.TableMetadata
		m.BasePaths = src.BasePaths
		m.Indices = cloneIndices(src.Indices)
		if src.MaxFragmentID != nil && (m.MaxFragmentID == nil || *m.MaxFragmentID < *src.MaxFragmentID) {
			m.MaxFragmentID = src.MaxFragmentID
		}
	default:
		return nil, fmt.Errorf("%w: committing a %s transaction", ErrUnsupported, op.Kind)
	}
	if err := checkAddedFiles(d.dir.URI(), old, added); err != nil {
		return nil, err
	}
	if added != nil {
		next := old.nextFragmentID()
		for i := range added {
			added[i].ID = next
			next++
		}
		if len(added) > 0 {
			mx := uint32(next - 1)
			m.MaxFragmentID = &mx
		}
		stableAssign(&m, added, stable)
	}
	var moved []uint64
	for _, i := range pureUpdated {
		moved = append(moved, added[i].ID)
	}
	if err := d.carryIndices(old, &m, txn, moved, rewritten); err != nil {
		return nil, err
	}
	m.recomputeFlags(stable)
	return &m, nil
}

// rewriteFragments applies a Rewrite's groups to old's fragments, as lance does: each group's
// new fragments take the place of its old ones when those are contiguous (else the old ones
// are dropped and the new ones appended). New fragments without an id get the next ones, and
// max_fragment_id (in m) follows. next_row_id is unchanged: the new fragments carry the row
// ids of the rows they hold. ids are the new fragments' ids, group by group.
func rewriteFragments(m *Manifest, old *Manifest, groups []RewriteGroup, stable bool) (_ []Fragment, ids [][]uint64, _ error) {
	frags := cloneFragments(old.Fragments)
	next := old.nextFragmentID()
	maxID, hasMax := uint64(0), old.MaxFragmentID != nil
	if hasMax {
		maxID = uint64(*old.MaxFragmentID)
	}
	for gi := range groups {
		g := &groups[gi]
		if len(g.OldFragments) == 0 {
			return nil, nil, fmt.Errorf("lance: rewrite group %d replaces no fragment", gi)
		}
		start := slices.IndexFunc(frags, func(f Fragment) bool { return f.ID == g.OldFragments[0].ID })
		if start < 0 {
			return nil, nil, fmt.Errorf("lance: rewrite group %d replaces fragment %d, which version %d does not have", gi, g.OldFragments[0].ID, old.Version)
		}
		contiguous := start+len(g.OldFragments) <= len(frags)
		for i := 1; contiguous && i < len(g.OldFragments); i++ {
			contiguous = frags[start+i].ID == g.OldFragments[i].ID
		}
		added := cloneFragments(g.NewFragments)
		ids = append(ids, make([]uint64, len(added)))
		for i := range added {
			if added[i].ID == 0 {
				added[i].ID = next
				next++
			}
			ids[gi][i] = added[i].ID
			if stable && !added[i].hasRowIDs() {
				return nil, nil, fmt.Errorf("lance: rewrite group %d adds a fragment without row ids to a stable-row-id dataset", gi)
			}
			if !hasMax || added[i].ID > maxID {
				maxID, hasMax = added[i].ID, true
			}
		}
		if contiguous {
			frags = slices.Replace(frags, start, start+len(g.OldFragments), added...)
			continue
		}
		for _, of := range g.OldFragments {
			i := slices.IndexFunc(frags, func(f Fragment) bool { return f.ID == of.ID })
			if i < 0 {
				return nil, nil, fmt.Errorf("lance: rewrite group %d replaces fragment %d, which version %d does not have", gi, of.ID, old.Version)
			}
			frags = slices.Delete(frags, i, i+1)
		}
		frags = append(frags, added...)
	}
	seen := make(map[uint64]bool, len(frags))
	for i := range frags {
		if seen[frags[i].ID] {
			return nil, nil, fmt.Errorf("lance: the rewrite leaves two fragments with id %d", frags[i].ID)
		}
		seen[frags[i].ID] = true
	}
	if hasMax {
		if maxID > math.MaxUint32 {
			return nil, nil, fmt.Errorf("lance: fragment id %d overflows max_fragment_id", maxID)
		}
		mx := uint32(maxID)
		m.MaxFragmentID = &mx
	}
	return frags, ids, nil
}

// stableAssign gives fragments without row ids fresh ones from next_row_id, and records the
// version that created and last updated each row, as lance does for stable-row-id datasets.
func stableAssign(m *Manifest, frags []Fragment, stable bool) {
	if !stable {
		return
	}
	for i := range frags {
		f := &frags[i]
		if f.hasRowIDs() {
			continue
		}
		f.RowIDs = encodeRangeSequence(m.NextRowID, m.NextRowID+f.PhysicalRows)
		m.NextRowID += f.PhysicalRows
		f.CreatedAt = encodeVersionSequence(f.PhysicalRows, m.Version)
		f.LastUpdatedAt = encodeVersionSequence(f.PhysicalRows, m.Version)
	}
}

func cloneFragments(in []Fragment) []Fragment {
	out := make([]Fragment, len(in))
	for i := range in {
		out[i] = in[i].clone()
	}
	return out
}

func replaceFragments(old, updated []Fragment, removed []uint64) []Fragment {
	byID := map[uint64]*Fragment{}
	for i := range updated {
		byID[updated[i].ID] = &updated[i]
	}
	gone := map[uint64]bool{}
	for _, id := range removed {
		gone[id] = true
	}
	out := make([]Fragment, 0, len(old))
	for i := range old {
		switch {
		case gone[old[i].ID]:
		case byID[old[i].ID] != nil:
			out = append(out, byID[old[i].ID].clone())
		default:
			out = append(out, old[i].clone())
		}
	}
	return out
}

func mergeMaps(a, b map[string]string) map[string]string {
	out := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// NewUUID mints a random hyphenated UUIDv4.
func NewUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// newDataFileName follows lance's convention: 16 random bytes, the first three written as 24
// binary digits, the rest as hex.
func newDataFileName() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	var sb strings.Builder
	for _, x := range b[:3] {
		fmt.Fprintf(&sb, "%08b", x)
	}
	sb.WriteString(hex.EncodeToString(b[3:]))
	sb.WriteString(".lance")
	return sb.String()
}

func randomUint64() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

package publisher

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/cespare/xxhash/v2"

	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// A checkpoint is the folded state of one __manifest version of one branch, written by the
// writer so that opening the graph reads a bounded amount of data: the checkpoint, then only
// the rows of the fragments added after it. It is a file of this product's own beside the
// branch's Lance versions (docs/manifest-checkpoint.md), never required (a graph made by
// another build has none and is scanned whole) and never trusted unless it checks out.
//
// Why folding the newer fragments is enough: every __manifest write of this build either adds
// one fragment of new rows and deletes the rows they replace (a publish) or moves live rows
// into new fragments (a tail compaction); new fragments always take ids above every earlier
// one. So the live rows of the latest version are the checkpoint's rows minus the ones
// replaced since (whose replacements are newer rows, which the fold applies over them) plus
// the rows of the fragments above the checkpoint's highest id. A compaction's fragment holds
// rows the checkpoint already folded; folding is idempotent for them (heads and registrations
// are the live row, versions and tombstones take maxima, the key filters and caches are sets).
// A branch deleted and made again, a checkpoint from another graph, a fragment id taken twice,
// deletions undone, or a head or registration row gone without a replacement (what a Lance
// restore of __manifest leaves) fail the checks in validate and loadCheckpoint, and the state
// is scanned whole. A restore followed by further publishes can pass them: whoever restores
// __manifest by hand must delete the branch's checkpoints too (docs/manifest-checkpoint.md).

// CheckpointDir is where a branch's checkpoints live, under its Lance directory in __manifest
// (tree/<branch>/ for a branch), so that deleting the branch or the graph takes them along.
const CheckpointDir = "_omnigraph_checkpoints"

// CheckpointRows is how many rows may sit in fragments above the newest checkpoint before the
// writer writes a new one after a publish: what an open folds beyond the checkpoint.
var CheckpointRows uint64 = 16384

// checkpointsKept is how many checkpoints a branch keeps (the newest and the one before it,
// for a SnapshotAt a little in the past).
const checkpointsKept = 2

const checkpointFormat = 2

var checkpointMagic = []byte("OMNIGRAPH-CKPT\n\x00")

// recentCommitsKept is how many cached commits a checkpoint carries.
const recentCommitsKept = 4096

type ckptFragment struct {
	ID      uint64 `json:"id"`
	Path    string `json:"path"`
	Deleted uint64 `json:"deleted_rows"`
}

func deletedRows(f *lance.Fragment) uint64 {
	if f.Deletion == nil {
		return 0
	}
	return f.Deletion.NumDeletedRows
}

type ckptRegistration struct {
	Stable   uint64 `json:"stable_table_id"`
	Inc      uint64 `json:"table_incarnation_id"`
	TableKey string `json:"table_key"`
	Path     string `json:"location"`
}

type ckptVersion struct {
	Stable   uint64               `json:"stable_table_id"`
	Inc      uint64               `json:"table_incarnation_id"`
	Version  uint64               `json:"table_version"`
	Branch   *string              `json:"table_branch"`
	RowCount uint64               `json:"row_count"`
	Meta     TableVersionMetadata `json:"metadata"`
}

type ckptTombstone struct {
	Stable  uint64 `json:"stable_table_id"`
	Inc     uint64 `json:"table_incarnation_id"`
	Version uint64 `json:"table_version"`
}

type ckptCommit struct {
	ID              string              `json:"id"`
	ManifestVersion uint64              `json:"manifest_version"`
	Branch          *string             `json:"branch"`
	Meta            GraphCommitMetadata `json:"metadata"`
}

type ckptReceipt struct {
	Key             string  `json:"key"`
	Receipt         Receipt `json:"receipt"`
	ManifestVersion uint64  `json:"manifest_version"`
}

// checkpointHeader is the JSON part of a checkpoint: everything but the key filters.
type checkpointHeader struct {
	Format           int                    `json:"format"`
	Branch           string                 `json:"branch"`
	BranchIdentifier lance.BranchIdentifier `json:"branch_identifier"`
	ManifestVersion  uint64                 `json:"manifest_version"`
	MaxFragmentID    *uint64                `json:"max_fragment_id"`
	Fragments        []ckptFragment         `json:"fragments"`
	Heads            map[string]string      `json:"heads"`
	Registrations    []ckptRegistration     `json:"registrations"`
	Versions         []ckptVersion          `json:"versions"`
	Tombstones       []ckptTombstone        `json:"tombstones"`
	Addresses        map[string]uint64      `json:"addresses"`
	LineageHead      *ckptCommit            `json:"lineage_head"`
	Receipts         []ckptReceipt          `json:"receipts"`
	Commits          []ckptCommit           `json:"commits"`
}

// CheckpointError is a checkpoint that was not used, and why.
type CheckpointError struct {
	Key    string
	Reason string
}

func (e *CheckpointError) Error() string { return "checkpoint " + e.Key + ": " + e.Reason }

func fragmentPath(f *lance.Fragment) string {
	if len(f.Files) == 0 {
		return ""
	}
	return f.Files[0].Path
}

func maxFragmentID(m *lance.Manifest) *uint64 {
	if m.MaxFragmentID == nil {
		return nil
	}
	v := uint64(*m.MaxFragmentID)
	return &v
}

func toCkptCommit(c *Commit) *ckptCommit {
	return &ckptCommit{ID: c.ID, ManifestVersion: c.ManifestVersion, Branch: c.Branch, Meta: c.Meta}
}

func (c *ckptCommit) commit() Commit {
	return Commit{ID: c.ID, ManifestVersion: c.ManifestVersion, Branch: c.Branch, Meta: c.Meta}
}

// encodeCheckpoint lays a state out: magic, header length (u32 LE), header JSON, the receipt
// key filter, the commit key filter, and the xxhash64 (LE) of everything before it. The sum
// guards against torn and damaged files, not against forgery; xxhash reads the ~10 MB of a
// million messages' filters in about a millisecond, where SHA-256 took 8 on the open path.
func encodeCheckpoint(s *State, ident lance.BranchIdentifier) ([]byte, error) {
	m := s.ds.Manifest()
	h := checkpointHeader{Format: checkpointFormat, Branch: s.Branch, BranchIdentifier: ident, ManifestVersion: s.ManifestVersion,
		MaxFragmentID: maxFragmentID(m), Heads: s.Heads, Addresses: map[string]uint64{}}
	for i := range m.Fragments {
		f := &m.Fragments[i]
		h.Fragments = append(h.Fragments, ckptFragment{ID: f.ID, Path: fragmentPath(f), Deleted: deletedRows(f)})
	}
	for id, r := range s.registrations {
		h.Registrations = append(h.Registrations, ckptRegistration{Stable: id.StableTableID, Inc: id.TableIncarnationID, TableKey: r.tableKey, Path: r.path})
	}
	for id, v := range s.versions {
		h.Versions = append(h.Versions, ckptVersion{Stable: id.StableTableID, Inc: id.TableIncarnationID, Version: v.version, Branch: v.branch, RowCount: v.rowCount, Meta: v.meta})
	}
	for id, v := range s.tombstones {
		h.Tombstones = append(h.Tombstones, ckptTombstone{Stable: id.StableTableID, Inc: id.TableIncarnationID, Version: v})
	}
	for k, a := range s.addr {
		h.Addresses[k] = uint64(a)
	}
	if s.lineageHead != nil {
		h.LineageHead = toCkptCommit(s.lineageHead)
	}
	for _, r := range s.recent.all() {
		h.Receipts = append(h.Receipts, ckptReceipt{Key: r.Key, Receipt: r.Receipt, ManifestVersion: r.ManifestVersion})
	}
	cs := s.commits.newest(recentCommitsKept)
	for i := len(cs) - 1; i >= 0; i-- { // oldest first, so that loading leaves the newest most recent
		h.Commits = append(h.Commits, *toCkptCommit(&cs[i]))
	}
	hj, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	out := append([]byte{}, checkpointMagic...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(hj)))
	out = append(out, hj...)
	out = s.receiptKeys.marshal(out)
	out = s.commitKeys.marshal(out)
	return binary.LittleEndian.AppendUint64(out, xxhash.Sum64(out)), nil
}

// decodeCheckpoint checks a checkpoint's integrity and reads it back.
func decodeCheckpoint(b []byte) (*checkpointHeader, *keyFilter, *keyFilter, error) {
	if len(b) < len(checkpointMagic)+4+8 || !bytes.Equal(b[:len(checkpointMagic)], checkpointMagic) {
		return nil, nil, nil, errors.New("not a checkpoint (magic)")
	}
	body, sum := b[:len(b)-8], binary.LittleEndian.Uint64(b[len(b)-8:])
	if xxhash.Sum64(body) != sum {
		return nil, nil, nil, errors.New("checksum mismatch (torn or altered)")
	}
	rest := body[len(checkpointMagic):]
	n := binary.LittleEndian.Uint32(rest)
	rest = rest[4:]
	if uint64(n) > uint64(len(rest)) {
		return nil, nil, nil, errors.New("header length past the end")
	}
	var h checkpointHeader
	if err := json.Unmarshal(rest[:n], &h); err != nil {
		return nil, nil, nil, fmt.Errorf("header: %w", err)
	}
	if h.Format != checkpointFormat {
		return nil, nil, nil, fmt.Errorf("format %d, this build reads %d", h.Format, checkpointFormat)
	}
	rk, rest, err := unmarshalFilter(rest[n:])
	if err != nil {
		return nil, nil, nil, err
	}
	ck, rest, err := unmarshalFilter(rest)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(rest) != 0 {
		return nil, nil, nil, fmt.Errorf("%d bytes after the filters", len(rest))
	}
	return &h, rk, ck, nil
}

// validate checks that the checkpoint describes an earlier state of ds's own history (see the
// type's comment) and returns the fragments of ds to fold on top of it.
func (h *checkpointHeader) validate(ds *lance.Dataset, branch string, ident lance.BranchIdentifier) ([]uint64, error) {
	m := ds.Manifest()
	switch {
	case h.Branch != branch:
		return nil, fmt.Errorf("of branch %q, not %q", h.Branch, branch)
	case !h.BranchIdentifier.Equal(ident):
		return nil, errors.New("of another incarnation of the branch (its identifier differs)")
	case h.ManifestVersion > ds.Version():
		return nil, fmt.Errorf("of version %d, newer than %d", h.ManifestVersion, ds.Version())
	}
	had := map[uint64]ckptFragment{}
	for _, f := range h.Fragments {
		had[f.ID] = f
	}
	latestMax := maxFragmentID(m)
	if h.MaxFragmentID != nil && (latestMax == nil || *latestMax < *h.MaxFragmentID) {
		return nil, errors.New("the manifest's highest fragment id went down (a restore?)")
	}
	var fold []uint64
	for i := range m.Fragments {
		f := &m.Fragments[i]
		if h.MaxFragmentID == nil || f.ID > *h.MaxFragmentID {
			fold = append(fold, f.ID)
			continue
		}
		c, ok := had[f.ID]
		if !ok || c.Path != fragmentPath(f) {
			return nil, fmt.Errorf("fragment %d is not the one the checkpoint folded", f.ID)
		}
		if deletedRows(f) < c.Deleted {
			return nil, fmt.Errorf("fragment %d has fewer deleted rows than it had (a restore?)", f.ID)
		}
	}
	return fold, nil
}

// state rebuilds the checkpoint's state (at its own version; the caller folds the rest).
func (h *checkpointHeader) state(rk, ck *keyFilter) (*State, error) {
	st := newState(h.Branch)
	st.ManifestVersion = h.ManifestVersion
	if h.Heads != nil {
		st.Heads = h.Heads
	}
	for _, r := range h.Registrations {
		id := ids.TableIdentity{StableTableID: r.Stable, TableIncarnationID: r.Inc}
		if !id.Valid() || r.Path != ids.TablePath(r.TableKey, id) {
			return nil, fmt.Errorf("registration of %s is not canonical", r.TableKey)
		}
		st.registrations[id] = registration{tableKey: r.TableKey, path: r.Path}
	}
	for _, v := range h.Versions {
		st.versions[ids.TableIdentity{StableTableID: v.Stable, TableIncarnationID: v.Inc}] = versionEntry{version: v.Version, branch: v.Branch, rowCount: v.RowCount, meta: v.Meta}
	}
	for _, t := range h.Tombstones {
		st.tombstones[ids.TableIdentity{StableTableID: t.Stable, TableIncarnationID: t.Inc}] = t.Version
	}
	for k, a := range h.Addresses {
		st.addr[k] = lance.RowAddress(a)
	}
	if h.LineageHead != nil {
		c := h.LineageHead.commit()
		st.lineageHead = &c
	}
	for _, r := range h.Receipts {
		rc := r.Receipt
		rc.ManifestVersion = r.ManifestVersion
		st.recent.put(r.Key, rc)
	}
	for i := range h.Commits {
		st.commits.put(h.Commits[i].commit())
	}
	st.receiptKeys, st.commitKeys = rk, ck
	if h.MaxFragmentID != nil {
		st.checkpointed, st.hasCheckpoint = *h.MaxFragmentID, true
	}
	return st, st.checkAliases()
}

// checkpointStore is the branch's checkpoint directory.
func (p *Publisher) checkpointStore() storage.Store {
	if p.branch == "" {
		return p.store.Sub(CheckpointDir)
	}
	return p.store.Sub("tree/" + p.branch + "/" + CheckpointDir)
}

func checkpointName(v uint64) string { return fmt.Sprintf("%020d.ckpt", v) }

// checkpointVersions lists the branch's checkpoints, newest first.
func (p *Publisher) checkpointVersions(ctx context.Context) ([]uint64, error) {
	files, _, err := p.checkpointStore().ListDir(ctx, "")
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, f := range files {
		name := f.Key[strings.LastIndexByte(f.Key, '/')+1:]
		if v, err := strconv.ParseUint(strings.TrimSuffix(name, ".ckpt"), 10, 64); err == nil && strings.HasSuffix(name, ".ckpt") {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] > out[j] })
	return out, nil
}

// fromCheckpoint builds ds's state from the newest checkpoint at or below its version that
// checks out, folding the fragments added after it; ok=false (with the reasons in status)
// when there is none and the caller must scan.
func (p *Publisher) fromCheckpoint(ctx context.Context, ds *lance.Dataset) (st *State, status string, err error) {
	versions, err := p.checkpointVersions(ctx)
	if err != nil || len(versions) == 0 {
		return nil, "no checkpoint", err
	}
	ident, err := p.BranchIdentifier(ctx)
	if err != nil {
		return nil, "", err
	}
	var refused []string
	for _, v := range versions {
		if v > ds.Version() {
			continue
		}
		key := checkpointName(v)
		st, err := p.loadCheckpoint(ctx, ds, key, ident)
		if err == nil {
			st.CheckpointStatus = "checkpoint " + key
			return st, st.CheckpointStatus, nil
		}
		var ce *CheckpointError
		if !errors.As(err, &ce) {
			return nil, "", err
		}
		slog.Warn("publisher: checkpoint not used; scanning __manifest", "branch", ids.BranchKey(p.branch), "error", err.Error())
		refused = append(refused, ce.Error())
	}
	if len(refused) == 0 {
		return nil, "no checkpoint at or below the version", nil
	}
	return nil, "refused: " + strings.Join(refused, "; "), nil
}

func (p *Publisher) loadCheckpoint(ctx context.Context, ds *lance.Dataset, key string, ident lance.BranchIdentifier) (*State, error) {
	b, ok, err := p.checkpointStore().GetIfExists(ctx, key)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, &CheckpointError{Key: key, Reason: "removed while opening"}
	}
	h, rk, ck, err := decodeCheckpoint(b)
	if err != nil {
		return nil, &CheckpointError{Key: key, Reason: err.Error()}
	}
	fold, err := h.validate(ds, p.branch, ident)
	if err != nil {
		return nil, &CheckpointError{Key: key, Reason: err.Error()}
	}
	st, err := h.state(rk, ck)
	if err != nil {
		return nil, &CheckpointError{Key: key, Reason: err.Error()}
	}
	st.ds = ds
	if len(fold) > 0 {
		err := ds.Each(ctx, lance.ScanOptions{Columns: manifestColumns, WithRowAddress: true, Fragments: fold}, func(rec arrow.Record) error {
			rows, addrs, err := recordRows(rec)
			if err != nil {
				return err
			}
			return st.apply(rows, addrs)
		})
		if err != nil {
			return nil, err
		}
	}
	// The rows replaced in place (heads, registrations) must still be where the checkpoint
	// or the fold put them: one whose fragment is gone without the fold bringing the row back
	// means rows the checkpoint folded are no longer in the manifest.
	live := map[uint64]bool{}
	for _, f := range ds.Manifest().Fragments {
		live[f.ID] = true
	}
	for oid, a := range st.addr {
		if !live[a.Fragment()] {
			return nil, &CheckpointError{Key: key, Reason: fmt.Sprintf("row %s is gone from the manifest (a restore?)", oid)}
		}
	}
	st.ManifestVersion = ds.Version()
	return st, st.checkAliases()
}

// pendingRows counts the rows in fragments the newest checkpoint does not cover.
func (s *State) uncheckpointedRows() uint64 {
	var n uint64
	for _, f := range s.ds.Manifest().Fragments {
		if !s.hasCheckpoint || f.ID > s.checkpointed {
			n += f.PhysicalRows
		}
	}
	return n
}

// maybeCheckpoint writes a checkpoint of the writer's state once enough rows lie beyond the
// last one, and drops the older ones. It is best effort: the manifest stays the truth, and a
// failure only means the next open folds more.
func (p *Publisher) maybeCheckpoint(ctx context.Context) {
	st := p.state
	if st == nil || st.ds == nil || st.uncheckpointedRows() < CheckpointRows {
		return
	}
	if err := p.WriteCheckpoint(ctx); err != nil {
		slog.Warn("publisher: checkpoint not written", "branch", ids.BranchKey(p.branch), "error", err.Error())
	}
}

// WriteCheckpoint writes a checkpoint of the current state now (one atomic object write: a
// crash leaves the old checkpoints or the new one whole) and removes all but the newest ones.
func (p *Publisher) WriteCheckpoint(ctx context.Context) error {
	st := p.state
	if st == nil || st.ds == nil {
		return errors.New("publisher: no state to checkpoint")
	}
	ident, err := p.BranchIdentifier(ctx)
	if err != nil {
		return err
	}
	b, err := encodeCheckpoint(st, ident)
	if err != nil {
		return err
	}
	dir := p.checkpointStore()
	if err := dir.Put(ctx, checkpointName(st.ManifestVersion), b); err != nil {
		return err
	}
	if m := maxFragmentID(st.ds.Manifest()); m != nil {
		st.checkpointed, st.hasCheckpoint = *m, true
	}
	versions, err := p.checkpointVersions(ctx)
	if err != nil {
		return err
	}
	for i, v := range versions {
		if i >= checkpointsKept {
			if err := dir.Delete(ctx, checkpointName(v)); err != nil && !errors.Is(err, storage.ErrNotFound) {
				return err
			}
		}
	}
	return nil
}

package lance

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
)

// Rebase moves a staged Rewrite onto d, a later version of the dataset and branch it was staged
// from, so that a compaction staged off the writer's path can commit after the appends that
// committed meanwhile, as Lance's own conflict resolution lets a Rewrite pass an Append. Every
// fragment the rewrite replaces must be in d exactly as the rewrite read it (same files, rows,
// deletions and row sequences) and the schema must be the same; otherwise the rewritten files
// hold rows as they were and it returns *RewriteConflictError, leaving s unchanged. New
// fragment ids are assigned when it commits, so fragments added meanwhile take none of them.
//
// A CreateIndex moves too, as Lance lets it pass an Append: every fragment its indices cover
// must still be there with the same files (rows deleted since are masked at query time; rows
// added since are in new fragments the index does not cover). A covered fragment that went
// (compacted or emptied) makes it a *RewriteConflictError as well.
func (s *Staged) Rebase(d *Dataset) error {
	if s.Txn.Op.Kind != OpRewrite && s.Txn.Op.Kind != OpCreateIndex {
		return fmt.Errorf("lance: rebase a %s transaction: only a Rewrite or a CreateIndex moves onto a later version", s.Txn.Op.Kind)
	}
	if d.dir.URI() != s.base.dir.URI() || d.Version() < s.Txn.ReadVersion {
		return fmt.Errorf("lance: rebase a transaction reading version %d of %s onto %s version %d", s.Txn.ReadVersion, s.base.dir.URI(), d.dir.URI(), d.Version())
	}
	if d.Version() == s.Txn.ReadVersion {
		s.base = d
		return nil
	}
	if s.txnWritten && !s.inlineOnly {
		// Its _transactions file records the read version it was staged at.
		return fmt.Errorf("lance: rebase a transaction whose transaction file is written")
	}
	conflict := func(frag uint64, reason string) error {
		return &RewriteConflictError{Dataset: d.dir.URI(), ReadVersion: s.Txn.ReadVersion, Version: d.Version(), Fragment: frag, Reason: reason}
	}
	if !slices.Equal(s.base.Schema().FieldIDs(), d.Schema().FieldIDs()) {
		return conflict(0, "the schema changed")
	}
	if s.Txn.Op.Kind == OpCreateIndex {
		return s.rebaseCreateIndex(d, conflict)
	}
	at := make(map[uint64]*Fragment, len(d.manifest.Fragments))
	for i := range d.manifest.Fragments {
		at[d.manifest.Fragments[i].ID] = &d.manifest.Fragments[i]
	}
	for _, g := range s.Txn.Op.Groups {
		for i := range g.OldFragments {
			old := &g.OldFragments[i]
			now, ok := at[old.ID]
			switch {
			case !ok:
				return conflict(old.ID, fmt.Sprintf("fragment %d is gone", old.ID))
			case !unchangedFragment(old, now):
				return conflict(old.ID, fmt.Sprintf("fragment %d changed", old.ID))
			}
		}
	}
	// An index created meanwhile may cover part of a group: the rewrite would then move rows
	// out from under it.
	ids := make([][]uint64, len(s.Txn.Op.Groups))
	for i, g := range s.Txn.Op.Groups {
		ids[i] = make([]uint64, len(g.NewFragments))
	}
	if _, err := d.rewriteIndices(cloneIndices(d.manifest.Indices), d.manifest, s.Txn.Op.Groups, ids); err != nil {
		var ie *IndexError
		if errors.As(err, &ie) {
			return conflict(0, fmt.Sprintf("index %q: %s", ie.Index, ie.Reason))
		}
		return err
	}
	s.Txn.ReadVersion, s.base = d.Version(), d
	return nil
}

// unchangedFragment says whether two versions' records of a fragment describe the same rows:
// the same physical fragment (sameFragment), with the same deletions and row sequences.
func unchangedFragment(a, b *Fragment) bool {
	if !sameFragment(a, b) || !sameDeletion(a.Deletion, b.Deletion) || !bytes.Equal(a.RowIDs, b.RowIDs) ||
		!bytes.Equal(a.CreatedAt, b.CreatedAt) || !bytes.Equal(a.LastUpdatedAt, b.LastUpdatedAt) {
		return false
	}
	for i := range a.Files {
		if !slices.Equal(a.Files[i].Fields, b.Files[i].Fields) {
			return false
		}
	}
	return true
}

// rebaseCreateIndex moves a staged CreateIndex onto d (see Rebase).
func (s *Staged) rebaseCreateIndex(d *Dataset, conflict func(uint64, string) error) error {
	was := make(map[uint64]*Fragment, len(s.base.manifest.Fragments))
	for i := range s.base.manifest.Fragments {
		was[s.base.manifest.Fragments[i].ID] = &s.base.manifest.Fragments[i]
	}
	now := make(map[uint64]*Fragment, len(d.manifest.Fragments))
	for i := range d.manifest.Fragments {
		now[d.manifest.Fragments[i].ID] = &d.manifest.Fragments[i]
	}
	for _, x := range s.Txn.Op.NewIndices {
		for _, id := range x.Fragments {
			a, b := was[uint64(id)], now[uint64(id)]
			switch {
			case b == nil:
				return conflict(uint64(id), fmt.Sprintf("fragment %d, which index %q covers, is gone", id, x.Name))
			case a == nil || !sameFragment(a, b):
				return conflict(uint64(id), fmt.Sprintf("fragment %d, which index %q covers, changed its files", id, x.Name))
			}
		}
	}
	s.Txn.ReadVersion, s.base = d.Version(), d
	return nil
}

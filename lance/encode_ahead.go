package lance

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/omnigraph/omnigraph-worker/internal/parallel"
	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// Encoding ahead. A data file's bytes depend on the table's schema (its field ids and types)
// and its data file version, not on its version or fragments: the fragment ids are given at
// commit, the file names are fresh UUIDs. So a writer that serves a stream can encode a
// batch's files while earlier batches commit, and its commit only checks that the table still
// has the schema and the version the files were encoded for. The schema is compared by
// identity: a commit that keeps the schema (an append, an update, a compaction, an index) keeps
// the same *schema.Schema, and anything else (a schema change, a table read again from
// storage) makes the commit encode the rows again, as it would have without the files.

// Writing ahead. The files may also be written before the commit's turn (WriteAhead), by
// whoever encoded them: they are unreferenced until a manifest names them, as a staged
// transaction's files are until its commit, so a writer that dies or gives the batch up
// leaves only files cleanup's orphan sweep removes. A commit that stages them then writes
// none, which takes the data files' writes (and with fsync their flushes) out of the
// writer's turn.

// Encoded is a batch's rows encoded ahead as new fragments of a table (EncodeAhead).
type Encoded struct {
	schema  *schema.Schema
	version file.Version
	frags   []Fragment
	files   []pendingFile
	// dir is the directory of the table version they were encoded on, which WriteAhead writes
	// them into; writtenAt is when it did (zero: not written). claimed is set by the one
	// staging that takes the written files as its transaction's (or by Discard, so that none
	// does after it); named once that staging's commit is about to write its manifest, from
	// when on the files may be referenced and Discard leaves them.
	dir       storage.Store
	writtenAt time.Time
	claimed   atomic.Bool
	named     atomic.Bool
	discarded atomic.Bool
}

// FailpointWriteAhead fires before WriteAhead writes anything.
const FailpointWriteAhead = "lance.write_ahead"

// Bytes is the size of the encoded data files held in memory: none once written ahead.
func (e *Encoded) Bytes() int64 {
	if e == nil {
		return 0
	}
	var n int64
	for _, f := range e.files {
		n += int64(len(f.data))
	}
	return n
}

// EncodeAhead encodes recs as new fragments of a table with d's schema and data file version,
// as StageInsertOnlyUpdate and StageRewriteRows would, without staging anything:
// StageInsertOnlyUpdateEncoded or StageRewriteRowsEncoded stages them on the version the
// commit comes to, if it has the same schema and file version. d is only read.
func (d *Dataset) EncodeAhead(recs []arrow.Record, fo file.Options) (*Encoded, error) {
	fo, err := d.fileOptions(fo)
	if err != nil {
		return nil, err
	}
	s := d.Schema()
	w := &fileWrites{}
	frags, err := d.writeFragments(s, recs, fo, w)
	if err != nil {
		return nil, err
	}
	return &Encoded{schema: s, version: fo.Version, frags: frags, files: w.files, dir: d.dir}, nil
}

// StageInsertOnlyUpdateEncoded is StageInsertOnlyUpdate of rows encoded ahead (e), on d: ok
// is false, with nothing staged, when d's schema is not the one e was encoded for or it
// declares another data file version, and the caller encodes the rows itself. e's files are
// the staged transaction's: stage e once.
//
// Files written ahead (WriteAhead) are staged only on a version in the directory they were
// written to, and only once: the transaction then has no data file left to write.
func (d *Dataset) StageInsertOnlyUpdateEncoded(e *Encoded, o StageOptions) (st *Staged, ok bool) {
	if !d.fits(e, o) {
		return nil, false
	}
	frags, w, ok := d.claim(e)
	if !ok {
		return nil, false
	}
	return d.stageInsertOnly(frags, o, w), true
}

// StageRewriteRowsEncoded is StageRewriteRows of rows encoded ahead (e): the rows at remove
// are masked by new deletion files, e's fragments are the new ones. ok is false, with nothing
// staged and no error, where StageInsertOnlyUpdateEncoded's would be; an error is the
// deletion files' (e is then left unclaimed, for its owner to discard).
func (d *Dataset) StageRewriteRowsEncoded(ctx context.Context, remove []RowAddress, e *Encoded, o StageOptions) (st *Staged, ok bool, err error) {
	if !d.fits(e, o) {
		return nil, false, nil
	}
	w := &fileWrites{}
	updated, removed, err := d.deleteAddresses(ctx, remove, w)
	if err != nil {
		return nil, true, err
	}
	frags, ew, ok := d.claim(e)
	if !ok {
		return nil, false, nil
	}
	w.files = append(w.files, ew.files...) // after the deletion files, as StageRewriteRows orders them
	w.ahead = ew.ahead
	return d.newStaged(o, d.rewriteRowsOp(updated, removed, frags), w), true, nil
}

// fits reports whether e was encoded for d's schema and data file version and, once written
// ahead, written into d's directory: checked before a staging does any work of its own.
func (d *Dataset) fits(e *Encoded, o StageOptions) bool {
	if e == nil || e.schema != d.Schema() || !e.writtenAt.IsZero() && !e.writtenTo(d.dir) {
		return false
	}
	v, err := d.fileOptions(o.FileOptions)
	return err == nil && v.Version == e.version
}

// claim returns a copy of e's fragments and the files a transaction staging them must still
// write: all of them, or none once WriteAhead wrote them, which only one staging may take (ok
// false otherwise). d must fit e.
func (d *Dataset) claim(e *Encoded) (frags []Fragment, w *fileWrites, ok bool) {
	w = &fileWrites{files: e.files}
	if !e.writtenAt.IsZero() {
		if !e.claimed.CompareAndSwap(false, true) {
			return nil, nil, false
		}
		w.files, w.ahead = nil, e
	}
	frags = make([]Fragment, len(e.frags))
	copy(frags, e.frags)
	return frags, w, true
}

// WriteAhead writes e's data files now into the directory of the table version they were
// encoded on, so that the commit that stages e there writes none. An error leaves e as it
// was, to be written by its commit, and nothing behind.
func (e *Encoded) WriteAhead(ctx context.Context) error {
	if e == nil || !e.writtenAt.IsZero() || len(e.files) == 0 {
		return nil
	}
	if err := inject(FailpointWriteAhead); err != nil {
		return err
	}
	// Their names are made durable by the commit that names them (Staged.WriteTransaction),
	// with one directory sync for the files of every batch written ahead by then.
	unnamed := storage.Unreferenced(ctx)
	err := parallel.Each(e.files, fileWriteConcurrency, func(f pendingFile) error {
		if err := f.put(unnamed, e.dir); err != nil {
			return fmt.Errorf("lance: write %s ahead: %w", f.what, err)
		}
		return nil
	})
	if err != nil {
		removeFiles(context.WithoutCancel(ctx), e.dir, e.files)
		return err
	}
	// The bytes are in storage now (and the small ones in the written-files cache): the
	// batch need not hold them while it waits for its turn.
	for i := range e.files {
		e.files[i].data = nil
	}
	e.writtenAt = time.Now()
	return nil
}

// WrittenAt is when WriteAhead wrote e's files; zero if it has not.
func (e *Encoded) WrittenAt() time.Time {
	if e == nil {
		return time.Time{}
	}
	return e.writtenAt
}

// Discard removes the files WriteAhead wrote unless the commit of a staging that took them
// began writing its manifest: for a batch given up, refused or encoded again, whether or not
// a staging took them first (a load refused after its tables staged). No staging takes them
// afterwards. Call it once no commit of a staging of e can begin any more. Best effort: what
// it cannot remove is left to cleanup's orphan sweep.
func (e *Encoded) Discard(ctx context.Context) {
	if e == nil || e.writtenAt.IsZero() || e.named.Load() || e.discarded.Swap(true) {
		return
	}
	e.claimed.Store(true)
	removeFiles(ctx, e.dir, e.files)
}

// writtenTo reports whether dir is the directory e's files were written to.
func (e *Encoded) writtenTo(dir storage.Store) bool {
	k := e.files[0].key
	return dir.Location(k) == e.dir.Location(k)
}

func removeFiles(ctx context.Context, dir storage.Store, files []pendingFile) {
	_ = parallel.Each(files, fileWriteConcurrency, func(f pendingFile) error {
		_ = dir.Delete(ctx, f.key)
		writtenFiles.forget(dir.Location(f.key))
		return nil
	})
}

// keys are the files' keys in their table's directory.
func (e *Encoded) keys() []string {
	out := make([]string, len(e.files))
	for i, f := range e.files {
		out[i] = f.key
	}
	return out
}

// DataFiles are the names (under data/) of the encoded files, in fragment order.
func (e *Encoded) DataFiles() []string {
	var out []string
	for _, f := range e.frags {
		for _, df := range f.Files {
			out = append(out, df.Path)
		}
	}
	return out
}

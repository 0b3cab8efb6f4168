package lance

import (
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
)

// Encoding ahead. A data file's bytes depend on the table's schema (its field ids and types)
// and its data file version, not on its version or fragments: the fragment ids are given at
// commit, the file names are fresh UUIDs. So a writer that serves a stream can encode a
// batch's files while earlier batches commit, and its commit only checks that the table still
// has the schema and the version the files were encoded for. The schema is compared by
// identity: a commit that keeps the schema (an append, an update, a compaction, an index) keeps
// the same *schema.Schema, and anything else (a schema change, a table read again from
// storage) makes the commit encode the rows again, as it would have without the files.

// Encoded is a batch's rows encoded ahead as new fragments of a table (EncodeAhead).
type Encoded struct {
	schema  *schema.Schema
	version file.Version
	frags   []Fragment
	files   []pendingFile
}

// Bytes is the size of the encoded data files.
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
// as StageInsertOnlyUpdate would, without staging anything: StageInsertOnlyUpdateEncoded stages
// them on the version the commit comes to, if it has the same schema and file version. d is
// only read.
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
	return &Encoded{schema: s, version: fo.Version, frags: frags, files: w.files}, nil
}

// StageInsertOnlyUpdateEncoded is StageInsertOnlyUpdate of rows encoded ahead (e), on d: ok
// is false, with nothing staged, when d's schema is not the one e was encoded for or it
// declares another data file version, and the caller encodes the rows itself. e's files are
// the staged transaction's: stage e once.
func (d *Dataset) StageInsertOnlyUpdateEncoded(e *Encoded, o StageOptions) (st *Staged, ok bool) {
	if e == nil || e.schema != d.Schema() {
		return nil, false
	}
	if v, err := d.fileOptions(o.FileOptions); err != nil || v.Version != e.version {
		return nil, false
	}
	frags := make([]Fragment, len(e.frags))
	copy(frags, e.frags)
	return d.stageInsertOnly(frags, o, &fileWrites{files: e.files}), true
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

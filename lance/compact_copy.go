package lance

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// Compaction by page copy. Rewriting a bin's rows decodes every value and encodes it again,
// which costs more CPU per row than writing them did. When a bin's fragments are whole data
// files of the declared 2.1+ version, untouched by deletions, the new fragments can instead be
// built from their files' encoded pages (file.Concat), as Lance's binary-copy compaction does:
// the rows, their order, their row ids and versions are the same as a decoding rewrite gives;
// only where the new fragments are cut differs (between input files, not at exactly the target).

// rewriteBin writes one bin's new fragments: by page copy when the bin allows it (and
// allowCopy), else, or when an input turns out not to be copyable, by decoding its rows. copied
// says which way was taken.
func (d *Dataset) rewriteBin(ctx context.Context, bin []compactCandidate, sink *fragmentSink, allowCopy bool) (RewriteGroup, compactGroup, bool, error) {
	if allowCopy && d.pageCopyable(bin, sink) {
		g, cg, err := d.rewriteGroupCopy(ctx, bin, sink)
		if err == nil || !errors.Is(err, file.ErrNotCopyable) {
			return g, cg, err == nil, err
		}
		// Files already written for this bin stay unreferenced: cleanup's orphan sweep takes them.
		sink.frags = nil
	}
	g, cg, err := d.rewriteGroup(ctx, bin, sink)
	return g, cg, false, err
}

// pageCopyable reports whether every fragment of bin is one data file of the version the sink
// writes (2.1 or later) holding every column of the schema, as the writer lays them out,
// without deletions, and no larger than the sink's row target.
func (d *Dataset) pageCopyable(bin []compactCandidate, sink *fragmentSink) bool {
	v := sink.fo.Version
	if v.Major < 2 || (v.Major == 2 && v.Minor < 1) {
		return false
	}
	fields := file.ColumnFields(d.Schema(), v)
	for _, c := range bin {
		f := c.frag
		if f.Deletion != nil || len(f.Files) != 1 || f.PhysicalRows == 0 || f.PhysicalRows > uint64(sink.maxRows) {
			return false
		}
		df := &f.Files[0]
		if (file.Version{Major: df.FileMajor, Minor: df.FileMinor}) != v || !slices.Equal(df.Fields, fields) || len(df.ColumnIndices) != len(fields) {
			return false
		}
		for i, ci := range df.ColumnIndices {
			if ci != int32(i) {
				return false
			}
		}
	}
	return true
}

// copyOutput is the new fragment being built: its file and its rows' ids and versions. When
// ranged, its inputs' pages are referenced (file.Concat.AppendRange) and the file is composed
// from ranges of theirs by the storage (storage.Compose) instead of being built in memory.
type copyOutput struct {
	c      *file.Concat
	seqs   seqConcat
	ranged bool
	inputs []copyInput // ranged: the input files, in AppendRange order
}

// newCopyOutput starts a new fragment. Built in memory, it makes room for the inputs it will
// likely take, the first of rest onwards, by their recorded sizes: the output then grows
// without copies.
func newCopyOutput(d *Dataset, rest []compactCandidate, sink *fragmentSink, ranged bool) *copyOutput {
	out := &copyOutput{c: file.NewConcat(d.Schema()), ranged: ranged}
	if ranged {
		return out
	}
	var rows, size uint64
	for _, c := range rest {
		n, _ := c.frag.FileBytes()
		if rows > 0 && (rows+c.frag.PhysicalRows > uint64(sink.maxRows) || sink.maxBytes > 0 && size+n > uint64(sink.maxBytes)) {
			break
		}
		rows, size = rows+c.frag.PhysicalRows, size+n
	}
	out.c.Grow(int(min(size, 1<<30)))
	return out
}

// copyInput is one fragment's data file, where it is stored.
type copyInput struct {
	st   storage.Store
	key  string
	size int64
}

// rewriteGroupCopy writes bin's fragments by concatenating their data files. A new fragment
// is finished before an input that would take it past the sink's row target or byte limit, and
// written at once. An input that cannot be copied (another version or schema than its
// manifest entry says, a corrupt file) returns an error matching file.ErrNotCopyable. Where the
// storage composes files from ranges of others itself (storage.ComposesLocally: a local disk),
// the inputs are never read whole and the pages never pass through memory.
func (d *Dataset) rewriteGroupCopy(ctx context.Context, bin []compactCandidate, sink *fragmentSink) (RewriteGroup, compactGroup, error) {
	var g RewriteGroup
	var cg compactGroup
	if err := d.checkReadable(); err != nil {
		return g, cg, err
	}
	inputs := make([]copyInput, len(bin))
	stores := make([]storage.Store, len(bin)) // for ComposesLocally
	for i, c := range bin {
		st, key, err := d.dataFileKey(&c.frag.Files[0])
		if err != nil {
			return g, cg, err
		}
		inputs[i], stores[i] = copyInput{st: st, key: key, size: int64(c.frag.Files[0].FileSizeBytes)}, st
	}
	ranged := sink.compose != nil && storage.ComposesLocally(d.dir, stores...)
	var out *copyOutput
	var at, before uint64 // rows of the group in finished fragments; before the current input
	finish := func() error {
		if out == nil {
			return nil
		}
		rows := out.c.NumRows()
		if out.ranged {
			parts, err := out.c.FinishParts(ctx)
			if err != nil {
				return err
			}
			if err := sink.addParts(composition(parts, out.inputs), file.PartsSize(parts), rows); err != nil {
				return err
			}
		} else {
			b, err := out.c.Finish()
			if err != nil {
				return err
			}
			if err := sink.addFile(b, rows); err != nil {
				return err
			}
		}
		at += uint64(rows)
		ids, created, updated := out.seqs.encode()
		cg.sealEncoded(&sink.frags[len(sink.frags)-1], ids, created, updated, at)
		out = nil
		return nil
	}
	for i, c := range bin {
		f := c.frag
		in := inputs[i]
		var data []byte
		var err error
		if ranged {
			if in.size <= 0 { // not recorded
				if in.size, err = in.st.Size(ctx, in.key); err != nil {
					return g, cg, fmt.Errorf("lance: size of data file: %w", err)
				}
			}
		} else {
			if data, err = in.st.Get(ctx, in.key); err != nil {
				return g, cg, fmt.Errorf("lance: read data file: %w", err)
			}
			in.size = int64(len(data))
		}
		if out != nil && (uint64(out.c.NumRows())+f.PhysicalRows > uint64(sink.maxRows) ||
			sink.maxBytes > 0 && out.c.Size()+in.size > sink.maxBytes) {
			if err := finish(); err != nil {
				return g, cg, err
			}
		}
		if out == nil {
			out = newCopyOutput(d, bin[i:], sink, ranged)
		}
		if err := d.appendCopy(ctx, out, f, in, data, sink.fo.Version); err != nil {
			return g, cg, err
		}
		if err := out.seqs.add(f); err != nil {
			return g, cg, err
		}
		cg.old = append(cg.old, compactOld{id: f.ID, physical: f.PhysicalRows, base: before})
		before += f.PhysicalRows
		g.OldFragments = append(g.OldFragments, f.clone())
	}
	if err := finish(); err != nil {
		return g, cg, err
	}
	g.NewFragments = sink.frags
	return g, cg, nil
}

// appendCopy appends fragment f's data file (in; its bytes data unless out is ranged) to out,
// refusing a file whose version or row count is not what the manifest says of it.
func (d *Dataset) appendCopy(ctx context.Context, out *copyOutput, f *Fragment, in copyInput, data []byte, v file.Version) error {
	had := out.c.NumRows()
	location := in.st.Location(in.key)
	var err error
	if out.ranged {
		// AppendRange reads the footer and each mini-block page's chunk table: through one
		// open file, not one open each.
		src := &storeSource{st: in.st, key: in.key, size: in.size, ranges: storage.OpenRanges(in.st, in.key)}
		err = out.c.AppendRange(ctx, src, location)
		if cerr := src.ranges.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			out.inputs = append(out.inputs, in)
		}
	} else {
		err = out.c.Append(ctx, data, location)
	}
	if err != nil {
		return err
	}
	if got := uint64(out.c.NumRows() - had); got != f.PhysicalRows || out.c.Version() != v {
		return &file.CopyError{File: location, Reason: fmt.Sprintf("a file of %d rows of version %s, its fragment %d says %d of %s",
			got, out.c.Version(), f.ID, f.PhysicalRows, v)}
	}
	return nil
}

// composition is the storage parts of a file a ranged Concat described.
func composition(parts []file.Part, inputs []copyInput) []storage.Part {
	out := make([]storage.Part, len(parts))
	for i, p := range parts {
		if p.Length == 0 {
			out[i] = storage.Part{Data: p.Data}
			continue
		}
		in := inputs[p.Input]
		out[i] = storage.Part{Source: in.st, Key: in.key, Offset: int64(p.Offset), Length: int64(p.Length)}
	}
	return out
}

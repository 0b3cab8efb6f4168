package lance

import (
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// writeFragments encodes recs into data files of at most maxRowsPerFile rows each, to be
// written with the transaction (w).
func (d *Dataset) writeFragments(s *schema.Schema, recs []arrow.Record, fo file.Options, out *fileWrites) ([]Fragment, error) {
	rows := int64(0)
	for _, rec := range recs {
		rows += rec.NumRows()
	}
	if rows == 0 {
		return nil, nil // no file to encode, so no version to get wrong
	}
	fo, err := d.fileOptions(fo)
	if err != nil {
		return nil, err
	}
	k := &fragmentSink{s: s, fo: fo, out: out, maxRows: maxRowsPerFile}
	for _, rec := range recs {
		if err := k.write(rec); err != nil {
			return nil, err
		}
	}
	if err := k.flush(); err != nil {
		return nil, err
	}
	return k.frags, nil
}

// fragmentSink encodes a stream of rows into new fragments (one data file each) of at most
// maxRows rows, to be written with a transaction (out). With maxBytes, a file is also cut once
// it holds that many bytes; with put, each file is written as soon as it is finished instead of
// being kept for the transaction, so the sink holds one file at a time.
type fragmentSink struct {
	s        *schema.Schema
	fo       file.Options
	out      *fileWrites
	maxRows  int64
	maxBytes int64
	put      func(key string, data []byte) error
	// compose, when set, writes a data file from parts (storage.Compose), as put writes one
	// from bytes: for compaction's page copy.
	compose func(key string, parts []storage.Part) error
	w       *file.Writer
	frags   []Fragment
}

// write appends rec's rows, starting a new fragment whenever the current one is full.
func (k *fragmentSink) write(rec arrow.Record) error {
	for off := int64(0); off < rec.NumRows(); {
		if k.w == nil {
			var err error
			if k.w, err = file.NewWriter(k.s, k.fo); err != nil {
				return err
			}
		}
		n := min(rec.NumRows()-off, k.maxRows-k.w.NumRows())
		part := rec
		if off != 0 || n != rec.NumRows() {
			part = rec.NewSlice(off, off+n)
		}
		err := k.w.Write(part)
		if part != rec {
			part.Release()
		}
		if err != nil {
			return err
		}
		off += n
		if k.w.NumRows() >= k.maxRows || k.maxBytes > 0 && k.w.Size() >= k.maxBytes {
			if err := k.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush finishes the current fragment, if it has rows.
func (k *fragmentSink) flush() error {
	w := k.w
	if w == nil || w.NumRows() == 0 {
		return nil
	}
	k.w = nil
	rows := w.NumRows()
	b, err := w.Finish()
	if err != nil {
		return err
	}
	return k.addFile(b, rows)
}

// addFile writes (or keeps for the transaction) data file b of the given rows, finished, and
// records its fragment.
func (k *fragmentSink) addFile(b []byte, rows int64) error {
	name := newDataFileName()
	if k.put != nil {
		if err := k.put("data/"+name, b); err != nil {
			return err
		}
	} else {
		k.out.add("data/"+name, b, "lance.write_data_file", "data file")
	}
	k.record(name, uint64(len(b)), rows)
	return nil
}

// addParts writes the data file parts make (size bytes, of the given rows) with compose, and
// records its fragment.
func (k *fragmentSink) addParts(parts []storage.Part, size uint64, rows int64) error {
	name := newDataFileName()
	if err := k.compose("data/"+name, parts); err != nil {
		return err
	}
	k.record(name, size, rows)
	return nil
}

// record adds the fragment of the data file name just written.
func (k *fragmentSink) record(name string, size uint64, rows int64) {
	ids := file.ColumnFields(k.s, k.fo.Version) // 2.1+ files have columns for leaves only
	cols := make([]int32, len(ids))
	for i := range cols {
		cols[i] = int32(i)
	}
	k.frags = append(k.frags, Fragment{PhysicalRows: uint64(rows), Files: []DataFile{{
		Path: name, Fields: ids, ColumnIndices: cols, FileMajor: k.fo.Version.Major, FileMinor: k.fo.Version.Minor, FileSizeBytes: size,
	}}})
}

package lance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// Folding an INVERTED index: an index of format 2 is a list of partitions (metadata.lance's
// "partitions"), each a self-contained token map, document list and posting lists with its
// own BM25 statistics, and the engines search every partition of the list (their own
// multi-threaded builds write several). foldInverted keeps the old index's partitions as they
// are (their files copied byte for byte into the new index's directory) and adds one partition
// holding the documents of the fragments the index does not cover: only the new rows are read
// and tokenized. Documents of rows deleted since stay in their partition, as in an index Lance
// updates, and the engines skip them. At invertedFoldPartitions partitions the fold merges
// them and the new rows into one (mergeInvertedPartitions), from the index's own files.

// invertedFoldPartitions is how many partitions a fold may leave; at it the fold merges them
// into one, so that a query never searches more than this many.
const invertedFoldPartitions = 8

// foldInverted builds the successor of the INVERTED index old on column over this version:
// old's partitions and one more over the rows of the fragments old does not cover, under old's
// name. ok is false, with no error, when the fold cannot be done this way and the caller builds
// the index whole: nothing left to cover, old written with another analyzer or format than
// this package writes, or, at the partition limit, holding too many documents of deleted rows.
func (d *Dataset) foldInverted(ctx context.Context, reads *foldReads, old *Index, column string, fo file.Options, w *fileWrites) (x Index, ok bool, err error) {
	f, uncovered, coveredRows := d.lagOf(old, column)
	if len(uncovered) == 0 {
		return Index{}, false, nil
	}
	if af, err := f.ToArrow(); err != nil || af.Type.ID() != arrow.STRING && af.Type.ID() != arrow.LARGE_STRING {
		return Index{}, false, err // a full-text index of a list column (the engines build those) is not folded
	}
	st, _, err := d.resolveBase(old.BaseID)
	if err != nil {
		return Index{}, false, err
	}
	parts, deleted, err := readInvertedMetadata(ctx, st, old)
	if err != nil || parts == nil {
		return Index{}, false, err
	}
	// Below the limit the old partitions are kept as they are; at it they are merged, with the
	// new rows, into one.
	b, kept := newInvertedBuild(), parts
	if len(parts) >= invertedFoldPartitions {
		if b, err = mergeInvertedPartitions(ctx, st, old, parts, coveredRows); err != nil || b == nil {
			return Index{}, false, err
		}
		kept = nil
	}
	if _, err := d.invertInto(ctx, reads, b, column, uncovered); err != nil {
		return Index{}, false, err
	}
	if x, err = d.successorMeta(old, &IndexDetails{TypeURL: InvertedDetailsType, Value: invertedDetails()}, invertedIndexVersion); err != nil {
		return Index{}, false, err
	}
	for _, p := range kept {
		for _, kind := range partitionKinds {
			// Copied by the store, not read here: on a local disk the kernel copies the file.
			key := old.Dir() + partFile(p, kind)
			size, err := st.Size(ctx, key)
			if err != nil {
				return Index{}, false, fmt.Errorf("lance: INVERTED %s: %w", old.Name, err)
			}
			w.addParts(x.Dir()+partFile(p, kind), []storage.Part{{Source: st, Key: key, Length: size}}, "lance.write_index_file", "index file")
		}
	}
	var files []namedRecord
	if len(b.rowIDs) > 0 { // new rows without a token need no partition
		next := slices.Max(parts) + 1
		if files, err = b.records(next); err != nil {
			return Index{}, false, fmt.Errorf("lance: INVERTED index on %s: %w", column, err)
		}
		kept = append(kept, next)
	}
	if len(kept) == 0 {
		return Index{}, false, nil
	}
	files = append(files, namedRecord{invertedMetadataFile, invertedMetadata(kept, deleted)})
	if err := writeNamedRecords(x, column, files, fo, w); err != nil {
		return Index{}, false, err
	}
	return x, true, nil
}

// mergeInvertedPartitions reads the partitions parts of INVERTED index x and merges them into
// one build, as Lance's optimize merges an index's partitions: no row is read or tokenized
// again. It is nil, with no error, when they hold more than foldDeadShare times the documents
// of the covered live rows: a build from the table drops the documents of deleted rows.
func mergeInvertedPartitions(ctx context.Context, st storage.Store, x *Index, parts []uint64, coveredRows uint64) (*invertedBuild, error) {
	b := newInvertedBuild()
	for _, p := range parts {
		files, err := partitionFiles(ctx, st, x, p)
		if err != nil {
			return nil, err
		}
		dec, err := decodeInverted(files[0], files[1], files[2])
		if err != nil {
			return nil, fmt.Errorf("lance: INVERTED %s: partition %d: %w", x.Name, p, err)
		}
		b.merge(dec)
		if uint64(len(b.rowIDs)) > foldDeadShare*coveredRows+invertedBlock {
			return nil, nil
		}
	}
	return b, nil
}

// partitionKinds are the files of one INVERTED partition, in the order partitionFiles reads
// them.
var partitionKinds = [3]string{"tokens", "docs", "invert"}

// partitionFiles reads the files of partition p of INVERTED index x (partitionKinds).
func partitionFiles(ctx context.Context, st storage.Store, x *Index, p uint64) (files [3][]byte, err error) {
	for i, kind := range partitionKinds {
		if files[i], err = st.Get(ctx, x.Dir()+partFile(p, kind)); err != nil {
			return files, fmt.Errorf("lance: INVERTED %s: %w", x.Name, err)
		}
	}
	return files, nil
}

// readInvertedMetadata reads the partitions and deleted_fragments of INVERTED index x's
// metadata.lance. parts is nil, with no error, when x is not in the layout this package
// writes: another analyzer, token set format or posting format, or no partition.
func readInvertedMetadata(ctx context.Context, st storage.Store, x *Index) (parts []uint64, deleted []byte, err error) {
	key := x.Dir() + invertedMetadataFile
	size, err := st.Size(ctx, key)
	if err != nil {
		return nil, nil, fmt.Errorf("lance: INVERTED %s: %w", x.Name, err)
	}
	r, err := file.Open(ctx, &storeSource{st: st, key: key, size: size}, st.Location(key))
	if err != nil {
		return nil, nil, err
	}
	meta := r.Schema().Metadata
	for i := 0; i+1 < len(invertedFormat); i += 2 {
		if string(meta[invertedFormat[i]]) != invertedFormat[i+1] {
			return nil, nil, nil
		}
	}
	if string(meta["token_set_format"]) != "fst" || !sameJSON(meta["params"], []byte(invertedParams)) {
		return nil, nil, nil
	}
	if err := json.Unmarshal(meta["partitions"], &parts); err != nil || len(parts) == 0 {
		return nil, nil, nil
	}
	if len(r.Schema().Fields) != 1 || r.NumRows() != 1 {
		return nil, nil, nil
	}
	rec, err := readIndexRows(ctx, r, st.Location(key), 0, 1)
	if err != nil {
		return nil, nil, err
	}
	defer rec.Release()
	bin, ok := rec.Column(0).(*array.Binary)
	if !ok || bin.IsNull(0) {
		return nil, nil, nil
	}
	return parts, slices.Clone(bin.Value(0)), nil
}

// sameJSON says a and b are JSON documents of equal value.
func sameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// rebuildInstead says err, met while folding an index, means the index's own files are missing
// or unreadable: the caller builds the index anew, which repairs it.
func rebuildInstead(err error) bool {
	var fe *FormatError
	var ffe *file.FormatError
	return errors.Is(err, storage.ErrNotFound) || errors.As(err, &fe) || errors.As(err, &ffe)
}

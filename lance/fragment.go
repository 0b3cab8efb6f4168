package lance

import (
	"github.com/omnigraph/omnigraph-worker/lance/internal/pb"
)

// DataFile is one Lance data file of a fragment (lance.table.DataFile).
type DataFile struct {
	Path          string // file name under data/ of the dataset (or of its base path)
	Fields        []int32
	ColumnIndices []int32
	FileMajor     uint32
	FileMinor     uint32
	FileSizeBytes uint64
	BaseID        *uint32 // nil: this dataset's own directory
}

// Deletion file types.
const (
	DeletionArrow  = 0
	DeletionBitmap = 1
)

// DeletionFile names a fragment's cumulative deletion vector (lance.table.DeletionFile).
type DeletionFile struct {
	FileType       int32
	ReadVersion    uint64
	ID             uint64
	NumDeletedRows uint64
	BaseID         *uint32
}

// Fragment is a horizontal slice of the table (lance.table.DataFragment).
type Fragment struct {
	ID           uint64
	Files        []DataFile
	Deletion     *DeletionFile
	PhysicalRows uint64
	// Inline serialized sequences (stable row ids and row versions), kept as bytes: the dataset
	// writes them for new fragments and carries them over untouched otherwise.
	RowIDs           []byte
	LastUpdatedAt    []byte
	CreatedAt        []byte
	externalSeqField []pb.Field // external sequences are carried as raw fields (never produced here)
}

// NumRows is the number of live rows.
func (f *Fragment) NumRows() uint64 {
	if f.Deletion != nil && f.Deletion.NumDeletedRows <= f.PhysicalRows {
		return f.PhysicalRows - f.Deletion.NumDeletedRows
	}
	return f.PhysicalRows
}

// FileBytes is the size of the fragment's data files as the manifest records it; ok is false
// when a file's size is not recorded (writers may leave it out).
func (f *Fragment) FileBytes() (n uint64, ok bool) {
	for _, df := range f.Files {
		if df.FileSizeBytes == 0 {
			return 0, false
		}
		n += df.FileSizeBytes
	}
	return n, len(f.Files) > 0
}

func (f *Fragment) clone() Fragment {
	c := *f
	c.Files = append([]DataFile(nil), f.Files...)
	if f.Deletion != nil {
		d := *f.Deletion
		c.Deletion = &d
	}
	return c
}

func encodeDataFile(e *pb.Encoder, d *DataFile) {
	e.String(1, d.Path)
	e.PackedInt32s(2, d.Fields)
	e.PackedInt32s(3, d.ColumnIndices)
	e.Uint(4, uint64(d.FileMajor))
	e.Uint(5, uint64(d.FileMinor))
	e.Uint(6, d.FileSizeBytes)
	if d.BaseID != nil {
		e.UintAlways(7, uint64(*d.BaseID))
	}
}

func decodeDataFile(b []byte) (DataFile, error) {
	var d DataFile
	err := pb.Walk(b, func(f pb.Field) error {
		var err error
		switch f.Num {
		case 1:
			d.Path = f.Str()
		case 2:
			d.Fields, err = f.Int32s(d.Fields)
		case 3:
			d.ColumnIndices, err = f.Int32s(d.ColumnIndices)
		case 4:
			d.FileMajor = uint32(f.Varint)
		case 5:
			d.FileMinor = uint32(f.Varint)
		case 6:
			d.FileSizeBytes = f.Varint
		case 7:
			v := uint32(f.Varint)
			d.BaseID = &v
		}
		return err
	})
	return d, err
}

func encodeDeletion(e *pb.Encoder, d *DeletionFile) {
	e.Uint(1, uint64(d.FileType))
	e.Uint(2, d.ReadVersion)
	e.Uint(3, d.ID)
	e.Uint(4, d.NumDeletedRows)
	if d.BaseID != nil {
		e.UintAlways(7, uint64(*d.BaseID))
	}
}

func decodeDeletion(b []byte) (*DeletionFile, error) {
	d := &DeletionFile{}
	err := pb.Walk(b, func(f pb.Field) error {
		switch f.Num {
		case 1:
			d.FileType = int32(f.Varint)
		case 2:
			d.ReadVersion = f.Varint
		case 3:
			d.ID = f.Varint
		case 4:
			d.NumDeletedRows = f.Varint
		case 7:
			v := uint32(f.Varint)
			d.BaseID = &v
		}
		return nil
	})
	return d, err
}

func encodeFragment(e *pb.Encoder, f *Fragment) {
	e.Uint(1, f.ID)
	for i := range f.Files {
		e.Message(2, func(s *pb.Encoder) { encodeDataFile(s, &f.Files[i]) })
	}
	if f.Deletion != nil {
		e.Message(3, func(s *pb.Encoder) { encodeDeletion(s, f.Deletion) })
	}
	e.Uint(4, f.PhysicalRows)
	if f.RowIDs != nil {
		e.BytesAlways(5, f.RowIDs)
	}
	if f.LastUpdatedAt != nil {
		e.BytesAlways(7, f.LastUpdatedAt)
	}
	if f.CreatedAt != nil {
		e.BytesAlways(9, f.CreatedAt)
	}
	for _, x := range f.externalSeqField {
		e.BytesAlways(x.Num, x.Bytes)
	}
}

func decodeFragment(b []byte) (Fragment, error) {
	var fr Fragment
	err := pb.Walk(b, func(f pb.Field) error {
		switch f.Num {
		case 1:
			fr.ID = f.Varint
		case 2:
			d, err := decodeDataFile(f.Bytes)
			if err != nil {
				return err
			}
			fr.Files = append(fr.Files, d)
		case 3:
			d, err := decodeDeletion(f.Bytes)
			if err != nil {
				return err
			}
			fr.Deletion = d
		case 4:
			fr.PhysicalRows = f.Varint
		case 5:
			fr.RowIDs = append([]byte{}, f.Bytes...)
		case 7:
			fr.LastUpdatedAt = append([]byte{}, f.Bytes...)
		case 9:
			fr.CreatedAt = append([]byte{}, f.Bytes...)
		case 6, 8, 10:
			fr.externalSeqField = append(fr.externalSeqField, pb.Field{Num: f.Num, Type: f.Type, Bytes: append([]byte{}, f.Bytes...)})
		}
		return nil
	})
	return fr, err
}

// hasRowIDs reports whether the fragment carries a row id sequence, inline or external.
func (f *Fragment) hasRowIDs() bool {
	if f.RowIDs != nil {
		return true
	}
	for _, x := range f.externalSeqField {
		if x.Num == 6 {
			return true
		}
	}
	return false
}

// encodeRangeSequence builds RowIdSequence{segments=[U64Segment{range{start,end}}]}.
func encodeRangeSequence(start, end uint64) []byte {
	var e pb.Encoder
	e.Message(1, func(seg *pb.Encoder) { encodeRangeSegment(seg, start, end) })
	return e.B
}

// encodeVersionSequence builds RowDatasetVersionSequence{runs=[{span=Range{0,n}, version}]}.
func encodeVersionSequence(n, version uint64) []byte {
	var e pb.Encoder
	e.Message(1, func(run *pb.Encoder) {
		run.Message(1, func(seg *pb.Encoder) { encodeRangeSegment(seg, 0, n) })
		run.Uint(2, version)
	})
	return e.B
}

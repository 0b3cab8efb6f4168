package rows

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TakeRows copies the rows at the ascending indices keep into a new record.
func TakeRows(rec arrow.Record, keep []int) (arrow.Record, error) {
	return takeRows(rec, keep, memory.DefaultAllocator)
}

// RecordBytes is the Arrow memory of a record (the lengths of all its buffers).
func RecordBytes(rec arrow.Record) int64 { return recordBytes(rec) }

// AppendRow appends every column of row i as a JSON array: two rows of one table hold equal
// values exactly when their encodings are equal.
func AppendRow(dst []byte, rec arrow.Record, i int) ([]byte, error) {
	dst = append(dst, '[')
	for c, col := range rec.Columns() {
		if c > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = appendValue(dst, col, i); err != nil {
			return nil, err
		}
	}
	return append(dst, ']'), nil
}

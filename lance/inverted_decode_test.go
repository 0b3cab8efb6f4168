package lance

import (
	"context"

	"github.com/omnigraph/omnigraph-worker/lance/file"
)

// readIndexRecord reads every row of the index file b (tests only).
func readIndexRecord(b []byte) (*file.Reader, []arrowColumn, error) {
	ctx := context.Background()
	r, err := file.Open(ctx, file.BytesSource(b), "index file")
	if err != nil {
		return nil, nil, err
	}
	rec, err := readIndexRows(ctx, r, "index file", 0, r.NumRows())
	if err != nil {
		return nil, nil, err
	}
	var cols []arrowColumn
	for _, c := range rec.Columns() {
		cols = append(cols, c)
	}
	return r, cols, nil
}

type arrowColumn = interface {
	Len() int
	IsNull(int) bool
}

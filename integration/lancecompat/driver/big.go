package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// bigRows is how many rows the engine writes for bigCompat: over a million, so every column
// spans pages as the engine cuts them.
const bigRows = 1_100_000

// bigCompat: the engine writes a table of 1.1M rows at the round's version in one create
// (compat.mjs bigwrite), and Go reads all of it, row by row, in batches whose edges fall
// inside pages and chunks, against the rule each row was made by.
func bigCompat(ctx context.Context, s *suite, dir string) {
	dir = filepath.Join(dir, "big")
	if err := s.runNode(ctx, "node-writes-big/", "bigwrite", dir); err != nil {
		return
	}
	s.add("go-reads-big", readBig(ctx, filepath.Join(dir, "big.lance")))
}

func readBig(ctx context.Context, path string) error {
	st, err := storage.Open(ctx, path)
	if err != nil {
		return err
	}
	defer st.Close()
	d, err := lance.Open(ctx, st)
	if err != nil {
		return err
	}
	i := 0
	err = d.Each(ctx, lance.ScanOptions{BatchRows: 40_009}, func(rec arrow.Record) error {
		ids := rec.Column(0).(*array.String)
		ns := rec.Column(1).(*array.Int64)
		ss := rec.Column(2).(*array.String)
		tags := rec.Column(3).(*array.List)
		items := tags.ListValues().(*array.String)
		for r := 0; r < int(rec.NumRows()); r, i = r+1, i+1 {
			if ids.Value(r) != fmt.Sprintf("r%d", i) || ns.Value(r) != int64(3*i) {
				return fmt.Errorf("row %d: id %q n %d", i, ids.Value(r), ns.Value(r))
			}
			if wantNull := i%7 == 0; ss.IsNull(r) != wantNull || !wantNull && ss.Value(r) != fmt.Sprintf("v%d", i%1000) {
				return fmt.Errorf("row %d: s null=%v %q", i, ss.IsNull(r), ss.Value(r))
			}
			if wantNull := i%11 == 0; tags.IsNull(r) != wantNull {
				return fmt.Errorf("row %d: tags null=%v", i, tags.IsNull(r))
			}
			if i%11 == 0 {
				continue
			}
			lo, hi := tags.ValueOffsets(r)
			if int(hi-lo) != i%3 {
				return fmt.Errorf("row %d: %d tags, want %d", i, hi-lo, i%3)
			}
			for j := lo; j < hi; j++ {
				if items.Value(int(j)) != fmt.Sprintf("t%d", j-lo) {
					return fmt.Errorf("row %d: tag %d is %q", i, j-lo, items.Value(int(j)))
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if i != bigRows {
		return fmt.Errorf("read %d rows, want %d", i, bigRows)
	}
	return nil
}

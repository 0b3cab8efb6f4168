package file

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/omnigraph/omnigraph-worker/lance/schema"
)

// A file with global buffers beside the file descriptor reads back whole at every version:
// the buffers, the rows and the schema metadata that names them.
func TestGlobalBuffers(t *testing.T) {
	ctx := context.Background()
	md := arrow.NewMetadata([]string{"lance:ivf"}, []string{"1"})
	as := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Uint64}}, &md)
	s, err := schema.FromArrow(as)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []Version{V2_0, V2_1, V2_2} {
		for _, rows := range []int{0, 3} {
			t.Run(fmt.Sprintf("%s/%d", v, rows), func(t *testing.T) {
				w, err := NewWriter(s, Options{Version: v})
				if err != nil {
					t.Fatal(err)
				}
				bufs := [][]byte{[]byte("first buffer"), {}, bytes.Repeat([]byte{7}, 100)}
				for i, b := range bufs {
					if got := w.AddGlobalBuffer(b); got != uint32(i+1) {
						t.Fatalf("buffer %d has index %d", i, got)
					}
				}
				b := array.NewUint64Builder(memory.DefaultAllocator)
				for i := range rows {
					b.Append(uint64(i * 10))
				}
				rec := array.NewRecord(as, []arrow.Array{b.NewArray()}, int64(rows))
				if err := w.Write(rec); err != nil {
					t.Fatal(err)
				}
				out, err := w.Finish()
				if err != nil {
					t.Fatal(err)
				}
				r, err := Open(ctx, BytesSource(out), "f")
				if err != nil {
					t.Fatal(err)
				}
				if r.NumGlobalBuffers() != 4 || r.NumRows() != int64(rows) {
					t.Fatalf("%d global buffers and %d rows", r.NumGlobalBuffers(), r.NumRows())
				}
				for i, want := range bufs {
					got, err := r.GlobalBuffer(ctx, uint32(i+1))
					if err != nil || !bytes.Equal(got, want) {
						t.Fatalf("global buffer %d: %q, %v; want %q", i+1, got, err, want)
					}
				}
				if _, err := r.GlobalBuffer(ctx, 4); err == nil {
					t.Fatal("global buffer 4 of 4 read")
				}
				if string(r.Schema().Metadata["lance:ivf"]) != "1" {
					t.Fatalf("schema metadata %v", r.Schema().Metadata)
				}
				back, err := r.Read(ctx, r.Schema().Fields, nil, 0, int64(rows), nil)
				if err != nil {
					t.Fatal(err)
				}
				defer back.Release()
				if !array.RecordEqual(back, rec) {
					t.Fatalf("read back %v, want %v", back, rec)
				}
			})
		}
	}
}

// Every global buffer of such a file starts at a multiple of 64 bytes, the file descriptor
// included: Lance's 2.1 reader refuses one that does not.
func TestGlobalBuffersAligned(t *testing.T) {
	ctx := context.Background()
	as := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Uint64}}, nil)
	s, _ := schema.FromArrow(as)
	for _, v := range []Version{V2_0, V2_1, V2_2} {
		w, err := NewWriter(s, Options{Version: v})
		if err != nil {
			t.Fatal(err)
		}
		w.AddGlobalBuffer([]byte("odd-sized"))
		b := array.NewUint64Builder(memory.DefaultAllocator)
		b.AppendValues([]uint64{1, 2, 3}, nil)
		if err := w.Write(array.NewRecord(as, []arrow.Array{b.NewArray()}, 3)); err != nil {
			t.Fatal(err)
		}
		out, err := w.Finish()
		if err != nil {
			t.Fatal(err)
		}
		f := parseFooter(out[len(out)-footerSize:])
		for i := range f.numGlobalBuffers {
			if pos := binary.LittleEndian.Uint64(out[f.gboStart+16*uint64(i):]); pos%64 != 0 {
				t.Fatalf("%s: global buffer %d at %d", v, i, pos)
			}
		}
		if _, err := Open(ctx, BytesSource(out), "f"); err != nil {
			t.Fatal(err)
		}
	}
}

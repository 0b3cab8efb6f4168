package lance

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/omnigraph/omnigraph-worker/storage"
)

// withoutWrittenCache turns the written-files cache off for the test and empties it, for a
// test that counts the reads storage serves.
func withoutWrittenCache(t testing.TB) {
	SetWrittenCacheBytes(0)
	t.Cleanup(func() { SetWrittenCacheBytes(DefaultWrittenCacheBytes) })
}

// A scan of the small data and deletion files this process wrote reads none of them from
// storage, and returns what a scan reading them does; the bytes kept are those stored, also
// after the scans. Files it did not write (a process of its own: the cache emptied) and files
// above the size bound are read from storage.
func TestScanServesTheSmallFilesItWroteFromMemory(t *testing.T) {
	ctx := context.Background()
	l := storage.NewLatency(0)
	var reads atomic.Int64
	l.Trace(func(r storage.Request) {
		if (strings.Contains(r.Location, "/data/") || strings.Contains(r.Location, "/_deletions/")) && strings.HasPrefix(r.Op, "get") {
			reads.Add(1)
		}
	})
	st, err := storage.Open(ctx, "mem://written-cache", storage.WithLatency(l))
	if err != nil {
		t.Fatal(err)
	}
	d, err := Create(ctx, st, testSchema(t), rows(seq(0, 10)...), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for lo := int64(10); lo < 100; lo += 10 {
		s, err := d.StageAppend(ctx, rows(seq(lo, lo+10)...), StageOptions{})
		d = commit(t, d, s, err)
	}
	s, err := d.StageDelete(ctx, In("id", int64(3), int64(55), int64(97)), StageOptions{})
	d = commit(t, d, s, err)
	big, err := d.StageAppend(ctx, rows(seq(1000, 1000+20_000)...), StageOptions{}) // a data file above the bound
	d = commit(t, d, big, err)

	reads.Store(0)
	cached := scanIDs(t, d)
	// The big data file is above the bound: one read (it is read whole), none of the ten
	// small ones or of the deletion files.
	if n := reads.Load(); n != 1 {
		t.Fatalf("the scan made %d reads of data or deletion files, want 1: the big file's", n)
	}
	want := slices.DeleteFunc(append(seq(0, 100), seq(1000, 21_000)...), func(id int64) bool { return id == 3 || id == 55 || id == 97 })
	if !slices.Equal(cached, want) {
		t.Fatalf("the scan from memory read %d ids, want %d", len(cached), len(want))
	}
	for range 3 {
		scanIDs(t, d)
	}
	var kept int
	for _, fr := range d.Manifest().Fragments {
		keys := []string{"data/" + fr.Files[0].Path}
		if fr.Deletion != nil {
			keys = append(keys, deletionKey(fr.ID, fr.Deletion))
		}
		for _, key := range keys {
			b, ok := writtenBytes(st.Location(key), -1)
			if !ok {
				continue
			}
			kept++
			stored, err := st.Get(ctx, key)
			if err != nil || !bytes.Equal(b, stored) {
				t.Fatalf("%s: the kept bytes differ from the stored ones after the scans (%v)", key, err)
			}
		}
	}
	if kept < 10 {
		t.Fatalf("%d files kept, want the small data files and the deletion files", kept)
	}

	SetWrittenCacheBytes(0)
	SetWrittenCacheBytes(DefaultWrittenCacheBytes)
	reads.Store(0)
	if got := scanIDs(t, d); !slices.Equal(got, want) {
		t.Fatal("the scan from storage differs")
	}
	if n := reads.Load(); n < 12 {
		t.Fatalf("with nothing kept the scan read %d files from storage, want every one", n)
	}
}

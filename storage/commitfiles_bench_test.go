package storage_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/storage"
)

// BenchmarkLocalCommitFiles makes the files of one graph commit per iteration on a root with
// spares, as the worker does without fsync: eight new objects (data files, manifests), and a
// recovery sidecar armed, confirmed (replaced) and retired (deleted). Run it a fixed number of
// times, several runs in a row (-benchtime=3000x -count=3, TMPDIR on the file system to
// measure): on ext4 without a journal the inodes a run's removal frees make the next run's
// creations dearer for a minute or more (docs/deployment.md). sys_us/op is the process's
// kernel time per commit, the spares' refill included, where that cost shows.
func BenchmarkLocalCommitFiles(b *testing.B) {
	ctx := b.Context()
	s, err := storage.Open(ctx, b.TempDir(), storage.WithLocalFsync(false))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if !storage.KeepSpares(s) {
		b.Fatal("KeepSpares refused a local root")
	}
	data := make([]byte, 4096)
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	b.ResetTimer()
	for i := range b.N {
		sidecar := fmt.Sprintf("__recovery/%08d.json", i)
		if err := s.Put(ctx, sidecar, []byte("armed")); err != nil {
			b.Fatal(err)
		}
		for f := range 8 {
			if err := s.Put(ctx, fmt.Sprintf("t%d/data/%08d.lance", f%2, i*8+f), data); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.ReplaceIfUnchanged(ctx, sidecar, []byte("armed"), []byte("confirmed")); err != nil {
			b.Fatal(err)
		}
		if err := s.Delete(ctx, sidecar); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	sys := time.Duration(after.Stime.Nano() - before.Stime.Nano())
	b.ReportMetric(float64(sys.Microseconds())/float64(b.N), "sys_us/op")
}

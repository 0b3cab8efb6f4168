package storage_test

import (
	"runtime"
	"testing"

	"github.com/omnigraph/omnigraph-worker/storage"
)

// On local roots Compose copies ranges in the kernel: composing 8 MiB of ranges takes almost
// no heap, where reading them would take all 8 MiB. Memory and latency-wrapped roots read.
func TestComposeCopiesLocalRangesInTheKernel(t *testing.T) {
	ctx := t.Context()
	local := openT(t, t.TempDir())
	other := openT(t, t.TempDir())
	mem := openT(t, "mem://TestComposeCopiesLocalRangesInTheKernel")
	slow, err := storage.Open(ctx, t.TempDir(), storage.WithLatency(storage.NewLatency(0)))
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	switch {
	case !storage.ComposesLocally(local, other, local.Sub("x")):
		t.Fatal("two local roots do not compose locally")
	case storage.ComposesLocally(local, mem), storage.ComposesLocally(mem), storage.ComposesLocally(slow), storage.ComposesLocally(local, slow):
		t.Fatal("a memory or latency-wrapped root composes locally")
	}
	const size = 8 << 20
	if err := other.Put(ctx, "src", make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	parts := []storage.Part{{Data: []byte("x")}, {Source: other, Key: "src", Offset: 0, Length: size / 2}, {Source: other, Key: "src", Offset: size / 2, Length: size / 2}}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := storage.Compose(ctx, local, "out", parts); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > size/8 {
		t.Fatalf("Compose of %d bytes of ranges allocated %d bytes: the ranges went through the heap", size, got)
	}
	if n, err := local.Size(ctx, "out"); err != nil || n != size+1 {
		t.Fatalf("composed object: %d bytes, %v", n, err)
	}
}

package storage_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/storage"
	"github.com/omnigraph/omnigraph-worker/storage/storagetest"
)

// A store behind a Latency keeps every guarantee of the store it delays.
func TestLatencySuite(t *testing.T) {
	t.Run("mem", func(t *testing.T) {
		storagetest.Run(t, func(t *testing.T) storage.Store {
			return openLatency(t, fmt.Sprintf("mem://latency-%d", memSeq.Add(1)), storage.NewLatency(0))
		})
	})
	t.Run("file", func(t *testing.T) {
		storagetest.Run(t, func(t *testing.T) storage.Store {
			dir := filepath.Join(t.TempDir(), "root")
			s := openLatency(t, "file://"+filepath.ToSlash(dir), storage.NewLatency(0))
			if !storage.KeepSpares(s) {
				t.Fatal("KeepSpares refused a local root behind a Latency")
			}
			t.Cleanup(func() { storagetest.AssertNoTempFiles(t, dir) })
			return s
		})
	})
}

func openLatency(t *testing.T, uri string, l *storage.Latency) storage.Store {
	t.Helper()
	s, err := storage.Open(t.Context(), uri, storage.WithLatency(l))
	if err != nil {
		t.Fatalf("Open(%q): %v", uri, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Sequential requests are one wave each, whatever the method and whichever Sub issues them.
func TestLatencyCountsSequentialRequests(t *testing.T) {
	l := storage.NewLatency(0)
	s := openLatency(t, fmt.Sprintf("mem://latency-seq-%d", memSeq.Add(1)), l)
	sub := s.Sub("t")
	ctx := t.Context()
	var seen []storage.Request
	l.Trace(func(r storage.Request) { seen = append(seen, r) })
	steps := []func() error{
		func() error { return s.Put(ctx, "a", []byte("1")) },
		func() error { return sub.PutIfAbsent(ctx, "b", []byte("2")) },
		func() error { _, err := s.Get(ctx, "a"); return err },
		func() error { _, _, err := sub.GetIfExists(ctx, "b"); return err },
		func() error { _, err := sub.GetRange(ctx, "b", 0, 1); return err },
		func() error { _, err := s.Size(ctx, "a"); return err },
		func() error { _, err := s.Exists(ctx, "a"); return err },
		func() error { _, err := s.List(ctx, ""); return err },
		func() error { _, _, err := s.ListDir(ctx, "t"); return err },
		func() error { return s.Delete(ctx, "a") },
		func() error { return sub.DeletePrefix(ctx, "") },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if w, rt, r := l.Waves(), l.RoundTrips(), l.Requests(); w != int64(len(steps)) || rt != w || r != w {
		t.Fatalf("waves %d, round trips %d, requests %d after %d sequential requests", w, rt, r, len(steps))
	}
	wantOps := []string{"put", "put_if_absent", "get", "get_if_exists", "get_range", "size", "exists", "list", "list_dir", "delete", "delete_prefix"}
	for i, r := range seen {
		if r.Wave != int64(i+1) || r.Depth != r.Wave || r.Op != wantOps[i] {
			t.Fatalf("request %d traced as %+v, want wave %d op %s", i, r, i+1, wantOps[i])
		}
	}
	if want := sub.Location("b"); seen[1].Location != want {
		t.Fatalf("a Sub's request traced at %q, want %q", seen[1].Location, want)
	}
}

// Requests that overlap share a wave: the second and third start while the first is still in
// flight (held in its delay until they have started), and the fourth starts after all ended.
// The round trips count the chain: the third started after the second had ended.
func TestLatencyOverlappingRequests(t *testing.T) {
	l := storage.NewLatency(time.Hour) // each request waits until its context ends
	s := openLatency(t, fmt.Sprintf("mem://latency-par-%d", memSeq.Add(1)), l)
	started := make(chan storage.Request, 8)
	l.Trace(func(r storage.Request) { started <- r })
	ctx, release := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Put(ctx, "long", nil) })
	if r := <-started; r.Wave != 1 || r.Depth != 1 {
		t.Fatalf("first request: %+v", r)
	}
	done, cancel := context.WithCancel(t.Context())
	cancel() // ends the hour's delay at once; the request still counts
	for i := range 2 {
		_ = s.Put(done, fmt.Sprintf("short%d", i), nil)
		if r := <-started; r.Wave != 1 || r.Depth != int64(i+1) {
			t.Fatalf("short request %d beside the long one: %+v, want wave 1 depth %d", i, r, i+1)
		}
	}
	release()
	wg.Wait()
	if w, rt, n := l.Waves(), l.RoundTrips(), l.Requests(); w != 1 || rt != 2 || n != 3 {
		t.Fatalf("waves %d, round trips %d, requests %d; want 1, 2, 3", w, rt, n)
	}
	_ = s.Put(done, "after", nil)
	if r := <-started; r.Wave != 2 || r.Depth != 3 || l.Waves() != 2 || l.RoundTrips() != 3 {
		t.Fatalf("a request after the others ended: %+v (waves %d, round trips %d), want wave 2 depth 3", r, l.Waves(), l.RoundTrips())
	}
}

// Observe reports each request's end as well as its start, with the Seq its start had, in the
// order the requests ended: here a long request ends after two short ones that started beside it.
func TestLatencyObservesEnds(t *testing.T) {
	l := storage.NewLatency(time.Hour)
	s := openLatency(t, fmt.Sprintf("mem://latency-ends-%d", memSeq.Add(1)), l)
	var mu sync.Mutex // the test reads what the callbacks, under l's lock, appended
	var starts, ends []storage.Request
	started := make(chan struct{}, 4)
	l.Observe(func(r storage.Request) {
		mu.Lock()
		starts = append(starts, r)
		mu.Unlock()
		started <- struct{}{}
	}, func(r storage.Request) {
		mu.Lock()
		ends = append(ends, r)
		mu.Unlock()
	})
	ctx, release := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Put(ctx, "long", nil) })
	<-started
	done, cancel := context.WithCancel(t.Context())
	cancel()
	_ = s.Put(done, "short0", nil)
	_, _ = s.Get(done, "short1")
	<-started
	<-started
	release()
	wg.Wait()
	l.Observe(nil, nil)
	_ = s.Put(done, "unobserved", nil)
	mu.Lock()
	defer mu.Unlock()
	if len(starts) != 3 || len(ends) != 3 {
		t.Fatalf("observed %d starts and %d ends of 3 requests", len(starts), len(ends))
	}
	for i, want := range []int64{1, 2, 3} {
		if starts[i].Seq != want {
			t.Fatalf("start %d has Seq %d, want %d", i, starts[i].Seq, want)
		}
	}
	for i, want := range []int64{2, 3, 1} {
		if ends[i].Seq != want || ends[i] != starts[want-1] {
			t.Fatalf("end %d is %+v, want request %d as it started (%+v)", i, ends[i], want, starts[want-1])
		}
	}
}

// The delay is waited out before the request runs, and a context that ends during it stops the
// request before it reaches the store.
func TestLatencyDelaysAndCancels(t *testing.T) {
	const d = 30 * time.Millisecond
	l := storage.NewLatency(d)
	s := openLatency(t, fmt.Sprintf("mem://latency-delay-%d", memSeq.Add(1)), l)
	t0 := time.Now()
	if err := s.Put(t.Context(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(t0); took < d {
		t.Fatalf("a request took %v, less than its delay %v", took, d)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := s.Put(ctx, "never", []byte("v"))
	var oe *storage.OpError
	if !errors.Is(err, context.Canceled) || !errors.As(err, &oe) || oe.Op != "put" || oe.Key != "never" {
		t.Fatalf("Put under a cancelled context: %v", err)
	}
	if ok, err := s.Exists(t.Context(), "never"); err != nil || ok {
		t.Fatalf("a cancelled request reached the store: exists=%v err=%v", ok, err)
	}
	if w, rt := l.Waves(), l.RoundTrips(); w != 3 || rt != 3 {
		t.Fatalf("waves %d, round trips %d, want 3 (put, cancelled put, exists)", w, rt)
	}
}

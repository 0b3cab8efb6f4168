package ingest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestSetupRacesAnotherCreator: the ingest stream is created by someone else (a producer's
// tooling, with its own settings) at the moment the worker creates it. The worker's setup must
// not fail with "stream name already in use".
func TestSetupRacesAnotherCreator(t *testing.T) {
	for round := 0; round < 20; round++ {
		ns, err := StartEmbedded(t.TempDir(), -1)
		if err != nil {
			t.Fatal(err)
		}
		nc, err := nats.Connect(ns.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		// Two workers starting at once, each with its own Worker, beside a producer's tooling.
		workers := make([]*Worker, 6)
		for i := range workers {
			if workers[i], err = New(nc, nil, Config{Graph: "demo"}, nil); err != nil {
				t.Fatal(err)
			}
		}
		js, _ := jetstream.New(nc)
		ctx := context.Background()
		var wg sync.WaitGroup
		errs := make([]error, 6)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i%2 == 0 {
					errs[i] = workers[i].Setup(ctx)
					return
				}
				// A producer's own idea of the stream: other settings, same name. Its
				// tooling's errors are its own; only the worker's are checked.
				_, _ = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: workers[i].cfg.Stream, Subjects: workers[i].cfg.consumed(), MaxMsgs: 1 << 20})
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if i%2 == 0 && err != nil {
				t.Fatalf("round %d, creator %d: %v", round, i, err)
			}
		}
		nc.Close()
		ns.Shutdown()
	}
}

// Setup applies the stream limits to new and existing streams, and 0 lifts them again.
func TestSetupAppliesStreamLimits(t *testing.T) {
	ns, err := StartEmbedded(t.TempDir(), -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx := context.Background()
	js, _ := jetstream.New(nc)
	check := func(stream string, age time.Duration, bytes int64) {
		t.Helper()
		s, err := js.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		if c := s.CachedInfo().Config; c.MaxAge != age || c.MaxBytes != bytes {
			t.Fatalf("%s: max age %v bytes %d, want %v %d", stream, c.MaxAge, c.MaxBytes, age, bytes)
		}
	}
	for _, c := range []Config{
		{Graph: "demo"},
		{Graph: "demo", StreamMaxAge: time.Hour, StreamMaxBytes: 1 << 30, DLQMaxAge: 48 * time.Hour, DLQMaxBytes: 1 << 20},
		{Graph: "demo"},
	} {
		w, err := New(nc, nil, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Setup(ctx); err != nil {
			t.Fatal(err)
		}
		check(StreamName("demo"), c.StreamMaxAge, maxBytes(c.StreamMaxBytes))
		check(DLQStreamName("demo"), c.DLQMaxAge, maxBytes(c.DLQMaxBytes))
	}
	if _, err := New(nc, nil, Config{Graph: "demo", DLQMaxBytes: -1}, nil); err == nil {
		t.Fatal("a negative limit was taken")
	}
}

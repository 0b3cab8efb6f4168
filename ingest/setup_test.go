package ingest

import (
	"context"
	"sync"
	"testing"

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
		w, err := New(nc, nil, Config{Graph: "demo"}, nil)
		if err != nil {
			t.Fatal(err)
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
					// Each its own worker, as processes starting at the same moment are: one
					// Worker's Setup is not meant for concurrent calls.
					w, err := New(nc, nil, Config{Graph: "demo"}, nil)
					if err == nil {
						err = w.Setup(ctx)
					}
					errs[i] = err
					return
				}
				// A producer's own idea of the stream: other settings, same name. Its
				// tooling's errors are its own; only the worker's are checked.
				_, _ = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: w.cfg.Stream, Subjects: w.cfg.consumed(), MaxMsgs: 1 << 20})
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

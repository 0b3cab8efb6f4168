package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/omnigraph/omnigraph-worker/ingest"
)

// jetstreamBench prices durable acceptance: producers publishing to the embedded server's file
// store (as `worker run` starts it, in a directory on the same disk as the bench's temporary
// files) with sync_interval "always", every write fsynced before its ack, against NATS's
// default (fsync every 2 minutes). For each body size, one publish in flight at a time (a
// producer that waits for each ack: the latency) and a window of 64 in flight (the rate a
// producer that pipelines reaches). Prints
//
//	bench: jetstream-publish sync=default bytes=B inflight=N msgs=M msgs_per_s=… p50_ms=… p99_ms=…
//	bench: jetstream-publish sync=always … ratio=… (always's msgs/s over default's)
//
// The two modes alternate over rounds and each figure is the median of its rounds, as this
// machine drifts.
func jetstreamBench(ctx context.Context, dir string) error {
	const rounds = 3
	type key struct {
		bytes, inflight int
		always          bool
	}
	type figures struct{ rate, p50, p99 []float64 }
	cases := []struct{ bytes, inflight, msgs int }{{1 << 10, 1, 1000}, {1 << 10, 64, 4000}, {1 << 20, 1, 100}}
	got := map[key]*figures{}
	for r := range rounds {
		for _, always := range []bool{true, false} {
			sync := time.Duration(0)
			if !always {
				sync = 2 * time.Minute // NATS's own default
			}
			store := filepath.Join(dir, fmt.Sprintf("js-%d-%v", r, always))
			ns, err := ingest.StartEmbedded(store, -1, ingest.EmbeddedSync(sync))
			if err != nil {
				return err
			}
			err = func() error {
				defer ns.Shutdown()
				nc, err := nats.Connect(ns.ClientURL())
				if err != nil {
					return err
				}
				defer nc.Close()
				js, err := jetstream.New(nc)
				if err != nil {
					return err
				}
				for i, c := range cases {
					stream := fmt.Sprintf("BENCH%d", i)
					if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{stream}, Storage: jetstream.FileStorage}); err != nil {
						return err
					}
					rate, lat, err := publishRun(ctx, js, stream, c.bytes, c.inflight, c.msgs)
					if err != nil {
						return err
					}
					k := key{c.bytes, c.inflight, always}
					if got[k] == nil {
						got[k] = &figures{}
					}
					f := got[k]
					f.rate = append(f.rate, rate)
					f.p50 = append(f.p50, percentile(lat, 0.50))
					f.p99 = append(f.p99, percentile(lat, 0.99))
				}
				return nil
			}()
			os.RemoveAll(store)
			if err != nil {
				return err
			}
		}
	}
	for _, c := range cases {
		var defaultRate float64
		for _, always := range []bool{false, true} {
			f := got[key{c.bytes, c.inflight, always}]
			rate := median(f.rate)
			if !always {
				defaultRate = rate
				continue
			}
			line := func(mode string, f *figures, extra string) {
				fmt.Printf("bench: jetstream-publish sync=%s bytes=%d inflight=%d msgs=%d rounds=%d msgs_per_s=%.0f p50_ms=%.3f p99_ms=%.3f%s\n",
					mode, c.bytes, c.inflight, c.msgs, rounds, median(f.rate), median(f.p50), median(f.p99), extra)
			}
			line("default", got[key{c.bytes, c.inflight, false}], "")
			line("always", f, fmt.Sprintf(" ratio=%.2f", rate/defaultRate))
		}
	}
	return nil
}

// publishRun publishes msgs bodies of size bytes to subject with up to inflight unacknowledged
// at a time, and returns the rate and each publish's time from send to ack, in ms.
func publishRun(ctx context.Context, js jetstream.JetStream, subject string, bytes, inflight, msgs int) (float64, []float64, error) {
	body := make([]byte, bytes)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	lat := make([]float64, 0, msgs)
	start := time.Now()
	if inflight <= 1 {
		for range msgs {
			t := time.Now()
			if _, err := js.Publish(ctx, subject, body); err != nil {
				return 0, nil, err
			}
			lat = append(lat, float64(time.Since(t).Microseconds())/1000)
		}
	} else {
		type sent struct {
			at  time.Time
			ack jetstream.PubAckFuture
		}
		window := make([]sent, 0, inflight)
		wait := func(s sent) error {
			select {
			case <-s.ack.Ok():
			case err := <-s.ack.Err():
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
			lat = append(lat, float64(time.Since(s.at).Microseconds())/1000)
			return nil
		}
		for range msgs {
			if len(window) == inflight {
				if err := wait(window[0]); err != nil {
					return 0, nil, err
				}
				window = window[1:]
			}
			t := time.Now()
			f, err := js.PublishAsync(subject, body)
			if err != nil {
				return 0, nil, err
			}
			window = append(window, sent{t, f})
		}
		for _, s := range window {
			if err := wait(s); err != nil {
				return 0, nil, err
			}
		}
	}
	return float64(msgs) / time.Since(start).Seconds(), lat, nil
}

func percentile(v []float64, p float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

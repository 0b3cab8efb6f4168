package ingest

import (
	"testing"
	"time"
)

// The embedded server fsyncs every JetStream write before acknowledging it unless told to
// leave that to an interval, as NATS does by default.
func TestEmbeddedSync(t *testing.T) {
	for _, c := range []struct {
		opts     []EmbeddedOption
		always   bool
		interval time.Duration
	}{{nil, true, 0}, {[]EmbeddedOption{EmbeddedSync(0)}, true, 0}, {[]EmbeddedOption{EmbeddedSync(2 * time.Minute)}, false, 2 * time.Minute}} {
		ns, err := StartEmbedded(t.TempDir(), -1, c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		js := ns.JetStreamConfig()
		ns.Shutdown()
		if js == nil || js.SyncAlways != c.always || (c.interval > 0 && js.SyncInterval != c.interval) {
			t.Errorf("options %d: JetStream config %+v, want sync always %v, interval %v", len(c.opts), js, c.always, c.interval)
		}
	}
}

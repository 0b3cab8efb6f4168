package ingest

import (
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedOption changes the embedded server StartEmbedded starts.
type EmbeddedOption func(*server.Options)

// EmbeddedSync sets when the embedded server's JetStream file store reaches the disk. 0, the
// default, is sync_interval "always": every write is fsynced before the publish is
// acknowledged, so an acknowledged batch survives a power loss as well as a crash. d > 0 is
// NATS's own behaviour (its default is 2m): the write is in the file, so a process crash keeps
// it, but it is fsynced only every d, so a power loss or an OS crash can lose what was
// acknowledged in the last d.
func EmbeddedSync(d time.Duration) EmbeddedOption {
	return func(o *server.Options) {
		o.SyncAlways = d <= 0
		if d > 0 {
			o.SyncInterval = d
		}
	}
}

// StartEmbedded starts an in-process NATS server with JetStream storing under dir (keep it
// outside the graph root), listening on 127.0.0.1:port (-1 picks a free port). Its max_payload
// accepts the largest graph batch, and it fsyncs every write before acknowledging it unless
// EmbeddedSync says otherwise.
func StartEmbedded(dir string, port int, opts ...EmbeddedOption) (*server.Server, error) {
	o := &server.Options{
		ServerName: "omnigraph-embedded",
		Host:       "127.0.0.1",
		Port:       port,
		JetStream:  true,
		StoreDir:   dir,
		MaxPayload: MaxMessageBytes,
		NoSigs:     true,
		NoLog:      true,
		SyncAlways: true,
	}
	for _, opt := range opts {
		opt(o)
	}
	ns, err := server.NewServer(o)
	if err != nil {
		return nil, fmt.Errorf("ingest: embedded NATS: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(15 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("ingest: embedded NATS did not become ready")
	}
	return ns, nil
}

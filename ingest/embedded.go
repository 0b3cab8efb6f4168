package ingest

import (
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// StartEmbedded starts an in-process NATS server with JetStream storing under dir (keep it
// outside the graph root), listening on 127.0.0.1:port (-1 picks a free port). Its max_payload
// accepts the largest graph batch.
func StartEmbedded(dir string, port int) (*server.Server, error) {
	ns, err := server.NewServer(&server.Options{
		ServerName: "omnigraph-embedded",
		Host:       "127.0.0.1",
		Port:       port,
		JetStream:  true,
		StoreDir:   dir,
		MaxPayload: MaxMessageBytes,
		NoSigs:     true,
		NoLog:      true,
	})
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

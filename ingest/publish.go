package ingest

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NoStreamError is a publish to a graph's subject that no stream takes: the graph's worker
// has never run against this NATS (it makes the stream), or the graph name is wrong.
type NoStreamError struct {
	Graph, Subject string
}

func (e *NoStreamError) Error() string {
	return fmt.Sprintf("no stream for graph %s: is its worker running? (subject %s)", e.Graph, e.Subject)
}

// Publish stores m, a message to one of cfg's graph subjects, in JetStream, saying which graph
// has no stream where JetStream only says that nothing answered.
func Publish(ctx context.Context, js jetstream.JetStream, cfg Config, m *nats.Msg) (*jetstream.PubAck, error) {
	ack, err := js.PublishMsg(ctx, m)
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
		return nil, &NoStreamError{Graph: cfg.Graph, Subject: m.Subject}
	}
	return ack, err
}

package ingest

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NoStreamError is a graph whose stream JetStream does not have: a publish to one of its
// subjects that no stream takes, or a look-up of one of its streams (dead letters, events)
// that is not there. Its worker has never run against this NATS (the worker makes the
// streams), or the graph name is wrong. Every command that talks to a graph's streams says
// this one thing for it (NoStream).
type NoStreamError struct {
	Graph string
	// Subject is the subject published to, or Stream the stream looked up (one of them).
	Subject, Stream string
	Err             error // what JetStream said
}

func (e *NoStreamError) Error() string {
	where := "subject " + e.Subject
	if e.Subject == "" {
		where = "stream " + e.Stream
	}
	return fmt.Sprintf("no stream for graph %s: is its worker running? (%s)", e.Graph, where)
}

func (e *NoStreamError) Unwrap() error { return e.Err }

// isNoStream reports whether err is JetStream saying that no stream is there: a publish no
// stream answered, or a stream look-up the server does not know.
func isNoStream(err error) bool {
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, nats.ErrStreamNotFound)
}

// NoStream is err as a *NoStreamError of cfg's graph when JetStream said that no stream is
// there (subject published to, or stream looked up: give one), and err otherwise.
func NoStream(cfg Config, subject, stream string, err error) error {
	if err == nil || !isNoStream(err) {
		return err
	}
	var ns *NoStreamError
	if errors.As(err, &ns) {
		return err
	}
	return &NoStreamError{Graph: cfg.Graph, Subject: subject, Stream: stream, Err: err}
}

// GraphStream looks up the stream named name of cfg's graph, saying which graph has no stream
// (NoStream) where JetStream only says that it does not know the name.
func GraphStream(ctx context.Context, js jetstream.JetStream, cfg Config, name string) (jetstream.Stream, error) {
	s, err := js.Stream(ctx, name)
	if err != nil {
		if err := NoStream(cfg, "", name, err); errors.As(err, new(*NoStreamError)) {
			return nil, err
		}
		return nil, fmt.Errorf("stream %s: %w", name, err)
	}
	return s, nil
}

// Publish stores m, a message to one of cfg's graph subjects, in JetStream, saying which graph
// has no stream where JetStream only says that nothing answered.
func Publish(ctx context.Context, js jetstream.JetStream, cfg Config, m *nats.Msg) (*jetstream.PubAck, error) {
	ack, err := js.PublishMsg(ctx, m)
	if err != nil {
		return nil, NoStream(cfg, m.Subject, "", err)
	}
	return ack, nil
}

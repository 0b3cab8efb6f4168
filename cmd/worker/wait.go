package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/omnigraph/omnigraph-worker/ingest"
)

// waitOptions are --no-wait and --wait-timeout of a request to a graph's worker.
type waitOptions struct {
	noWait  *bool
	timeout *time.Duration
}

func waitFlags(fs *flagSet) waitOptions {
	return waitOptions{
		noWait:  fs.Bool("no-wait", false, "with --graph: only publish the request, without waiting for its outcome"),
		timeout: fs.Duration("wait-timeout", 10*time.Minute, "with --graph: how long to wait for the request's event or dead letter"),
	}
}

// deadLetteredError is a request the worker dead-lettered: it exits with the code of the
// error kind the dead letter carries.
type deadLetteredError struct {
	Reason, Kind, Text string
	Seq                uint64
}

func (e *deadLetteredError) Error() string {
	return fmt.Sprintf("the worker dead-lettered the request as %s (dead letter %d; worker dlq show %d): %s", e.Reason, e.Seq, e.Seq, e.Text)
}

// ErrorKind makes the exit code the catalogue's for the worker's error.
func (e *deadLetteredError) ErrorKind() string { return e.Kind }

// waitTimeoutError is a request whose outcome did not arrive in time: it may still be queued
// behind others or in progress.
type waitTimeoutError struct {
	Stream  string
	Seq     uint64
	Timeout time.Duration
}

func (e *waitTimeoutError) Error() string {
	return fmt.Sprintf("no outcome of request %d on stream %s within %v (--wait-timeout): it may still be queued or in progress, or the worker is stopped", e.Seq, e.Stream, e.Timeout)
}

// awaitOutcome waits for the outcome of message seq of stream: its event in the events
// stream, or its dead letter. Both are read from the request's own storage time on (the
// server's clock, so client clock skew cannot skip them).
func awaitOutcome(ctx context.Context, js jetstream.JetStream, cfg ingest.Config, stream string, seq uint64) (json.RawMessage, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", stream, err)
	}
	req, err := s.GetMsg(ctx, seq)
	if err != nil {
		return nil, fmt.Errorf("request %d of stream %s: %w", seq, stream, err)
	}
	since := req.Time
	type found struct {
		event json.RawMessage
		err   error
	}
	ctx, cancel := context.WithCancel(ctx)
	out := make(chan found, 2)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	watch := func(name, subject string, match func(jetstream.Msg) (found, bool)) {
		defer wg.Done()
		cons, err := js.OrderedConsumer(ctx, name, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject},
			DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &since})
		if err != nil {
			if ctx.Err() == nil {
				out <- found{err: fmt.Errorf("stream %s (a worker creates it as it starts; --no-wait only publishes): %w", name, err)}
			}
			return
		}
		it, err := cons.Messages()
		if err != nil {
			out <- found{err: err}
			return
		}
		stop := context.AfterFunc(ctx, it.Stop)
		defer stop()
		for {
			m, err := it.Next()
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					out <- found{err: err}
				}
				return
			}
			if f, ok := match(m); ok {
				out <- f
				return
			}
		}
	}
	wg.Add(2)
	go watch(cfg.EventsStream, cfg.EventSubject(), func(m jetstream.Msg) (found, bool) {
		var ev ingest.Event
		if json.Unmarshal(m.Data(), &ev) != nil || ev.SourceStream != stream || ev.SourceSequence != seq {
			return found{}, false
		}
		return found{event: m.Data()}, true
	})
	go watch(cfg.DLQStream, "omnigraph."+cfg.Graph+".dlq.>", func(m jetstream.Msg) (found, bool) {
		h := m.Headers()
		if h.Get(ingest.HeaderOrigStream) != stream || h.Get(ingest.HeaderOrigSeq) != strconv.FormatUint(seq, 10) {
			return found{}, false
		}
		meta, _ := m.Metadata()
		dl := &deadLetteredError{Kind: h.Get(ingest.HeaderErrorKind), Text: h.Get(ingest.HeaderError)}
		if meta != nil {
			dl.Seq = meta.Sequence.Stream
		}
		if _, reason, ok := cutLast(m.Subject(), "."); ok {
			dl.Reason = reason
		}
		return found{err: dl}, true
	})
	select {
	case f := <-out:
		return f.event, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// cutLast splits s around its last sep.
func cutLast(s, sep string) (string, string, bool) {
	for i := len(s) - len(sep); i >= 0; i-- {
		if s[i:i+len(sep)] == sep {
			return s[:i], s[i+len(sep):], true
		}
	}
	return s, "", false
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/ingest"
)

// waitOptions are --no-wait and --wait-timeout of a request to a graph's worker.
type waitOptions struct {
	noWait  *bool
	timeout *time.Duration
	fs      *flagSet // names them as the user set them
}

func waitFlags(fs *flagSet) waitOptions {
	return waitOptions{fs: fs,
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

// heldError is a request the worker holds because the graph needs an operator (its held
// event): it exits with the catalogue's code for the kind (the operators' code). The request
// is not lost: it commits once the graph is mended, and its commit event follows.
type heldError struct {
	Kind, Text string
	Seq        uint64 // the request's stream sequence
}

func (e *heldError) Error() string {
	return fmt.Sprintf("the worker holds request %d for an operator (%s): %s; it is applied once the graph is mended (docs/ingest-failures.md)", e.Seq, e.Kind, e.Text)
}

// ErrorKind makes the exit code the catalogue's for the kind that holds the request.
func (e *heldError) ErrorKind() string { return e.Kind }

// waitTimeoutError is a request whose outcome did not arrive in time: it may still be queued
// behind others or in progress.
type waitTimeoutError struct {
	Stream  string
	Seq     uint64
	Timeout time.Duration
	Flag    string // --wait-timeout as the user set it
}

func (e *waitTimeoutError) Error() string {
	flag := e.Flag
	if flag == "" {
		flag = "--wait-timeout"
	}
	return fmt.Sprintf("no outcome of request %d on stream %s within %v (%s): it may still be queued or in progress, or the worker is stopped", e.Seq, e.Stream, e.Timeout, flag)
}

// ErrorKind gives a wait that timed out its own exit code.
func (e *waitTimeoutError) ErrorKind() string { return errs.KindWaitTimeout }

// eventsMark is the last sequence of cfg's events stream, read before a request is published:
// its outcome event comes after it, whatever the clocks of the servers that time the request
// and the event. 0 when it cannot be read (the wait then starts at the request's own time).
func eventsMark(ctx context.Context, js jetstream.JetStream, cfg ingest.Config) uint64 {
	s, err := js.Stream(ctx, cfg.EventsStream)
	if err != nil {
		return 0
	}
	return s.CachedInfo().State.LastSeq
}

// deadLetterGrace is how long a wait that found a request's dead letter first waits for its
// dead_lettered event (published right after the dead letter is kept), which says more; a
// worker that publishes none (an older build) is answered from the dead letter.
const deadLetterGrace = 3 * time.Second

// awaitOutcome waits for the outcome of message seq of stream: its event in the events stream
// (committed, already_applied, empty: the event and no error; dead_lettered: the event and a
// *deadLetteredError; held: the event and a *heldError), or failing that its dead letter. The
// events are read after mark (eventsMark before the publish; 0 reads them from the request's
// own storage time on, as for a publish JetStream took as a duplicate of an earlier one,
// whose outcome may be older), and only the events of the stream's incarnation that stored
// the request count.
func awaitOutcome(ctx context.Context, js jetstream.JetStream, cfg ingest.Config, stream string, seq, mark uint64) (json.RawMessage, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", stream, err)
	}
	req, err := s.GetMsg(ctx, seq)
	if err != nil {
		return nil, fmt.Errorf("request %d of stream %s: %w", seq, stream, err)
	}
	since := req.Time
	// The events of this incarnation of the stream carry its creation time in their id.
	var eventID string
	if created := s.CachedInfo().Created; !created.IsZero() {
		eventID = ingest.EventMsgID(stream, created.UnixNano(), seq)
	}
	type found struct {
		event json.RawMessage
		err   error
		fatal bool // the watch failed: no outcome will come from it
	}
	ctx, cancel := context.WithCancel(ctx)
	events, letters := make(chan found, 1), make(chan found, 1)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	// match reports a message's outcome; final says it is the last word, where a held event
	// is superseded by its commit event when the wait reads older events (a duplicate
	// publish): the hold is reported only once the reader has caught up without one.
	watch := func(out chan found, name, subject string, start uint64, match func(jetstream.Msg) (f found, ok, final bool)) {
		defer wg.Done()
		oc := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &since}
		if start > 0 {
			oc = jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start}
		}
		cons, err := js.OrderedConsumer(ctx, name, oc)
		if err != nil {
			if ctx.Err() == nil {
				out <- found{err: fmt.Errorf("stream %s (a worker creates it as it starts; --no-wait only publishes): %w", name, err), fatal: true}
			}
			return
		}
		it, err := cons.Messages()
		if err != nil {
			out <- found{err: err, fatal: true}
			return
		}
		stop := context.AfterFunc(ctx, it.Stop)
		defer stop()
		var held *found
		for {
			m, err := it.Next()
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					out <- found{err: err, fatal: true}
				}
				return
			}
			f, ok, final := match(m)
			if ok && final {
				out <- f
				return
			}
			if ok {
				held = &f
			}
			if meta, err := m.Metadata(); held != nil && (err != nil || meta.NumPending == 0) {
				out <- *held
				return
			}
		}
	}
	wg.Add(2)
	go watch(events, cfg.EventsStream, cfg.EventSubject(), mark+1, func(m jetstream.Msg) (found, bool, bool) {
		var ev ingest.Event
		if json.Unmarshal(m.Data(), &ev) != nil || ev.SourceStream != stream || ev.SourceSequence != seq {
			return found{}, false, false
		}
		if id := m.Headers().Get(ingest.HeaderMsgID); eventID != "" && strings.HasPrefix(id, "event:"+stream+"@") && id != eventID && !strings.HasPrefix(id, eventID+":") {
			return found{}, false, false // the message at this sequence of an earlier incarnation
		}
		return found{event: m.Data(), err: outcomeError(ev)}, true, ev.Outcome != ingest.OutcomeHeld
	})
	go watch(letters, cfg.DLQStream, "omnigraph."+cfg.Graph+".dlq.>", 0, func(m jetstream.Msg) (found, bool, bool) {
		h := m.Headers()
		if h.Get(ingest.HeaderOrigStream) != stream || h.Get(ingest.HeaderOrigSeq) != strconv.FormatUint(seq, 10) {
			return found{}, false, false
		}
		meta, _ := m.Metadata()
		dl := &deadLetteredError{Kind: h.Get(ingest.HeaderErrorKind), Text: h.Get(ingest.HeaderError)}
		if meta != nil {
			dl.Seq = meta.Sequence.Stream
		}
		if _, reason, ok := cutLast(m.Subject(), "."); ok {
			dl.Reason = reason
		}
		return found{err: dl}, true, true
	})
	var letter *found
	var grace <-chan time.Time
	for {
		select {
		case f := <-events:
			if f.fatal && letter != nil {
				return nil, letter.err
			}
			return f.event, f.err
		case f := <-letters:
			if f.fatal {
				return nil, f.err
			}
			letter, grace = &f, time.After(deadLetterGrace)
		case <-grace:
			return nil, letter.err
		case <-ctx.Done():
			if letter != nil {
				return nil, letter.err
			}
			return nil, ctx.Err()
		}
	}
}

// waitFor waits up to timeout (flag names it) for the outcome of the request JetStream stored
// as ack, reading the events after mark (eventsMark before the publish); a publish JetStream
// took as a duplicate reads them from the stored request's time, since its outcome may be
// older than the mark.
func waitFor(ctx context.Context, js jetstream.JetStream, cfg ingest.Config, ack *jetstream.PubAck, mark uint64, timeout time.Duration, flag string) (json.RawMessage, error) {
	if ack.Duplicate {
		mark = 0
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ev, err := awaitOutcome(wctx, js, cfg, ack.Stream, ack.Sequence, mark)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return nil, &waitTimeoutError{Stream: ack.Stream, Seq: ack.Sequence, Timeout: timeout, Flag: flag}
	}
	return ev, err
}

// outcomeError is the error an outcome event ends a wait with: nil for committed,
// already_applied and empty.
func outcomeError(ev ingest.Event) error {
	switch ev.Outcome {
	case ingest.OutcomeDeadLettered:
		return &deadLetteredError{Reason: ev.Reason, Kind: ev.ErrorKind, Text: ev.Error, Seq: ev.DLQSequence}
	case ingest.OutcomeHeld:
		return &heldError{Kind: ev.ErrorKind, Text: ev.Error, Seq: ev.SourceSequence}
	}
	return nil
}

// describeEvent is an outcome event as one line for a person.
func describeEvent(raw json.RawMessage) string {
	var ev ingest.Event
	if err := json.Unmarshal(raw, &ev); err != nil {
		return string(raw)
	}
	src := fmt.Sprintf("stream %s sequence %d", ev.SourceStream, ev.SourceSequence)
	if ev.SourceMsgID != "" {
		src += fmt.Sprintf(" (msg id %s)", ev.SourceMsgID)
	}
	outcome := ev.Outcome
	if outcome == "" { // an event of a worker from before outcomes were named
		outcome = ingest.OutcomeCommitted
		if ev.AlreadyApplied {
			outcome = ingest.OutcomeAlreadyApplied
		}
	}
	switch outcome {
	case ingest.OutcomeDeadLettered:
		return fmt.Sprintf("%s: dead_lettered as %s (%s): %s; dead letter %d on %s (worker dlq show %d)", src, ev.Reason, ev.ErrorKind, ev.Error, ev.DLQSequence, ev.DLQStream, ev.DLQSequence)
	case ingest.OutcomeHeld:
		return fmt.Sprintf("%s: held for an operator (%s): %s; applied once the graph is mended", src, ev.ErrorKind, ev.Error)
	case ingest.OutcomeEmpty:
		return fmt.Sprintf("%s: empty: no records, acknowledged without a commit", src)
	}
	var n int
	var parts []string
	for _, c := range append(ev.Nodes[:len(ev.Nodes):len(ev.Nodes)], ev.Edges...) {
		n += c.EntitiesLoaded
		parts = append(parts, fmt.Sprintf("%s %d", c.Name, c.EntitiesLoaded))
	}
	line := fmt.Sprintf("%s: %s: %s on %s", src, outcome, ev.Kind, ev.Branch)
	if ev.Mode != "" {
		line += fmt.Sprintf(" (%s)", ev.Mode)
	}
	if len(parts) > 0 {
		line += fmt.Sprintf(", %d entities (%s)", n, strings.Join(parts, ", "))
	}
	if ev.Merge != nil {
		line += fmt.Sprintf(", merge %s into %s: %s", ev.Merge.Source, ev.Merge.Target, ev.Merge.Outcome)
	}
	if ev.GraphCommitID != "" {
		line += fmt.Sprintf(", commit %s at manifest version %d", ev.GraphCommitID, ev.ManifestVersion)
	} else {
		line += ", no commit"
	}
	return line
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

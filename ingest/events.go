package ingest

import (
	"encoding/json"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// Outcomes an event reports (Event.Outcome): every message ends in one event on the events
// stream, so a producer can wait for its own.
const (
	// OutcomeCommitted: the message was applied (the commit event of before: kind load,
	// merge, optimize or cleanup; a merge already up to date, an optimize with nothing to
	// compact and a cleanup have no graph_commit_id).
	OutcomeCommitted = "committed"
	// OutcomeAlreadyApplied: its receipt was already in the graph; acknowledged without a
	// write (the same Nats-Msg-Id as its committed event, so one deduplicates the other).
	OutcomeAlreadyApplied = "already_applied"
	// OutcomeDeadLettered: kind dead_lettered; published once JetStream accepted the dead
	// letter, naming it (dlq_stream, dlq_sequence).
	OutcomeDeadLettered = "dead_lettered"
	// OutcomeHeld: kind held; the graph needs an operator (error_kind) and the message is
	// held until it is mended, then its committed event follows. Once per hold.
	OutcomeHeld = "held"
	// OutcomeEmpty: kind empty; a batch of no records, acknowledged without a graph commit.
	OutcomeEmpty = "empty"
)

// Requests, Event.Request: what the message asked for, by the subject it came on.
const (
	RequestLoad        = "load"
	RequestMerge       = "merge"
	RequestMaintenance = "maintenance"
	RequestSchema      = "schema"
)

// requestOf is the request a message on subject makes.
func (w *Worker) requestOf(subject string) string {
	switch subject {
	case w.cfg.MergeSubject():
		return RequestMerge
	case w.cfg.MaintenanceSubject():
		return RequestMaintenance
	case w.cfg.SchemaSubject():
		return RequestSchema
	}
	return RequestLoad
}

// OutcomeEventMsgID is the Nats-Msg-Id of the event reporting outcome for message seq of
// stream (created as in EventMsgID): a committed or already_applied event is EventMsgID itself
// (a redelivery recognised as applied repeats the first event, which stays); the others add
// their own suffix, ":dead_lettered", ":empty", and ":held:<kind>" for a hold (one per hold
// and kind, however often the held message is tried).
func OutcomeEventMsgID(stream string, created int64, seq uint64, outcome, kind string) string {
	base := EventMsgID(stream, created, seq)
	switch outcome {
	case "", OutcomeCommitted, OutcomeAlreadyApplied:
		return base
	case OutcomeHeld:
		return base + ":" + OutcomeHeld + ":" + kind
	}
	return base + ":" + outcome
}

// emit publishes ev as the event of the message rc names: the source stream, sequence, the
// producer's Nats-Msg-Id and the receipt key, under the outcome's own id. The events stream
// stores it; a failure is logged, never a reason to hold the message.
func (w *Worker) emit(ev Event, rc *publisher.Receipt) {
	ev.Graph, ev.SourceStream, ev.SourceSequence, ev.SourceMsgID = w.cfg.Graph, rc.Stream, rc.Sequence, rc.MsgID
	ev.ReceiptKey = rc.ReceiptKey()
	if ev.Outcome == "" {
		ev.Outcome = OutcomeCommitted
		if ev.AlreadyApplied {
			ev.Outcome = OutcomeAlreadyApplied
		}
	}
	b, err := json.Marshal(ev)
	if err == nil {
		m := nats.NewMsg(w.cfg.EventSubject())
		m.Data = b
		m.Header.Set(HeaderMsgID, OutcomeEventMsgID(rc.Stream, rc.StreamCreated, rc.Sequence, ev.Outcome, ev.ErrorKind))
		err = w.nc.PublishMsg(m)
	}
	if err != nil {
		w.log.Warn("event not published", zap.String("outcome", ev.Outcome), zap.Uint64("seq", rc.Sequence), zap.Error(err))
	}
}

// outcomeEvent is the event of a message that made no commit: its kind is its outcome, Request
// what it asked for; a load's branch and mode, and the actor, as its headers give them.
func (w *Worker) outcomeEvent(outcome, subject string, h nats.Header) Event {
	ev := Event{Kind: outcome, Outcome: outcome, Request: w.requestOf(subject)}
	if ev.Request == RequestLoad {
		ev.Branch = ids.BranchKey(h.Get(HeaderBranch))
		if ev.Mode = engine.Mode(h.Get(HeaderMode)); ev.Mode == "" {
			ev.Mode = engine.ModeMerge
		}
	}
	if a := h.Get(HeaderActor); a != "" {
		ev.ActorID = &a
	}
	return ev
}

// deadLettered publishes the dead_lettered event of l, which JetStream accepted as ack (sent
// by reference when omitted says so).
func (w *Worker) deadLettered(l letter, rc *publisher.Receipt, ack *jetstream.PubAck, omitted bool) {
	ev := w.outcomeEvent(OutcomeDeadLettered, l.subject, l.header)
	ev.Reason, ev.ErrorKind, ev.Error = l.reason, l.kind, boundedText(l.text)
	if len(l.detail) > 0 && json.Valid(l.detail) {
		ev.ErrorDetail = json.RawMessage(l.detail)
	}
	ev.DLQSubject = w.cfg.DLQSubject(l.reason)
	if ack != nil {
		ev.DLQStream, ev.DLQSequence = ack.Stream, ack.Sequence
	}
	if omitted {
		ev.BodyOmitted = len(l.data)
	}
	w.emit(ev, rc)
}

// held publishes the held event of a message the graph's damage holds (cause needs an
// operator), at its attempts-th attempt.
func (w *Worker) held(msg jetstream.Msg, rc *publisher.Receipt, cause error, attempts int) {
	ev := w.outcomeEvent(OutcomeHeld, msg.Subject(), msg.Headers())
	ev.ErrorKind, ev.Error, ev.Attempts = errs.Kind(cause), boundedText(cause.Error()), attempts
	if d := errs.Detail(cause); len(d) > 0 {
		ev.ErrorDetail = boundedDetail(d)
	}
	w.emit(ev, rc)
}

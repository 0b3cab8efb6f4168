package ingest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
)

// A broker can lose what Setup made (its store lost, a stream or the consumer deleted by an
// operator) while the worker serves. JetStream then answers a fetch with "no responders", as it
// does while it is restarting, electing the consumer's leader or has JetStream off, so a fetch
// error alone says nothing for sure: the worker asks JetStream for each of its streams and its
// consumer and re-creates those it reports not found from Setup's own configurations (the
// configured subjects, limits, replicas and placement). When JetStream does not answer the
// lookups the worker cannot tell, and goes on pulling: a pull that works says more than a
// lookup. Whatever keeps it from taking messages is a streak: /readyz answers 503 past
// FetchGrace and the worker is stalled past retry_budget.
//
// The ingest stream and the consumer are made again only between two pull sessions (Run):
// receipts carry the stream's incarnation, read as a session opens, so no session may go on
// pulling from a stream made again under it. Within a session (a dead letter no stream takes,
// a deletion advisory) only the dead-letter and events streams are made again; a session whose
// consumer is gone ends, and Run makes the rest.

// FetchGrace is how long fetching may keep failing before /readyz stops answering 200: a few
// fetch intervals, so that a pull lost to a reconnect does not flap readiness while a worker
// that cannot fetch says so within seconds rather than at retry_budget.
const FetchGrace = 3 * fetchWait

// consumeExpiry is the pull expiry of the one-message consumer; its iterator reports missed
// heartbeats within it.
const consumeExpiry = 5 * time.Second

// lookupTimeout bounds the lookups of the streams and the consumer together: on a cluster one
// whose leader is being elected does not answer, and the worker would rather pull meanwhile.
const lookupTimeout = 2 * time.Second

// RecreateError is JetStream refusing to make again a stream or the consumer it had lost.
type RecreateError struct {
	Missing []string // what was not found, e.g. "stream OMNIGRAPH_DEMO"
	Err     error
}

func (e *RecreateError) Error() string {
	return fmt.Sprintf("re-creating %s: %v", strings.Join(e.Missing, ", "), e.Err)
}

func (e *RecreateError) Unwrap() error { return e.Err }

// piece is one thing Setup makes that JetStream may lose; what is its label on
// omnigraph_streams_recreated_total (the name of the setting that names it).
type piece struct{ what, name string }

func (p piece) String() string {
	return map[string]string{"stream": "stream", "dlq_stream": "dead-letter stream", "events_stream": "events stream",
		"consumer": "consumer"}[p.what] + " " + p.name
}

// recreatable are the labels of omnigraph_streams_recreated_total.
var recreatable = []string{"stream", "dlq_stream", "events_stream", "consumer"}

// missing asks JetStream for each stream and the consumer and returns those it reports not
// found. An error means it could not tell (no answer, JetStream off).
func (w *Worker) missing(ctx context.Context) ([]piece, error) {
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	var out []piece
	for _, st := range w.streamConfigs() {
		_, err := w.js.Stream(ctx, st.name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			out = append(out, st.piece)
		case err != nil:
			return nil, fmt.Errorf("ingest: looking up %s: %w", st.piece, err)
		}
	}
	c := piece{"consumer", w.cfg.Consumer}
	if len(out) > 0 && out[0].what == "stream" {
		return append(out, c), nil // a consumer goes with its stream
	}
	_, err := w.js.Consumer(ctx, w.cfg.Stream, c.name)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound), errors.Is(err, jetstream.ErrStreamNotFound):
		out = append(out, c)
	case err != nil:
		return nil, fmt.Errorf("ingest: looking up %s: %w", c, err)
	}
	return out, nil
}

// reconcile makes again what JetStream reports missing, from Setup's configurations, and logs
// and counts what it made; between says no pull session is open, so the ingest stream and the
// consumer may be made too (see above). cause is what made the worker look. It returns an error
// when it could not tell, or a *RecreateError when JetStream refused. Calls are one at a time,
// so a piece lost once is made and counted once.
func (w *Worker) reconcile(ctx context.Context, cause error, between bool) error {
	w.setupMu.Lock()
	defer w.setupMu.Unlock()
	lacking, err := w.missing(ctx)
	if err != nil {
		return err
	}
	var made, refused []string
	var first error
	fail := func(p piece, err error) {
		refused = append(refused, p.String())
		if first == nil {
			first = err
		}
	}
	for _, st := range w.streamConfigs() {
		if !slices.Contains(lacking, st.piece) || st.what == "stream" && !between {
			continue
		}
		if err := w.ensureStream(ctx, st.cfg); err != nil {
			fail(st.piece, fmt.Errorf("ingest: %s: %w", st.piece, err))
			continue
		}
		made = append(made, st.piece.String())
		w.metrics.recreated(st.what)
	}
	if c := (piece{"consumer", w.cfg.Consumer}); between && slices.Contains(lacking, c) {
		if slices.Contains(refused, (piece{"stream", w.cfg.Stream}).String()) {
			refused = append(refused, c.String()) // not without its stream
		} else if _, err := w.ensureConsumer(ctx); err != nil {
			fail(c, err)
		} else {
			made = append(made, c.String())
			w.metrics.recreated(c.what)
		}
	}
	if len(made) > 0 {
		w.log.Warn("re-created what JetStream no longer had (its store lost, or deleted by an operator), with the configured settings",
			zap.Strings("recreated", made), zap.NamedError("cause", cause))
	}
	if first != nil {
		return &RecreateError{Missing: refused, Err: first}
	}
	return nil
}

// restore reconciles until the streams and the consumer are there (true), or ctx ends or the
// lease is lost, with the in-place backoff; each failure counts on s. Between sessions (Run) it
// also returns true when JetStream does not answer the lookups: then the pulls say the rest. In
// a session (the deletion watcher) it keeps asking: nothing else notices an events stream gone.
func (w *Worker) restore(ctx context.Context, lost <-chan struct{}, s *streak, cause error, between bool) bool {
	retry := w.backoff()
	for {
		err := w.reconcile(ctx, cause, between)
		if ctx.Err() != nil || w.leaseLost() {
			return false
		}
		if err == nil {
			return true
		}
		s.fail(err)
		if re := (*RecreateError)(nil); between && !errors.As(err, &re) {
			return true
		}
		wait := s.wait(retry.NextBackOff())
		if !s.isStalled() {
			w.log.Warn("streams or consumer not there and not re-created; trying again", zap.Duration("in", wait), zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return false
		case <-lost:
			return false
		case <-time.After(wait):
		}
	}
}

// consumerGone reports whether JetStream says the consumer, or its stream, is not there; false
// when it does not answer within a pull's wait.
func (w *Worker) consumerGone(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, fetchWait)
	defer cancel()
	_, err := w.js.Consumer(ctx, w.cfg.Stream, w.cfg.Consumer)
	return errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound)
}

// gone reports whether a failed fetch may mean that the stream or the consumer is no longer
// there: JetStream says so, or nothing answered the pull (see above).
func gone(err error) bool {
	for _, e := range []error{nats.ErrNoResponders, jetstream.ErrStreamNotFound, jetstream.ErrConsumerNotFound, jetstream.ErrConsumerDeleted,
		jetstream.ErrNoStreamResponse} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// deletionSweep is how often a serving worker asks JetStream for its streams and consumer
// whether or not an advisory announced a deletion: JetStream queues the advisory on the deleted
// stream's own sender, which stops with the stream, and sometimes never sends it.
const deletionSweep = 5 * time.Second

// watchDeletions re-creates a stream or the consumer as soon as JetStream announces its
// deletion, and at each deletionSweep, until ctx ends: the events stream, written with a plain
// publish, fails nothing the worker would notice when it is gone.
func (w *Worker) watchDeletions(ctx context.Context, lost <-chan struct{}) error {
	ch := make(chan *nats.Msg, 16)
	for _, subj := range []string{
		"$JS.EVENT.ADVISORY.STREAM.DELETED." + w.cfg.Stream,
		"$JS.EVENT.ADVISORY.STREAM.DELETED." + w.cfg.DLQStream,
		"$JS.EVENT.ADVISORY.STREAM.DELETED." + w.cfg.EventsStream,
		"$JS.EVENT.ADVISORY.CONSUMER.DELETED." + w.cfg.Stream + "." + w.cfg.Consumer,
	} {
		sub, err := w.nc.ChanSubscribe(subj, ch)
		if err != nil {
			return err
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	sweep := time.NewTicker(deletionSweep)
	defer sweep.Stop()
	for {
		var cause error
		select {
		case <-ctx.Done():
			return nil
		case m := <-ch:
			if failpoint.Inject("ingest.deletion_advisory") != nil {
				continue // armed: the advisory is lost, as JetStream sometimes loses it
			}
			cause = fmt.Errorf("ingest: JetStream announced a deletion on %s", m.Subject)
		case <-sweep.C:
			// A lookup JetStream does not answer tells nothing here: the pulls and the next
			// sweep will.
			if lacking, err := w.missing(ctx); err != nil || len(lacking) == 0 {
				continue
			}
			cause = errors.New("ingest: JetStream no longer has a stream or the consumer (no deletion advisory came)")
		}
		if w.restore(ctx, lost, w.recreating, cause, false) {
			w.recreating.ok()
		}
	}
}

// streak follows one run of failures of something the worker needs in order to take messages
// (what: its fetches, re-creating its streams, the lease bucket), as budget does for one
// message: past FetchGrace /readyz says so, past RetryBudget the worker reports itself stalled
// (an error log at each attempt, /readyz "stalled: …", omnigraph_stalled,
// omnigraph_retry_budget_exhausted_total{action="stalled"}) until the thing works again.
type streak struct {
	w    *Worker
	what string

	mu       sync.Mutex
	since    time.Time // the first failure; zero while it works
	attempts int
	stalled  bool
}

func newStreak(w *Worker, what string) *streak { return &streak{w: w, what: what} }

// fail records a failed attempt.
func (s *streak) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	if s.since.IsZero() {
		s.since = time.Now()
	}
	failing, budget := time.Since(s.since), s.w.cfg.RetryBudget
	in := intake{since: s.since, attempts: s.attempts, err: boundedText(err.Error())}
	if failing >= budget {
		if !s.stalled {
			s.stalled = true
			s.w.metrics.retryBudgetSpent("stalled")
		}
		in.stalled = fmt.Sprintf("%s failing since %s (%d attempts, retry budget %s): %s", s.what, s.since.UTC().Format(time.RFC3339),
			s.attempts, budget, in.err)
		s.w.log.Error("stalled: retry budget spent: the worker cannot take messages; tried again", zap.String("what", s.what),
			zap.Duration("failing_for", failing), zap.Int("attempts", s.attempts), zap.Error(err))
	}
	s.w.metrics.setIntake(s.what, &in)
}

// wait is how long to wait before the next attempt, next by the backoff: no longer than until
// the budget runs out, so that a stall is reported when it does and not up to RetryMax later.
func (s *streak) wait(next time.Duration) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stalled || s.since.IsZero() {
		return next
	}
	return max(min(next, time.Until(s.since.Add(s.w.cfg.RetryBudget))), time.Millisecond)
}

func (s *streak) isStalled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stalled
}

// ok ends the streak: the thing works again.
func (s *streak) ok() { s.end(true) }

// reset ends the streak without saying it works: the worker stopped needing it (it stopped
// consuming).
func (s *streak) reset() { s.end(false) }

func (s *streak) end(works bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.since.IsZero() {
		return
	}
	if s.stalled && works {
		s.w.log.Info("stall over", zap.String("what", s.what), zap.Int("attempts", s.attempts), zap.Duration("failed_for", time.Since(s.since)))
	}
	s.since, s.attempts, s.stalled = time.Time{}, 0, false
	s.w.metrics.setIntake(s.what, nil)
}

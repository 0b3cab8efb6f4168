package ingest

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// errClass is what retrying a message that failed with an error can achieve.
type errClass int

const (
	// classUnknown: not recognised; retried in place within the retry budget, then
	// dead-lettered as retry_exhausted.
	classUnknown errClass = iota
	// classTransient: the store, NATS or a concurrent writer is in the way, not the message;
	// retried in place for as long as it takes, reported as a stall past the budget.
	classTransient
	// classRefused: the store refuses a key of this message for good; dead-lettered at once
	// as storage_refused.
	classRefused
)

func (c errClass) String() string {
	return [...]string{"unknown", "transient", "refused"}[c]
}

// classify sorts an error that is neither permanent nor one that needs an operator (the
// catalogue of graph/errs decides those before).
func classify(err error) errClass {
	switch storage.Classify(err) {
	case storage.Refused:
		return classRefused
	case storage.Transient:
		return classTransient
	}
	switch errs.Kind(err) {
	case errs.KindRecoveryRequired, errs.KindReadSetChanged, errs.KindPublishedDatasetVersionMismatch:
		return classTransient
	}
	for _, e := range []error{nats.ErrTimeout, nats.ErrConnectionClosed, nats.ErrDisconnected, nats.ErrNoResponders, ErrLeaseLost} {
		if errors.Is(err, e) {
			return classTransient
		}
	}
	return classUnknown
}

// storageRefused is the dead-letter cause of a refused storage call, naming the operation and
// key when the error says them.
func storageRefused(err error) error {
	r := &errs.StorageRefused{Reason: err.Error(), Cause: err}
	var oe *storage.OpError
	if errors.As(err, &oe) {
		r.Op, r.Key, r.Reason = oe.Op, oe.Key, oe.Err.Error()
	}
	return r
}

// budget follows one message's failed attempts against Config.RetryBudget.
type budget struct {
	w        *Worker
	seq      uint64
	since    time.Time
	attempts int
	stalled  bool
	// operator is the kind of the error holding the message until an operator fixes the
	// graph; "" when none is.
	operator string
}

// failed records a failed attempt and returns the cause to dead-letter the message with, or
// nil to retry it in place: a refused storage key at once, an unknown error once the budget is
// spent. A known-transient error past the budget is retried still, and the worker is reported
// stalled (error log, /readyz, omnigraph_stalled) until the message gets through.
func (b *budget) failed(err error) error {
	b.attempts++
	if b.since.IsZero() {
		b.since = time.Now()
	}
	class := classify(err)
	if class == classRefused {
		return storageRefused(err)
	}
	spent := time.Since(b.since)
	if spent < b.w.cfg.RetryBudget {
		return nil
	}
	if class == classUnknown {
		b.w.metrics.retryBudgetSpent("dead_lettered")
		b.w.log.Error("retry budget spent on an error not known to be transient: dead-lettering the message", zap.Uint64("seq", b.seq),
			zap.Duration("retry_budget", b.w.cfg.RetryBudget), zap.Int("attempts", b.attempts), zap.Error(err))
		return &errs.RetryExhausted{Budget: b.w.cfg.RetryBudget.String(), FailingFor: spent.Round(time.Millisecond).String(),
			Attempts: b.attempts, Last: boundedText(err.Error())}
	}
	b.stall(err, "with a transient error, retried in place")
	return nil
}

// stall reports the worker stalled on this message (what says how), counting the stall once.
func (b *budget) stall(err error, what string) {
	if !b.stalled {
		b.stalled = true
		b.w.metrics.retryBudgetSpent("stalled")
	}
	reason := fmt.Sprintf("stream seq %d failing since %s (%d attempts, retry budget %s) %s: %s",
		b.seq, b.since.UTC().Format(time.RFC3339), b.attempts, b.w.cfg.RetryBudget, what, boundedText(err.Error()))
	b.w.metrics.setStalled(reason)
	b.w.log.Error("stalled: retry budget spent on a transient error; the message is held and retried", zap.Uint64("seq", b.seq),
		zap.String("what", what), zap.Duration("failing_for", time.Since(b.since)), zap.Int("attempts", b.attempts), zap.Error(err))
}

// failedDeadLetter records a dead letter JetStream did not accept: it is always tried again
// (the message must not go before it is kept somewhere), and past the budget the worker says
// it is stalled.
func (b *budget) failedDeadLetter(err error) {
	b.attempts++
	if b.since.IsZero() {
		b.since = time.Now()
	}
	if time.Since(b.since) >= b.w.cfg.RetryBudget {
		b.stall(err, "because its dead letter is not accepted")
	}
}

// needsOperator records an attempt that failed with an error the catalogue says needs an
// operator: the graph is at fault, not the message. The worker stops consuming at once and
// says so (error log, /readyz 503 "operator required: <kind>: …", omnigraph_operator_required
// and omnigraph_stalled); the message is held, neither dead-lettered nor given back, and tried
// again every retryIn so that an operator's fix is noticed. The retry budget does not run
// meanwhile: it is for errors that may pass by themselves.
func (b *budget) needsOperator(err error, retryIn time.Duration) {
	b.attempts++
	kind := errs.Kind(err)
	b.operator = kind
	reason := fmt.Sprintf("%s: %s (stream seq %d held, %d attempts)", kind, boundedText(err.Error()), b.seq, b.attempts)
	b.w.metrics.setOperator(kind, reason)
	b.w.log.Error("operator required: the graph needs an operator before this message can be applied; it is held and tried again",
		zap.String("kind", kind), zap.Uint64("seq", b.seq), zap.Int("attempts", b.attempts), zap.Duration("retry_in", retryIn), zap.Error(err))
}

// operatorDone clears the operator hold: the last attempt failed otherwise (what says so), or
// the message went through or back to the stream.
func (b *budget) operatorDone(what string) {
	if b.operator != "" {
		b.w.metrics.setOperator("", "")
		b.w.log.Info("operator hold over: "+what, zap.String("kind", b.operator), zap.Uint64("seq", b.seq), zap.Int("attempts", b.attempts))
		b.operator = ""
	}
}

// end clears a stall and an operator hold when the message got through (or went back to the
// stream).
func (b *budget) end() {
	b.operatorDone("the message went through or back to the stream")
	if b.stalled {
		b.w.metrics.setStalled("")
		b.w.log.Info("stall over", zap.Uint64("seq", b.seq), zap.Int("attempts", b.attempts))
	}
}

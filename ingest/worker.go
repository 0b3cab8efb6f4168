package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// Worker consumes one graph's ingest subject and applies each message as one graph commit.
type Worker struct {
	cfg     Config
	nc      *nats.Conn
	js      jetstream.JetStream
	g       *engine.Graph
	log     *zap.Logger // base, with the epoch of the lease in use
	base    *zap.Logger // the logger New was given, with the graph
	cons    jetstream.Consumer
	lease   *Lease
	metrics *Metrics
	// setupMu makes re-creations of what JetStream lost one at a time (restore.go).
	setupMu sync.Mutex
	// fetching follows the fetches' failures, recreating those of re-creating a stream whose
	// deletion JetStream announced (restore.go).
	fetching, recreating *streak
	// compactPoke wakes the compactor (compact.go) after a commit.
	compactPoke chan struct{}
	// compacting is what the compaction under way is counted to hold, which the pipeline's
	// bound on what is in flight includes.
	compacting atomic.Int64
	// acks acknowledges committed messages beside the next commit (acker.go); one per Run.
	acks *acker
	// streamCreated is the ingest stream's incarnation (its creation time, Unix ns), which
	// position-keyed receipts carry; refreshStreamIdentity (apply.go) sets it.
	streamCreated atomic.Int64
}

// UseMetrics records this worker's outcomes in m.
func (w *Worker) UseMetrics(m *Metrics) { w.metrics = m }

// UseLease fences every write with the graph's single-writer lease and stops Run when it is
// lost. A worker that takes its graph over again after losing it logs the new epoch only.
func (w *Worker) UseLease(l *Lease) {
	w.lease = l
	w.g.SetFence(l.Check)
	w.log = w.base.With(zap.Uint64("epoch", l.Epoch()))
	w.metrics.leaseAcquired(l.Epoch())
}

func (w *Worker) leaseLost() bool {
	if w.lease == nil {
		return false
	}
	select {
	case <-w.lease.Lost():
		return true
	default:
		return false
	}
}

// New prepares a worker; Setup creates its streams and consumer.
func New(nc *nats.Conn, g *engine.Graph, cfg Config, log *zap.Logger) (*Worker, error) {
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	log = log.With(zap.String("graph", cfg.Graph))
	w := &Worker{cfg: cfg, nc: nc, js: js, g: g, log: log, base: log, compactPoke: make(chan struct{}, 1)}
	w.fetching, w.recreating = newStreak(w, "fetches"), newStreak(w, "re-creating lost streams")
	// A message is acknowledged once its commit is visible: the deletion of the commit's
	// sidecar runs beside the next message (engine/retire.go).
	if g != nil {
		g.RetireInBackground()
	}
	return w, nil
}

// Config is the effective configuration (defaults filled in).
func (w *Worker) Config() Config { return w.cfg }

// Setup creates or updates the ingest, dead-letter and events streams and the durable consumer.
// One consumer keeps a graph's batches in stream order: with one message in flight by
// MaxAckPending 1, with a pipeline (PipelineDepth > 1) by the order check of pipeline.go.
func (w *Worker) Setup(ctx context.Context) error {
	for _, st := range w.streamConfigs() {
		if err := w.ensureStream(ctx, st.cfg); err != nil {
			return fmt.Errorf("ingest: %s: %w", st.piece, err)
		}
	}
	cons, err := w.ensureConsumer(ctx)
	if err != nil {
		return err
	}
	w.cons = cons
	// Read after the consumer exists: a consumer dies with its stream, so what it delivers
	// comes from the stream read here.
	return w.refreshStreamIdentity(ctx)
}

// stream is one of the streams Setup makes.
type stream struct {
	piece
	cfg jetstream.StreamConfig
}

// streamConfigs are the streams Setup makes, in its order; re-creating one that JetStream lost
// (restore.go) makes it from here too.
func (w *Worker) streamConfigs() []stream {
	return []stream{
		{piece{"stream", w.cfg.Stream}, jetstream.StreamConfig{
			Name: w.cfg.Stream, Subjects: w.cfg.consumed(),
			Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy, MaxMsgSize: MaxMessageBytes,
			MaxAge: w.cfg.StreamMaxAge, MaxBytes: maxBytes(w.cfg.StreamMaxBytes),
		}},
		{piece{"dlq_stream", w.cfg.DLQStream}, jetstream.StreamConfig{
			Name: w.cfg.DLQStream, Subjects: []string{"omnigraph." + w.cfg.Graph + ".dlq.>"},
			Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy, MaxMsgSize: MaxMessageBytes,
			MaxAge: w.cfg.DLQMaxAge, MaxBytes: maxBytes(w.cfg.DLQMaxBytes),
		}},
		// Events are kept for events_max_age, deduplicated by the request they report.
		{piece{"events_stream", w.cfg.EventsStream}, jetstream.StreamConfig{
			Name: w.cfg.EventsStream, Subjects: []string{w.cfg.EventSubject()},
			Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy, MaxAge: w.cfg.EventsMaxAge,
		}},
	}
}

// ensureConsumer creates or updates the durable consumer. The handle it returns names the
// consumer by stream and name only, so the one Setup kept pulls from a consumer made again.
func (w *Worker) ensureConsumer(ctx context.Context) (jetstream.Consumer, error) {
	cons, err := w.js.CreateOrUpdateConsumer(ctx, w.cfg.Stream, jetstream.ConsumerConfig{
		Durable: w.cfg.Consumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: w.cfg.AckWait,
		MaxDeliver: w.cfg.MaxDeliver, MaxAckPending: w.cfg.PipelineDepth, FilterSubjects: w.cfg.consumed(),
	})
	if err != nil {
		return nil, fmt.Errorf("ingest: consumer %s: %w", w.cfg.Consumer, err)
	}
	return cons, nil
}

// ensureStream creates the stream or updates it to cfg. JetStream's create-or-update is a
// lookup followed by a create, so when someone else (a producer's tooling, a second worker
// starting at the same moment) creates the stream in between, the create fails with "stream
// name already in use"; the stream now exists, and a second create-or-update updates it.
// The stream gets the configured replicas and placement; one JetStream cannot honour is a
// *PlacementError.
func (w *Worker) ensureStream(ctx context.Context, cfg jetstream.StreamConfig) error {
	cfg.Replicas, cfg.Placement = w.cfg.Replication.replicas(), w.cfg.Replication.placement()
	_, err := w.js.CreateOrUpdateStream(ctx, cfg)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		_, err = w.js.CreateOrUpdateStream(ctx, cfg)
	}
	return placementError(err, cfg.Name, w.cfg.Replication)
}

// Run consumes until ctx is cancelled, then stops fetching, lets the in-flight message finish
// (its commit, ack and event) and returns. It returns ErrLeaseLost when the lease goes.
func (w *Worker) Run(ctx context.Context) error {
	// A worker that consumed before (it lost its lease and took it again) first looks whether
	// JetStream still has what Setup made: a broker that lost its store lost the lease bucket
	// with it, and the lease alone is made again by taking it.
	check := errConsumingAgain
	if w.cons == nil {
		if err := w.Setup(ctx); err != nil {
			return err
		}
		check = nil
	}
	var lost <-chan struct{}
	if w.lease != nil {
		lost = w.lease.Lost()
	}
	w.log.Info("consuming", zap.String("subject", w.cfg.IngestSubject()), zap.String("merge_subject", w.cfg.MergeSubject()), zap.String("stream", w.cfg.Stream))
	// The watchers end with this Run, whatever ends it (a lost lease leaves ctx alive), and
	// Run returns only after they did: a Run that follows never shares the worker with them.
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watchers sync.WaitGroup
	// What no longer consumes holds no streak; run last, once the watchers are done. Run
	// returns once the sidecars of its commits are deleted too.
	defer func() { w.fetching.reset(); w.recreating.reset(); w.g.WaitRetired() }()
	defer func() { stopWatch(); watchers.Wait() }()
	watchers.Go(func() {
		if err := w.WatchMaxDeliveries(watchCtx); err != nil {
			w.log.Warn("max-deliver advisories not watched", zap.Error(err))
		}
	})
	watchers.Go(func() {
		if err := w.watchDeletions(watchCtx, lost); err != nil {
			w.log.Warn("stream and consumer deletions not watched", zap.Error(err))
		}
	})
	w.metrics.SetLease(w.lease != nil)
	// Not ready while JetStream says what it consumes from is missing and does not make it
	// again: /readyz says why.
	if check != nil && !w.restore(ctx, lost, w.fetching, check, true) {
		return w.stopped()
	}
	check = nil
	if w.metrics != nil {
		w.metrics.SetReady(true)
		defer w.metrics.SetReady(false)
		watchers.Go(func() { w.watchPending(watchCtx) })
	}
	watchers.Go(func() { pprof.Do(watchCtx, pprof.Labels(ProfileLabel, "maintenance"), w.compactor) })
	// The acker outlives the consumer within this Run: what it has queued is acknowledged
	// before Run returns.
	w.acks = startAcker(w.cfg.PipelineDepth, w.cfg.AckWait, w.metrics.ackFailed)
	defer w.acks.stop()
	consume := w.consume
	if w.cfg.PipelineDepth > 1 {
		consume = w.pipeline
	}
	for {
		var err error
		if check == nil || w.restore(ctx, lost, w.fetching, check, true) {
			// Every (re)opened pull reads the stream's incarnation again: a standby's Setup may
			// be long past, and a stream re-created meanwhile numbers its messages from 1 again.
			if err = w.refreshStreamIdentity(ctx); err == nil {
				err = consume(ctx, lost)
			}
		}
		if w.leaseLost() || ctx.Err() != nil {
			return w.stopped()
		}
		// The pull subscription broke (server restart, missed heartbeats, consumer moved, the
		// stream or the consumer gone): make sure both are there, open a new one and go on
		// from the consumer's ack floor.
		w.log.Warn("pull subscription ended; reopening", zap.Error(err))
		check = err
		select {
		case <-ctx.Done():
		case <-lost:
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// stopped is what Run returns once its context ended or the lease was lost.
func (w *Worker) stopped() error {
	if w.leaseLost() {
		w.log.Warn("lease lost: stopped consuming")
		return ErrLeaseLost
	}
	w.log.Info("drained")
	return nil
}

// errConsumingAgain is why Run looks for its streams and consumer before it consumes again.
var errConsumingAgain = errors.New("ingest: consuming again after the lease was lost")

// consume pulls messages one at a time until the iterator fails or stop or lease loss.
func (w *Worker) consume(ctx context.Context, lost <-chan struct{}) error {
	it, err := w.cons.Messages(jetstream.PullMaxMessages(1), jetstream.PullExpiry(consumeExpiry))
	if err != nil {
		w.fetching.fail(err)
		return err
	}
	// The iterator reports a consumer that stopped answering (a missed heartbeat) within an
	// expiry and says nothing while one answers with nothing to deliver: an iterator that
	// reported nothing for two expiries is fetching. mu keeps that after the failures.
	var mu sync.Mutex
	failedAt, ended := time.Now(), false
	failed := func(err error, end bool) {
		mu.Lock()
		defer mu.Unlock()
		failedAt, ended = time.Now(), end
		w.fetching.fail(err)
	}
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		defer it.Stop()
		tick := time.NewTicker(consumeExpiry)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-lost:
				return
			case <-stopped:
				return
			case <-tick.C:
				mu.Lock()
				if !ended && time.Since(failedAt) >= 2*consumeExpiry {
					w.fetching.ok()
				}
				mu.Unlock()
			}
		}
	}()
	for {
		msg, err := it.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) || ctx.Err() != nil || w.leaseLost() {
				return err
			}
			end := errors.Is(err, jetstream.ErrNoHeartbeat) || errors.Is(err, nats.ErrConnectionClosed) ||
				errors.Is(err, jetstream.ErrServerShutdown) || gone(err)
			failed(err, end)
			if end {
				return err
			}
			w.log.Warn("fetch", zap.Error(err))
			continue
		}
		w.fetching.ok()
		w.handle(ctx, msg, nil)
	}
}

// outcome names how a message ended, for logs and metrics.
type outcome string

const (
	outcomeCommitted  outcome = "committed"
	outcomeDuplicate  outcome = "already_applied"
	outcomeDeadLetter outcome = "dead_lettered"
	outcomeRequeued   outcome = "requeued"
	outcomeEmpty      outcome = "empty" // a batch of no records: acknowledged, nothing committed
)

// outcomes are every outcome, the label values of omnigraph_messages_total.
var outcomes = []outcome{outcomeCommitted, outcomeDuplicate, outcomeDeadLetter, outcomeRequeued, outcomeEmpty}

// handle processes one message to a final outcome. Its work runs on a context that the stop
// signal does not cancel, so a commit under way is finished and acknowledged before Run
// returns; only the waits between retries watch stop.
func (w *Worker) handle(stop context.Context, msg jetstream.Msg, st *staged) outcome {
	meta, err := msg.Metadata()
	if err != nil {
		w.log.Error("message without metadata", zap.Error(err))
		_ = msg.Term()
		return outcomeDeadLetter
	}
	log := w.log.With(zap.Uint64("seq", meta.Sequence.Stream), zap.Uint64("delivery", meta.NumDelivered))
	work, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.heartbeat(work, msg)
	start := time.Now()
	out, res, err := w.process(stop, work, msg, meta, st)
	took := time.Since(start)
	if out == outcomeCommitted {
		w.reportIndexWork()
		w.pokeCompactor()
	}
	rows, reason := 0, ""
	if res != nil {
		rows = res.entities
	}
	if out == outcomeDeadLetter {
		reason = deadLetterReason(errs.Kind(err))
		if w.lastDelivery(meta) {
			reason = errs.ReasonMaxDeliver
		}
	}
	w.metrics.message(out, rows, len(msg.Data()), took, reason)
	fields := []zap.Field{zap.String("outcome", string(out)), zap.Duration("took", took)}
	if res != nil {
		fields = append(fields, zap.String("kind", res.event.Kind), zap.String("commit", res.event.GraphCommitID), zap.Int("entities", res.entities))
	}
	if err != nil {
		fields = append(fields, zap.Error(err))
	}
	if out == outcomeDeadLetter {
		// A dead letter is a batch that will not be applied: someone must look at it.
		log.Warn("message", append(fields, zap.String("reason", reason))...)
		return out
	}
	log.Info("message", fields...)
	return out
}

func (w *Worker) heartbeat(ctx context.Context, msg jetstream.Msg) {
	t := time.NewTicker(w.cfg.AckWait / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = msg.InProgress()
		}
	}
}

// staged is what a message makes of itself before it is applied: its receipt and the
// request parsed from its body (or why the body is refused). It reads nothing of the graph.
type staged struct {
	receipt *publisher.Receipt
	apply   func(context.Context) (*applied, error)
	err     error
	// bytes is about how much memory the staged message holds beside its body (records,
	// built rows), which a pipeline counts against its bound.
	bytes int64
	// release gives what apply holds back to where it came from (a load's records to the
	// framer); nil when there is nothing to give back.
	release func()
}

// done is called once the message is applied or given up on, when apply will not run again:
// what it holds goes back for the next message.
func (st *staged) done() {
	if st != nil && st.release != nil {
		st.release()
		st.release = nil
	}
}

// stage hashes and parses one message. ahead says the message waits behind others in the
// pipeline: a load then builds its rows too, which Load uses if the schema is unchanged.
func (w *Worker) stage(ctx context.Context, msg jetstream.Msg, meta *jetstream.MsgMetadata, ahead bool) *staged {
	// The payload is hashed for the receipt while the body is framed (32 MiB take ~20 ms).
	sum := make(chan [sha256.Size]byte, 1)
	go func() { sum <- sha256.Sum256(msg.Data()) }()
	st := &staged{receipt: w.receiptOf(msg, meta)}
	switch msg.Subject() {
	case w.cfg.MergeSubject():
		st.apply, st.err = w.mergeRequest(msg, st.receipt)
	case w.cfg.MaintenanceSubject():
		st.apply, st.err = w.maintenanceRequest(msg)
	case w.cfg.SchemaSubject():
		st.apply, st.err = w.schemaRequest(msg, st.receipt)
	default:
		st.apply, st.release, st.bytes, st.err = w.loadRequest(ctx, msg, st.receipt, ahead)
	}
	digest := <-sum
	st.receipt.PayloadSHA256 = hex.EncodeToString(digest[:])
	return st
}

// process applies one message; st is its stage when the pipeline made it ahead (nil: staged
// here).
func (w *Worker) process(stop, ctx context.Context, msg jetstream.Msg, meta *jetstream.MsgMetadata, st *staged) (outcome, *applied, error) {
	if w.lastDelivery(meta) {
		// Delivered this often without an ack: something kills the worker on this message.
		err := &errs.InvalidInput{Reason: fmt.Sprintf("delivered %d times without being acknowledged (max_deliver %d)", meta.NumDelivered, w.cfg.MaxDeliver)}
		return w.deadLetter(stop, ctx, msg, meta, errs.ReasonMaxDeliver, err)
	}
	if st == nil {
		st = w.stage(ctx, msg, meta, false)
		defer st.done()
	}
	receipt, apply := st.receipt, st.apply
	if st.err != nil {
		return w.deadLetter(stop, ctx, msg, meta, "", st.err)
	}
	retry := w.backoff()
	spent := &budget{w: w, seq: meta.Sequence.Stream}
	defer spent.end()
	for {
		res, err := apply(ctx)
		if w.leaseLost() {
			// Another worker owns the graph now; it will get this message after AckWait.
			return outcomeRequeued, nil, ErrLeaseLost
		}
		var rr *errs.RecoveryRequired
		switch {
		case err == nil:
			// The commit is visible now (apply returns after its publish): the lag is counted
			// from JetStream's publish to here, before the ack.
			w.metrics.visible(meta.Timestamp, time.Now(), res)
			if err := failpoint.Inject("ingest.before_ack"); err != nil {
				return outcomeRequeued, res, err
			}
			// Acknowledged beside the next message's commit (acker.go), its event after the ack.
			w.acks.ack(ackJob{msg: msg, log: w.log.With(zap.Uint64("seq", meta.Sequence.Stream)),
				then: func() { w.publishEvent(res, receipt) }})
			switch {
			case res.event.AlreadyApplied:
				return outcomeDuplicate, res, nil
			case res.event.Outcome == OutcomeEmpty:
				return outcomeEmpty, res, nil
			}
			return outcomeCommitted, res, nil
		case errs.Permanent(err):
			return w.deadLetter(stop, ctx, msg, meta, "", err)
		case errors.As(err, &rr):
			// Resolve the intent, then retry this message without burning a delivery.
			w.metrics.recovered()
			if _, rerr := w.g.Recover(ctx); rerr == nil {
				continue
			} else {
				err = rerr
			}
		}
		var wait time.Duration
		if errs.NeedsOperator(err) {
			// Nothing but an operator gets past it, so the retries only watch for the fix:
			// at the backoff's cap from the first, not from 100 ms up.
			wait = w.cfg.RetryMax
			if kind := errs.Kind(err); spent.operator != kind {
				// A hold begins (or another kind holds it): said once, not at each try.
				w.held(msg, receipt, err, spent.attempts+1)
			}
			spent.needsOperator(err, wait)
		} else {
			spent.operatorDone("the error that needed an operator is gone")
			if cause := spent.failed(err); cause != nil {
				return w.deadLetter(stop, ctx, msg, meta, "", cause)
			}
			wait = retry.NextBackOff()
			if !spent.stalled {
				w.log.Warn("failure, retrying in place", zap.Uint64("seq", meta.Sequence.Stream), zap.Stringer("class", classify(err)),
					zap.Duration("in", wait), zap.Error(err))
			}
		}
		select {
		case <-stop.Done():
			_ = msg.NakWithDelay(wait)
			return outcomeRequeued, nil, err
		case <-time.After(wait):
		}
	}
}

// lastDelivery reports whether the message is on its last delivery, which the worker
// dead-letters as max_deliver instead of applying once more.
func (w *Worker) lastDelivery(meta *jetstream.MsgMetadata) bool {
	return meta.NumDelivered >= uint64(w.cfg.MaxDeliver) && meta.NumDelivered > 1
}

// deadLetterReason is the catalogue's dead-letter reason of kind (the kind itself for a kind
// the catalogue does not dead-letter under a reason, as before there was one).
func deadLetterReason(kind string) string {
	if k, ok := errs.Lookup(kind); ok && k.DeadLetter != "" {
		return k.DeadLetter
	}
	return kind
}

// deadLetter publishes the message to omnigraph.<graph>.dlq.<reason> with the original body and
// headers plus the error, waits for the stream to accept it, and only then terminates it. A
// dead letter JetStream does not accept is tried again in place (the heartbeat keeps the
// message), never given up: a Nak would spend a delivery, and once max_deliver is spent the
// server moves the ack floor past a message that is then in neither the graph nor a dead-letter
// subject. On stop the message goes back to the stream as it is.
func (w *Worker) deadLetter(stop, ctx context.Context, msg jetstream.Msg, meta *jetstream.MsgMetadata, reason string, cause error) (outcome, *applied, error) {
	kind := errs.Kind(cause)
	if reason == "" {
		reason = deadLetterReason(kind)
	}
	l := letter{reason: reason, kind: kind, text: cause.Error(), detail: boundedDetail(errs.Detail(cause)), data: msg.Data(), header: msg.Headers(),
		stream: meta.Stream, subject: msg.Subject(), seq: meta.Sequence.Stream, deliveries: meta.NumDelivered}
	retry := w.backoff()
	spent := &budget{w: w, seq: meta.Sequence.Stream}
	defer spent.end()
	var ack *jetstream.PubAck
	var omitted bool
	for {
		var err error
		ack, omitted, err = w.publishDeadLetter(ctx, l)
		if err == nil {
			break
		}
		if w.leaseLost() {
			return outcomeRequeued, nil, ErrLeaseLost
		}
		spent.failedDeadLetter(err)
		var recreate error
		if gone(err) {
			// The dead-letter stream may have gone with the broker's store or an operator's
			// delete: nothing else makes it again while this message is held.
			recreate = w.reconcile(ctx, err, false)
		}
		wait := retry.NextBackOff()
		w.log.Error("dead letter not accepted; the message is held and the dead letter tried again", zap.Uint64("seq", meta.Sequence.Stream),
			zap.String("reason", reason), zap.Duration("in", wait), zap.Error(err), zap.NamedError("cause", cause), zap.NamedError("recreate", recreate))
		select {
		case <-stop.Done():
			_ = msg.NakWithDelay(wait)
			return outcomeRequeued, nil, fmt.Errorf("dead-letter publish: %w (cause: %v)", err, cause)
		case <-time.After(wait):
		}
	}
	// The dead letter is kept: its event says where, whether the Term below gets through or
	// the message comes again (its dead letter and event are then duplicates of these).
	w.deadLettered(l, w.receiptOf(msg, meta), ack, omitted)
	if err := msg.TermWithReason(reason); err != nil {
		return outcomeDeadLetter, nil, fmt.Errorf("term after dead-letter: %w", err)
	}
	return outcomeDeadLetter, nil, cause
}

// backoff is the in-place retry schedule: jittered, doubling from 100 ms to RetryMax.
func (w *Worker) backoff() *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 100*time.Millisecond, w.cfg.RetryMax, 0
	b.Reset()
	return b
}

// letter is what a dead letter records about its message and why it failed.
type letter struct {
	reason, kind, text string
	detail             []byte // JSON of the typed error's fields
	data               []byte
	header             nats.Header
	stream, subject    string
	seq, deliveries    uint64
}

// publishDeadLetter publishes l and waits for the dead-letter stream to accept it. A letter too
// large to go whole goes by reference: without the body, which stays in the ingest stream at
// its original sequence, where the replay tool fetches it. "Too large" is measured before the
// publish against both limits a message meets, the connection's max_payload (the server's
// setting, which may be as low as the body plus a few hundred bytes) and the store's 32 MiB
// record, counting the error headers the letter adds; a refusal for size that gets past the
// measure (a server limit changed under us) still falls back. It returns JetStream's ack and
// whether the body went by reference.
func (w *Worker) publishDeadLetter(ctx context.Context, l letter) (*jetstream.PubAck, bool, error) {
	publish := func(m *nats.Msg) (*jetstream.PubAck, error) {
		return transfer(ctx, func(ctx context.Context) (*jetstream.PubAck, error) { return w.js.PublishMsg(ctx, m) })
	}
	if full := w.deadLetterMsg(l); fits(full, w.nc.MaxPayload()) {
		if ack, err := publish(full); !tooLarge(err) {
			return ack, false, err
		}
	}
	out := w.deadLetterMsg(l)
	out.Data = nil
	out.Header.Set(HeaderBodyOmitted, strconv.Itoa(len(l.data)))
	ack, err := publish(out)
	return ack, true, err
}

// fits reports whether m can be published whole: body and header block within maxPayload (what
// the client checks, and the server after it), and within one file-store record.
func fits(m *nats.Msg, maxPayload int64) bool {
	return int64(len(m.Data)+headerBlockBytes(m.Header)) <= maxPayload && len(m.Data) <= MaxBodyBytes(m.Subject, m.Header)
}

// deadLetterMsg builds the message for omnigraph.<graph>.dlq.<reason>: the original body and
// headers plus the error and the message's origin. Its id (DeadLetterMsgID) makes a repeated
// dead-lettering of the same message a JetStream duplicate.
func (w *Worker) deadLetterMsg(l letter) *nats.Msg {
	out := nats.NewMsg(w.cfg.DLQSubject(l.reason))
	out.Data = l.data
	for k, vs := range l.header {
		for _, v := range vs {
			out.Header.Add(k, v)
		}
	}
	out.Header.Del(HeaderBodyOmitted) // only publishDeadLetter says a body went by reference
	out.Header.Set(HeaderErrorKind, l.kind)
	out.Header.Set(HeaderError, boundedText(l.text))
	out.Header.Set(HeaderErrorDetail, string(l.detail))
	out.Header.Set(HeaderOrigStream, l.stream)
	out.Header.Set(HeaderOrigSubject, l.subject)
	out.Header.Set(HeaderOrigSeq, strconv.FormatUint(l.seq, 10))
	out.Header.Set(HeaderDeliveries, strconv.FormatUint(l.deliveries, 10))
	out.Header.Set(HeaderDeadAt, time.Now().UTC().Format(time.RFC3339Nano))
	if id := l.header.Get(HeaderMsgID); id != "" && out.Header.Get(HeaderOrigMsgID) == "" {
		out.Header.Set(HeaderOrigMsgID, id) // a replayed batch already carries its producer's
	}
	out.Header.Set(HeaderMsgID, DeadLetterMsgID(l.stream, w.streamCreated.Load(), l.seq))
	return out
}

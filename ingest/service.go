package ingest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/internal/httpserve"
)

// DefaultLeaseTTL is the single-writer lease's TTL when NewService is given none: a standby
// takes over about this long after its leader stopped renewing.
const DefaultLeaseTTL = 10 * time.Second

// releaseTimeout bounds the lease release on the way out: a NATS that does not answer then
// only delays the takeover until the lease expires.
const releaseTimeout = 2 * time.Second

// Service is what `worker run` does for one graph: wait as a standby until it holds the
// graph's single-writer lease, run full recovery under it, consume until stopped, and go back
// to standby whenever the lease is lost; with the metrics and health HTTP server beside it.
type Service struct {
	w        *Worker
	g        *engine.Graph
	log      *zap.Logger
	metrics  *Metrics
	http     httpserve.Config
	leaseTTL time.Duration
	holder   string
	// bucket follows the lease bucket's failures to answer: a broker with JetStream off (or
	// its store gone and not yet back) leaves a worker that lost its lease a standby for good,
	// which must say so past the retry budget too.
	bucket *streak
}

type serviceOpts struct {
	log      *zap.Logger
	metrics  *Metrics
	http     httpserve.Config
	leaseTTL time.Duration
	holder   string
	// footprint, when set, gets the service's bound and its pipeline's count (WithFootprint).
	footprint *Footprint
}

// ServiceOpt configures NewService.
type ServiceOpt func(*serviceOpts) error

// WithLogger logs the service and its worker to l (default: nothing).
func WithLogger(l *zap.Logger) ServiceOpt {
	return func(o *serviceOpts) error {
		if l == nil {
			return errors.New("ingest: WithLogger(nil)")
		}
		o.log = l
		return nil
	}
}

// WithMetrics records the worker's metrics in m, served on the HTTP address (default: its own).
func WithMetrics(m *Metrics) ServiceOpt {
	return func(o *serviceOpts) error {
		if m == nil {
			return errors.New("ingest: WithMetrics(nil)")
		}
		o.metrics = m
		return nil
	}
}

// WithHTTP serves /metrics, /healthz and /readyz on addr while Run runs ("" serves nothing,
// the default). Run fails at once when addr cannot be listened on.
func WithHTTP(addr string) ServiceOpt {
	return func(o *serviceOpts) error { o.http.Addr = addr; return nil }
}

// WithHTTPListener serves the HTTP endpoints on ln instead of an address; Run closes it when
// it returns.
func WithHTTPListener(ln net.Listener) ServiceOpt {
	return func(o *serviceOpts) error {
		if ln == nil {
			return errors.New("ingest: WithHTTPListener(nil)")
		}
		o.http.Listener = ln
		return nil
	}
}

// WithProfiles also serves the Go runtime's profiles at /debug/pprof/ on the HTTP server
// (internal/profiling): off by default.
func WithProfiles(on bool) ServiceOpt {
	return func(o *serviceOpts) error { o.http.Profiles = on; return nil }
}

// WithLeaseTTL sets the single-writer lease's TTL (default DefaultLeaseTTL).
func WithLeaseTTL(d time.Duration) ServiceOpt {
	return func(o *serviceOpts) error {
		if d <= 0 {
			return fmt.Errorf("ingest: lease TTL %v: want a positive duration", d)
		}
		o.leaseTTL = d
		return nil
	}
}

// WithHolder names this process in the lease (default <hostname>:<pid>).
func WithHolder(h string) ServiceOpt {
	return func(o *serviceOpts) error {
		if h == "" {
			return errors.New("ingest: WithHolder(\"\")")
		}
		o.holder = h
		return nil
	}
}

// recoveryAttempts bounds the tries of a full recovery that fails for a reason other than the
// graph's damage (which holds for an operator instead) before Run gives up with RecoveryError.
const recoveryAttempts = 5

// RecoveryError is a full recovery that failed after the lease was taken, before consuming,
// recoveryAttempts times. The lease is released by then, so another worker may try.
type RecoveryError struct{ Err error }

func (e *RecoveryError) Error() string { return "recovery before consuming: " + e.Err.Error() }
func (e *RecoveryError) Unwrap() error { return e.Err }

// NewService prepares the service of graph g, opened read-only: it writes nothing before it
// holds the lease.
func NewService(nc *nats.Conn, g *engine.Graph, cfg Config, opts ...ServiceOpt) (*Service, error) {
	o := serviceOpts{log: zap.NewNop(), leaseTTL: DefaultLeaseTTL}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.holder == "" {
		host, _ := os.Hostname()
		o.holder = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if o.metrics == nil {
		o.metrics = NewMetrics()
	}
	w, err := New(nc, g, cfg, o.log)
	if err != nil {
		return nil, err
	}
	w.UseMetrics(o.metrics)
	w.cfg.footprint = o.footprint
	return &Service{w: w, g: g, log: o.log.With(zap.String("graph", w.cfg.Graph)), metrics: o.metrics,
		http: o.http, leaseTTL: o.leaseTTL, holder: o.holder, bucket: newStreak(w, "lease bucket")}, nil
}

// Config is the effective configuration (defaults filled in).
func (s *Service) Config() Config { return s.w.Config() }

// Metrics are the service's metrics.
func (s *Service) Metrics() *Metrics { return s.metrics }

// Run serves until ctx ends (nil: the message in flight finished, the lease released) or
// something fails that waiting cannot mend: streams or a lease bucket JetStream refuses (a
// *PlacementError, a conflicting configuration; a JetStream that does not answer is waited
// for), the HTTP address, a recovery (a *RecoveryError), a consumer that cannot go on. The
// lease is released and the HTTP server closed before it returns.
func (s *Service) Run(ctx context.Context) error {
	stopHTTP, err := s.serveHTTP()
	if err != nil {
		return err
	}
	defer stopHTTP()
	// A standby reserves its bound too: it may take the graph over at any moment.
	defer s.w.cfg.footprint.reserve(s.w.cfg.PipelineBytes)()
	if err := s.setup(ctx); err != nil || ctx.Err() != nil {
		return err
	}
	defer s.bucket.reset()
	for {
		lease, err := acquireLeaseLogged(ctx, s.w.js, s.w.cfg.Graph, s.holder, s.leaseTTL, s.w.cfg.Replication, func(heldBy string) {
			s.log.Info("waiting for the single-writer lease", zap.String("holder", s.holder), zap.String("held_by", heldBy))
		}, s.log)
		var pe *PlacementError
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &pe):
			return err
		default:
			// The bucket did not answer (on a cluster: its leader died and a new one is being
			// elected, or this connection is moving to another server). A standby waits that
			// out: exiting would leave the graph with no writer at all.
			s.bucket.fail(err)
			wait := s.bucket.wait(s.leaseTTL / 4)
			if !s.bucket.isStalled() {
				s.log.Warn("lease bucket unavailable; trying again", zap.Duration("in", wait), zap.Error(err))
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
			continue
		}
		s.bucket.ok()
		s.log.Info("lease acquired", zap.String("holder", s.holder), zap.Uint64("epoch", lease.Epoch()))
		err = s.lead(ctx, lease)
		s.metrics.SetLease(false)
		if errors.Is(err, ErrLeaseLost) {
			s.log.Warn("lease lost: back to standby", zap.NamedError("cause", lease.Err()))
			continue
		}
		s.release(lease)
		return err
	}
}

// setup makes the streams and the consumer (Worker.Setup), waiting out a JetStream that does
// not answer or says it cannot now: a cluster electing its leaders while a server is down, the
// connection moving to another server, JetStream off while its server restarts. A worker that
// exited then, standby or not, would leave the graph with no writer once JetStream is back;
// one waiting says why on /readyz and, past the retry budget, reports itself stalled. What
// waiting cannot mend (a placement JetStream cannot honour, a configuration that conflicts
// with a stream it has) ends Run. nil when ctx ended.
func (s *Service) setup(ctx context.Context) error {
	streams := newStreak(s.w, "stream setup")
	retry := s.w.backoff()
	for {
		err := s.w.Setup(ctx)
		switch {
		case err == nil:
			streams.ok()
			return nil
		case ctx.Err() != nil:
			streams.reset()
			return nil
		case !unavailable(err):
			streams.reset()
			return err
		}
		streams.fail(err)
		wait := streams.wait(retry.NextBackOff())
		if !streams.isStalled() {
			s.log.Warn("JetStream unavailable for the streams' setup; trying again", zap.Duration("in", wait), zap.Error(err))
		}
		select {
		case <-ctx.Done():
			streams.reset()
			return nil
		case <-time.After(wait):
		}
	}
}

// lead runs the graph under lease: full recovery (the only point where tables may be
// restored, so only with no other writer alive), then consumption until ctx ends or the
// lease is lost (ErrLeaseLost).
func (s *Service) lead(ctx context.Context, lease *Lease) error {
	s.w.UseLease(lease)
	retry := s.w.backoff()
	for attempt := 1; ; attempt++ {
		out, err := s.g.Recover(ctx)
		for _, o := range out {
			s.w.log.Info("recovered", zap.String("operation", o.OperationID), zap.String("action", o.Action), zap.String("commit", o.GraphCommitID))
		}
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrLeaseLost):
			return ErrLeaseLost
		case errs.NeedsOperator(err):
			// Damaged state (a sidecar or manifest that does not decode, drift) is the graph's
			// fault, not this process's: exiting would only restart into the same error and
			// hand the lease to a standby that meets it too. Hold with the lease kept, say so,
			// and try again until an operator has mended the graph.
			if err := s.holdForOperator(ctx, lease, err, attempt); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			continue
		case attempt < recoveryAttempts:
			// A storage or network failure (an object store's 500 while a killed writer's
			// request is still being settled, say) is tried again a few times before the lease
			// goes to another worker.
			wait := retry.NextBackOff()
			s.w.log.Warn("recovery before consuming failed; trying again", zap.Int("attempt", attempt), zap.Duration("in", wait), zap.Error(err))
			select {
			case <-ctx.Done():
				return nil
			case <-lease.Lost():
				return ErrLeaseLost
			case <-time.After(wait):
			}
			continue
		default:
			return &RecoveryError{Err: err}
		}
		if attempt > 1 {
			s.metrics.setOperator("", "")
			s.w.log.Info("operator hold over: recovery went through", zap.Int("attempts", attempt))
		}
		break
	}
	cfg := s.w.cfg
	s.w.log.Info("ready", zap.String("publish_to", cfg.IngestSubject()), zap.String("events", cfg.EventSubject()),
		zap.String("dead_letters", "omnigraph."+cfg.Graph+".dlq.>"))
	watch, stop := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); s.watchProgress(watch, lease, progressEvery) }()
	defer func() { stop(); <-watched }()
	return s.w.Run(ctx)
}

// progressEvery is how often the writer looks whether its consumer's ack floor moved.
const progressEvery = 10 * time.Second

// watchProgress says, every interval while the writer holds the lease, when its consumer's ack
// floor has not moved although messages wait (or when the consumer's state cannot be read): a
// writer that applies nothing says so and what it knows, instead of staying silent.
func (s *Service) watchProgress(ctx context.Context, lease *Lease, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	var floor uint64
	var since time.Time
	stuck := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-lease.Lost():
			return
		case <-t.C:
		}
		lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
		cons, err := s.w.js.Consumer(lctx, s.w.cfg.Stream, s.w.cfg.Consumer)
		cancel()
		if ctx.Err() != nil {
			return
		}
		renewed := zap.Duration("lease_expires_in", time.Until(lease.until()).Round(time.Millisecond))
		if err != nil {
			s.w.log.Warn("consumer state not read: cannot tell whether batches are applied", renewed, zap.Error(err))
			continue
		}
		info := cons.CachedInfo()
		waiting := info.NumPending + uint64(info.NumAckPending)
		switch {
		case info.AckFloor.Stream != floor || waiting == 0 || since.IsZero():
			if stuck {
				s.w.log.Info("applying again", zap.Uint64("ack_floor", info.AckFloor.Stream), zap.Duration("stuck_for", time.Since(since).Round(time.Millisecond)))
			}
			floor, since, stuck = info.AckFloor.Stream, time.Now(), false
		default:
			stuck = true
			s.w.log.Warn("no batch applied while batches wait", zap.Duration("for", time.Since(since).Round(time.Millisecond)),
				zap.Uint64("ack_floor", floor), zap.Uint64("pending", info.NumPending), zap.Int("ack_pending", info.NumAckPending),
				zap.Uint64("delivered", info.Delivered.Stream), zap.Int("redelivered", info.NumRedelivered), renewed,
				zap.Int("fetch_failures", failures(s.w.fetching)))
		}
	}
}

// holdForOperator reports a recovery that needs an operator (error log, /readyz 503
// "operator required: <kind>: …", omnigraph_operator_required, omnigraph_stalled), then waits
// RetryMax for the next attempt. It returns nil to try again, or why not: ctx ended (nil from
// lead) or the lease was lost.
func (s *Service) holdForOperator(ctx context.Context, lease *Lease, err error, attempt int) error {
	kind := errs.Kind(err)
	s.metrics.setOperator(kind, fmt.Sprintf("%s: recovery before consuming: %s (%d attempts)", kind, boundedText(err.Error()), attempt))
	s.w.log.Error("operator required: recovery cannot finish on this graph; nothing is consumed until it can, the lease is kept and recovery tried again",
		zap.String("kind", kind), zap.Int("attempts", attempt), zap.Duration("retry_in", s.w.cfg.RetryMax), zap.Error(err))
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-lease.Lost():
		return ErrLeaseLost
	case <-time.After(s.w.cfg.RetryMax):
		return nil
	}
}

// release gives the lease up so that a standby takes over at once rather than at its expiry.
func (s *Service) release(l *Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := l.Release(ctx); err != nil {
		s.log.Warn("lease not released; a standby takes over when it expires", zap.Error(err))
	}
}

// serveHTTP starts the metrics and health server; stop closes it and waits for it to end.
func (s *Service) serveHTTP() (stop func(), err error) {
	if stop, err = httpserve.Start(s.http, s.metrics.Handler(), s.log); err != nil {
		return nil, fmt.Errorf("ingest: metrics server: %w", err)
	}
	return stop, nil
}

// failures is how many attempts the streak has seen fail since it last worked.
func failures(st *streak) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.attempts
}

// Package fleet serves several graphs in one process and spreads the graphs of a list between
// the processes given the same list: it keeps this process's heartbeat in a JetStream
// key-value bucket, reads the live members from it, computes who serves which graph (Assign)
// and starts or stops each graph's service to match. Deciding who tries is all it does: a
// graph's writer is still whoever holds the graph's single-writer lease, whose epoch fences
// every write, so two processes that briefly disagree about the members only make one of them
// wait as a standby.
package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/omnigraph/omnigraph-worker/ingest"
	"github.com/omnigraph/omnigraph-worker/internal/httpserve"
)

// Bucket is the JetStream key-value bucket of every fleet's heartbeats: key <fleet>.<member>,
// dropped a TTL after its last put.
const Bucket = "omnigraph_fleet"

// Serve serves one graph until ctx ends (then it returns nil once the commit in flight is done
// and the graph's lease released) or it fails, recording in m. In `worker run` it opens the
// graph's root and runs an ingest.Service on it.
type Serve func(ctx context.Context, graph string, m *ingest.Metrics) error

// Config is one process's place in a fleet.
type Config struct {
	// ID names the fleet: the processes with the same ID on one NATS share its graphs.
	ID string
	// Member names this process among them (default <host>-<pid>).
	Member string
	// Graphs are the fleet's graphs, each a NATS subject token.
	Graphs []string
	// TTL is how long a heartbeat lives: a member that stops renewing is gone from the others'
	// view this long after its last heartbeat. Give it the graphs' lease TTL, so that its
	// graphs are reassigned about when their leases expire.
	TTL time.Duration
	// Replication places the heartbeat bucket as the lease bucket is placed.
	Replication ingest.Replication
}

// NameError is a fleet or member name that cannot be a token of a heartbeat key.
type NameError struct{ What, Name string }

func (e *NameError) Error() string {
	return fmt.Sprintf("fleet: %s %q: want letters, digits, '-', '_' or '=' only", e.What, e.Name)
}

var token = regexp.MustCompile(`^[-_=A-Za-z0-9]+$`)

// DefaultID is the fleet of processes given graphs and no fleet name: one per graph list
// (order and duplicates aside), so that processes started with the same list find each
// other and a process with another list is not counted as one of them.
func DefaultID(graphs []string) string {
	sum := sha256.Sum256([]byte(strings.Join(sortedSet(graphs), ",")))
	return "graphs-" + hex.EncodeToString(sum[:6])
}

// DefaultMember is <hostname>-<pid>, with what a heartbeat key cannot hold as '-'.
func DefaultMember() string {
	host, _ := os.Hostname()
	clean := strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, host)
	if clean == "" {
		clean = "host"
	}
	return clean + "-" + strconv.Itoa(os.Getpid())
}

// Fleet runs this process's share of a fleet's graphs.
type Fleet struct {
	cfg     Config
	js      jetstream.JetStream
	serve   Serve
	log     *zap.Logger
	fatal   func(error) bool
	http    httpserve.Config
	reg     *prometheus.Registry
	metrics map[string]*ingest.Metrics

	mu      sync.Mutex
	joined  bool
	members []string             // live members as last read, this one included
	mine    []string             // graphs assigned to this member
	running map[string]*graphRun // services started and not yet ended
	failed  map[string]*failure  // graphs whose service failed, until they run again
}

type graphRun struct {
	cancel   context.CancelFunc
	stopping bool // cancelled: given back, ending
}

type failure struct {
	err     error
	n       int
	retryAt time.Time
}

// errEndedAlone is a graph's service that returned nil without being stopped: it is tried
// again like one that failed.
var errEndedAlone = errors.New("fleet: the graph's service ended by itself")

// ended is a graph's service returning.
type ended struct {
	graph string
	err   error
}

// Opt configures New.
type Opt func(*Fleet) error

// WithLogger logs the fleet to l (default: nothing).
func WithLogger(l *zap.Logger) Opt {
	return func(f *Fleet) error {
		if l == nil {
			return errors.New("fleet: WithLogger(nil)")
		}
		f.log = l
		return nil
	}
}

// WithFatal makes Run stop every graph and return when a graph's service fails with an error
// fatal says cannot be mended by trying again (a configuration the deployment refuses). Other
// failures leave the graph unserved for a while and then try it again, so that one graph's
// trouble never takes the process's other graphs down, nor, by moving from process to
// process, the whole fleet. A *ingest.PlacementError is always fatal.
func WithFatal(fatal func(error) bool) Opt {
	return func(f *Fleet) error { f.fatal = fatal; return nil }
}

// New prepares this process's place in the fleet cfg describes; Run joins it.
func New(nc *nats.Conn, cfg Config, serve Serve, opts ...Opt) (*Fleet, error) {
	cfg.Graphs = sortedSet(cfg.Graphs)
	if len(cfg.Graphs) == 0 {
		return nil, errors.New("fleet: no graphs")
	}
	for _, g := range cfg.Graphs {
		if err := ingest.CheckGraphName(g); err != nil {
			return nil, fmt.Errorf("fleet: %w", err)
		}
	}
	if cfg.ID == "" {
		cfg.ID = DefaultID(cfg.Graphs)
	}
	if cfg.Member == "" {
		cfg.Member = DefaultMember()
	}
	if !token.MatchString(cfg.ID) {
		return nil, &NameError{What: "fleet", Name: cfg.ID}
	}
	if !token.MatchString(cfg.Member) {
		return nil, &NameError{What: "member", Name: cfg.Member}
	}
	if cfg.TTL <= 0 {
		cfg.TTL = ingest.DefaultLeaseTTL
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	f := &Fleet{cfg: cfg, js: js, serve: serve, log: zap.NewNop(), fatal: func(error) bool { return false },
		reg: prometheus.NewRegistry(), metrics: map[string]*ingest.Metrics{},
		running: map[string]*graphRun{}, failed: map[string]*failure{}}
	for _, opt := range opts {
		if err := opt(f); err != nil {
			return nil, err
		}
	}
	f.log = f.log.With(zap.String("fleet", cfg.ID), zap.String("member", cfg.Member))
	f.reg.MustRegister(ingest.RuntimeCollectors()...)
	for _, g := range cfg.Graphs {
		f.metrics[g] = ingest.NewGraphMetrics(f.reg, g)
	}
	f.registerGauges()
	return f, nil
}

// Config is the effective configuration (defaults filled in).
func (f *Fleet) Config() Config { return f.cfg }

// Metrics are graph's metrics (nil for a graph not in the fleet).
func (f *Fleet) Metrics(graph string) *ingest.Metrics { return f.metrics[graph] }

// Run joins the fleet and serves this process's share of its graphs until ctx ends, then
// leaves: its heartbeat is deleted, so that the others take its graphs over at once, and every
// graph's service finishes its commit in flight and releases its lease before Run returns nil.
// It returns an error only for what waiting cannot mend: the HTTP address, a bucket JetStream
// cannot place (a *ingest.PlacementError), a graph failing as WithFatal says.
func (f *Fleet) Run(ctx context.Context) error {
	stopHTTP, err := f.serveHTTP()
	if err != nil {
		return err
	}
	defer stopHTTP()
	kv, err := f.bucket(ctx)
	if err != nil || kv == nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan ended)
	var wg sync.WaitGroup
	err = f.loop(ctx, kv, done, &wg)
	f.leave(kv)
	cancel()
	// The services end on their own once cancelled; their results are drained here so that
	// none blocks on done.
	go func() { wg.Wait(); close(done) }()
	for e := range done {
		f.reap(e)
	}
	return err
}

// interval is how often the heartbeat is renewed and the members read: a quarter of the TTL,
// so that three heartbeats may be lost before a live member is taken for gone.
func (f *Fleet) interval() time.Duration { return f.cfg.TTL / 4 }

// bucket opens the heartbeat bucket, waiting while JetStream does not answer (nil, nil when
// ctx ends first).
func (f *Fleet) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	for {
		kv, err := f.cfg.Replication.Bucket(ctx, f.js, Bucket, f.cfg.TTL)
		var pe *ingest.PlacementError
		switch {
		case err == nil:
			return kv, nil
		case ctx.Err() != nil:
			return nil, nil
		case errors.As(err, &pe):
			return nil, fmt.Errorf("fleet: heartbeat bucket: %w", err)
		}
		f.log.Warn("fleet bucket unavailable; trying again", zap.Duration("in", f.interval()), zap.Error(err))
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(f.interval()):
		}
	}
}

// loop renews the heartbeat, reads the members and reconciles the graphs every interval, and
// at once when a graph's service ends. The first reconcile waits one interval after joining,
// so that processes started together see each other before taking graphs.
func (f *Fleet) loop(ctx context.Context, kv jetstream.KeyValue, done chan ended, wg *sync.WaitGroup) error {
	t := time.NewTicker(f.interval())
	defer t.Stop()
	beats := 0
	for {
		if f.heartbeat(ctx, kv) {
			beats++
		}
		if beats > 1 {
			if members, err := f.live(ctx, kv); err == nil {
				f.reconcile(ctx, members, done, wg)
			} else if ctx.Err() == nil {
				f.log.Warn("fleet members not read; keeping the graphs as they are", zap.Error(err))
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case e := <-done:
			if err := f.reap(e); err != nil {
				return err
			}
			f.mu.Lock()
			members := f.members
			f.mu.Unlock()
			if members != nil {
				f.reconcile(ctx, members, done, wg)
			}
		}
	}
}

// heartbeat puts this member's key, reporting whether it was stored.
func (f *Fleet) heartbeat(ctx context.Context, kv jetstream.KeyValue) bool {
	hctx, cancel := context.WithTimeout(ctx, f.interval())
	defer cancel()
	if _, err := kv.PutString(hctx, f.key(f.cfg.Member), f.cfg.Member); err != nil {
		if ctx.Err() == nil {
			f.log.Warn("fleet heartbeat not stored", zap.Error(err))
		}
		return false
	}
	return true
}

func (f *Fleet) key(member string) string { return f.cfg.ID + "." + member }

// live reads the members whose heartbeat has not expired, this one always among them: a
// process that runs is alive even when its own key lapsed (it was paused, its put failed).
func (f *Fleet) live(ctx context.Context, kv jetstream.KeyValue) ([]string, error) {
	lctx, cancel := context.WithTimeout(ctx, f.interval())
	defer cancel()
	lister, err := kv.ListKeysFiltered(lctx, f.cfg.ID+".*")
	if err != nil {
		return nil, err
	}
	defer lister.Stop()
	members := []string{f.cfg.Member}
	for k := range lister.Keys() {
		members = append(members, strings.TrimPrefix(k, f.cfg.ID+"."))
	}
	if lctx.Err() != nil {
		return nil, lctx.Err()
	}
	return sortedSet(members), nil
}

// reconcile starts the services of the graphs assigned to this member and stops those of
// the graphs assigned to another (which is live, being among members).
func (f *Fleet) reconcile(ctx context.Context, members []string, done chan ended, wg *sync.WaitGroup) {
	owners := Assign(f.cfg.Graphs, members)
	var mine []string
	for _, g := range f.cfg.Graphs {
		if owners[g] == f.cfg.Member {
			mine = append(mine, g)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Equal(members, f.members) || !slices.Equal(mine, f.mine) {
		f.log.Info("fleet assignment", zap.Strings("members", members), zap.Strings("assigned", mine))
	}
	f.joined, f.members, f.mine = true, members, mine
	now := time.Now()
	for _, g := range f.cfg.Graphs {
		run, running := f.running[g]
		switch assigned := owners[g] == f.cfg.Member; {
		case assigned && !running:
			if fl := f.failed[g]; fl != nil && now.Before(fl.retryAt) {
				continue
			}
			gctx, cancel := context.WithCancel(ctx)
			f.running[g] = &graphRun{cancel: cancel}
			m := f.metrics[g]
			f.log.Info("serving graph", zap.String("graph", g))
			wg.Go(func() {
				err := f.serve(gctx, g, m)
				if err == nil && gctx.Err() == nil {
					err = errEndedAlone
				}
				cancel()
				done <- ended{graph: g, err: err}
			})
		case !assigned && !running:
			// A failure of a graph now another member's is that member's business.
			delete(f.failed, g)
		case !assigned && running && !run.stopping:
			f.log.Info("giving the graph back", zap.String("graph", g), zap.String("to", owners[g]))
			run.stopping = true
			run.cancel()
		}
	}
}

// reap records a graph's service that ended; an error is returned when it is fatal.
func (f *Fleet) reap(e ended) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.running, e.graph)
	if e.err == nil {
		delete(f.failed, e.graph)
		f.log.Info("graph stopped", zap.String("graph", e.graph))
		return nil
	}
	var pe *ingest.PlacementError
	if errors.As(e.err, &pe) || f.fatal(e.err) {
		f.log.Error("graph failed; stopping every graph", zap.String("graph", e.graph), zap.Error(e.err))
		return fmt.Errorf("graph %s: %w", e.graph, e.err)
	}
	fl := f.failed[e.graph]
	if fl == nil {
		fl = &failure{}
		f.failed[e.graph] = fl
	}
	fl.err, fl.n = e.err, fl.n+1
	wait := min(f.cfg.TTL<<min(fl.n-1, 10), time.Minute)
	fl.retryAt = time.Now().Add(wait)
	f.log.Error("graph failed; trying it again later", zap.String("graph", e.graph), zap.Duration("in", wait), zap.Error(e.err))
	return nil
}

// leave deletes this member's heartbeat, so the others reassign its graphs at their next read
// instead of when it expires.
func (f *Fleet) leave(kv jetstream.KeyValue) {
	ctx, cancel := context.WithTimeout(context.Background(), f.interval())
	defer cancel()
	if err := kv.Delete(ctx, f.key(f.cfg.Member)); err != nil {
		f.log.Warn("fleet heartbeat not deleted; the others reassign this member's graphs when it expires", zap.Error(err))
	}
}

package ingest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/internal/buildinfo"
	"github.com/omnigraph/omnigraph-worker/internal/httpserve"
)

// Metrics are the worker's Prometheus metrics, with the Go runtime's and the process's, on a
// registry of their own: two services in one process (or one test) never share or collide.
// `worker run --graph G` labels each of the worker's series graph="G" (NewMetricsFor), as a
// fleet process does, which keeps one Metrics per graph on its own registry (NewGraphMetrics).
// Every label value the worker knows in advance (outcomes, dead-letter reasons, results,
// actions, kinds) is there from the start at 0, so that rate() and increase() see the first
// event of each.
type Metrics struct {
	reg *prometheus.Registry // nil for a graph's metrics on a fleet's registry

	messages     *prometheus.CounterVec // by outcome
	deadLetters  *prometheus.CounterVec // by reason
	rows, bytes  prometheus.Counter
	recoveries   prometheus.Counter
	compactions  *prometheus.CounterVec // by result
	compactSecs  prometheus.Counter
	leaseHeld    prometheus.Gauge
	pending      prometheus.Gauge
	stalledGauge prometheus.Gauge
	operatorReq  *prometheus.GaugeVec // by kind
	budgetSpent  *prometheus.CounterVec
	commitSecs   prometheus.Histogram
	unindexed    *prometheus.GaugeVec
	indexWork    prometheus.Gauge
	recreatedC   *prometheus.CounterVec // by what
	lastCommit   prometheus.Gauge       // unix time of the last commit made visible
	commitLag    prometheus.Histogram   // JetStream publish to commit visible
	leaseEpoch   prometheus.Gauge
	leaseTaken   prometheus.Counter
	acksFailed   prometheus.Counter

	// mu guards what /readyz reports and what omnigraph_stalled and omnigraph_operator_required
	// are derived from, so that the gauges and the endpoint never disagree.
	mu    sync.Mutex
	ready bool
	// stalled is why the message in flight is held past its retry budget on a known-transient
	// error ("" when not stalled); /readyz reports it.
	stalled string
	// operatorKind and operator are the kind and the reason of the error that holds the
	// message in flight until an operator fixes the graph ("" when none does).
	operatorKind, operator string
	// intake is the failure streak of each thing the worker needs in order to take messages
	// (fetches, re-creating lost streams, the lease bucket: streak.what), absent while it works.
	intake map[string]intake
}

// intake is one streak's state as /readyz and omnigraph_stalled report it.
type intake struct {
	since    time.Time
	attempts int
	err      string
	stalled  string // the stall's reason once past the retry budget
}

// commitBuckets are the upper bounds, in seconds, of omnigraph_commit_seconds.
var commitBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// lagBuckets are the upper bounds, in seconds, of omnigraph_commit_lag_seconds: from a
// commit right behind its publish to a backlog of an hour.
var lagBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// Label values of omnigraph_retry_budget_exhausted_total{action}.
const (
	actionStalled      = "stalled"
	actionDeadLettered = "dead_lettered"
)

// NewMetrics returns empty metrics on a new registry that also holds the standard Go runtime
// and process collectors, without a graph label (tests; `worker run` uses NewMetricsFor).
func NewMetrics() *Metrics { return NewMetricsFor("") }

// NewMetricsFor returns empty metrics of graph on a new registry that also holds the runtime,
// process and build collectors (RuntimeCollectors): each of the worker's series carries
// graph="<graph>", as in a fleet ("" leaves the label off).
func NewMetricsFor(graph string) *Metrics {
	reg := prometheus.NewRegistry()
	var m *Metrics
	if graph == "" {
		m = newMetrics(reg)
	} else {
		m = NewGraphMetrics(reg, graph)
	}
	m.reg = reg
	reg.MustRegister(RuntimeCollectors()...)
	return m
}

// RuntimeCollectors are the Go runtime's and the process's collectors a worker's registry
// holds once: the standard ones, plus the live heap at the last collection
// (go_gc_heap_live_bytes) and the soft memory limit (go_gc_gomemlimit_bytes). Resident memory
// and heap_inuse climb to the limit under a steady load and say nothing of a leak; the live
// heap does, and the limit is what the memory governor set. With them goes
// omnigraph_build_info, the binary's build (BuildInfoCollector).
func RuntimeCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/(heap/live|gomemlimit):bytes$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		BuildInfoCollector(buildinfo.Read()),
	}
}

// BuildInfoCollector is omnigraph_build_info{version,commit,build_time,modified,go_version} 1:
// the build of the binary (internal/buildinfo), as `worker version` prints it. Join it on
// instance to see which build each worker runs.
func BuildInfoCollector(in buildinfo.Info) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "omnigraph_build_info",
		Help:        "1, labelled with the worker binary's build: module version, commit (vcs.revision), build_time (vcs.time), modified (vcs.modified) and go_version.",
		ConstLabels: in.Labels()})
	g.Set(1)
	return g
}

// NewGraphMetrics returns empty metrics of one graph registered on reg with the label
// graph="<graph>": the graphs of a fleet process share the one registry its HTTP server serves
// (which holds the runtime and process collectors once), each series told apart by its graph.
// Registry, WriteTo and Handler are the caller's registry's business, not these metrics'.
func NewGraphMetrics(reg prometheus.Registerer, graph string) *Metrics {
	return newMetrics(prometheus.WrapRegistererWith(prometheus.Labels{"graph": graph}, reg))
}

// newMetrics registers the worker's own collectors on reg.
func newMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	counterVec := func(name, help, label string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label})
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	m.messages = counterVec("omnigraph_messages_total", "Messages by final outcome.", "outcome")
	for _, out := range outcomes {
		m.messages.WithLabelValues(string(out))
	}
	m.deadLetters = counterVec("omnigraph_dead_letters_total", "Dead-lettered messages by reason.", "reason")
	for _, reason := range errs.DeadLetterReasons() {
		m.deadLetters.WithLabelValues(reason)
	}
	m.rows = counter("omnigraph_rows_total", "Input records committed.")
	m.bytes = counter("omnigraph_bytes_total", "Batch bytes committed.")
	m.recoveries = counter("omnigraph_recoveries_total", "Recovery passes run for RecoveryRequired.")
	m.compactions = counterVec("omnigraph_compactions_total", "Automatic compactions, by result (ok: one graph commit each; stale: a staged rewrite dropped because its table changed; failed).", "result")
	for _, result := range []string{resultOK, resultStale, resultFailed} {
		m.compactions.WithLabelValues(result)
	}
	m.compactSecs = counter("omnigraph_compaction_seconds_total", "Time spent in automatic compaction.")
	m.leaseHeld = gauge("omnigraph_lease_held", "1 while this worker holds its graph's single-writer lease.")
	m.pending = gauge("omnigraph_consumer_pending", "Messages waiting in the consumer.")
	m.stalledGauge = gauge("omnigraph_stalled", "1 while the message in flight is held (past its retry budget on a known-transient error, or until an operator fixes the graph) or the worker cannot take messages past its retry budget (fetches, its streams, the lease bucket failing); the reason is on /readyz.")
	m.operatorReq = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "omnigraph_operator_required",
		Help: "1 for the kind of error that holds the message in flight until an operator fixes the graph."}, []string{"kind"})
	for _, k := range errs.Catalogue() {
		if k.NeedsOperator {
			m.operatorReq.WithLabelValues(k.Kind).Set(0)
		}
	}
	m.budgetSpent = counterVec("omnigraph_retry_budget_exhausted_total", "Messages whose retry budget ran out, by action: stalled (known-transient error, held and retried) or dead_lettered (retry_exhausted).", "action")
	for _, action := range []string{actionStalled, actionDeadLettered} {
		m.budgetSpent.WithLabelValues(action)
	}
	m.unindexed = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "omnigraph_unindexed_rows",
		Help: "Per main table, the most live rows one of its Lance indices does not cover (queries scan them beside the index); 0 without indices."}, []string{"table"})
	m.indexWork = gauge("omnigraph_index_work_bytes", "About how much memory the index builds and folds now due will hold while they run (engine.Graph.IndexWorkBytes: measured peaks per row, the two largest together); not counted in pipeline_bytes. 0 without index work due.")
	m.commitSecs = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "omnigraph_commit_seconds",
		Help: "Message processing time of committed batches.", Buckets: commitBuckets})
	m.recreatedC = counterVec("omnigraph_streams_recreated_total",
		"Streams and consumers the worker made again after JetStream lost them (its store lost, deleted by an operator), by what: stream, dlq_stream, events_stream, consumer.", "what")
	for _, what := range recreatable {
		m.recreatedC.WithLabelValues(what)
	}
	m.lastCommit = gauge("omnigraph_last_commit_timestamp_seconds", "Unix time at which the last commit this worker applied became visible (0: none yet).")
	m.commitLag = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "omnigraph_commit_lag_seconds",
		Help: "Time from a message's JetStream publish (its stored timestamp) to its commit being visible in the graph: queueing, retries and processing.", Buckets: lagBuckets})
	m.leaseEpoch = gauge("omnigraph_lease_epoch", "Writer epoch of the single-writer lease this worker took last (0: none yet); it moves at each takeover.")
	m.leaseTaken = counter("omnigraph_lease_acquisitions_total", "Times this worker took its graph's single-writer lease.")
	m.acksFailed = counter("omnigraph_acks_failed_total", "Acks of visible commits that were not sent or not confirmed by the server: such a message may be redelivered, and is then recognised by its receipt (outcome already_applied). A steady rate means the server is slow or unreachable.")
	reg.MustRegister(m.messages, m.deadLetters, m.rows, m.bytes, m.recoveries, m.compactions, m.compactSecs,
		m.leaseHeld, m.pending, m.stalledGauge, m.operatorReq, m.budgetSpent, m.commitSecs, m.unindexed, m.recreatedC,
		m.lastCommit, m.commitLag, m.leaseEpoch, m.leaseTaken, m.acksFailed, m.indexWork)
	return m
}

// Status is what /readyz reports of one worker.
type Status struct {
	Ready bool // consuming under the lease
	// Stalled is why the message in flight is held past its retry budget, or why the worker
	// cannot take messages past it (fetches, its streams, the lease bucket failing); "" when not.
	Stalled  string
	Operator string // the error holding the message in flight for an operator ("" when none)
	// Fetching is why the worker has not fetched for longer than FetchGrace ("" while it fetches
	// or has nothing to fetch).
	Fetching string
}

// Held is the reason the worker is not taking messages although it consumes ("" when none).
func (s Status) Held() string {
	switch {
	case s.Operator != "":
		return "operator required: " + s.Operator
	case s.Stalled != "":
		return "stalled: " + s.Stalled
	case s.Fetching != "":
		return "not fetching: " + s.Fetching
	}
	return ""
}

// Status is the worker's readiness as /readyz reports it.
func (m *Metrics) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := Status{Ready: m.ready, Stalled: m.stalled, Operator: m.operator}
	whats := make([]string, 0, len(m.intake))
	for what := range m.intake {
		whats = append(whats, what)
	}
	sort.Strings(whats)
	for _, what := range whats {
		in := m.intake[what]
		if st.Stalled == "" {
			st.Stalled = in.stalled
		}
		if st.Fetching == "" && time.Since(in.since) >= FetchGrace {
			st.Fetching = fmt.Sprintf("%s failing since %s (%d attempts): %s", what, in.since.UTC().Format(time.RFC3339), in.attempts, in.err)
		}
	}
	return st
}

func (m *Metrics) message(out outcome, rows int, size int, took time.Duration, reason string) {
	if m == nil {
		return
	}
	m.messages.WithLabelValues(string(out)).Inc()
	if out == outcomeDeadLetter {
		m.deadLetters.WithLabelValues(reason).Inc()
	}
	if out == outcomeCommitted {
		m.rows.Add(float64(rows))
		m.bytes.Add(float64(size))
		m.commitSecs.Observe(took.Seconds())
	}
}

// visible records a commit made visible at now for a message JetStream stored at published:
// omnigraph_last_commit_timestamp_seconds and omnigraph_commit_lag_seconds. A message that
// made no commit (already applied, a cleanup, a merge or optimize with nothing to do) is not
// counted.
func (m *Metrics) visible(published, now time.Time, res *applied) {
	if m == nil || res == nil || res.event.AlreadyApplied || res.event.GraphCommitID == "" {
		return
	}
	m.lastCommit.Set(float64(now.UnixNano()) / 1e9)
	if !published.IsZero() {
		m.commitLag.Observe(max(now.Sub(published).Seconds(), 0))
	}
}

// leaseAcquired records a lease taken at epoch.
func (m *Metrics) leaseAcquired(epoch uint64) {
	if m != nil {
		m.leaseEpoch.Set(float64(epoch))
		m.leaseTaken.Inc()
	}
}

// Results of an automatic compaction, the omnigraph_compactions_total label.
const (
	resultOK     = "ok"     // one graph commit
	resultFailed = "failed" // retried after compactionPause
	resultStale  = "stale"  // some table changed under the staged rewrite, which was dropped
)

func (m *Metrics) compaction(result string, took time.Duration) {
	if m == nil {
		return
	}
	m.compactions.WithLabelValues(result).Inc()
	m.compactSecs.Add(took.Seconds())
}

// ackFailed counts an ack after a visible commit that was not sent or not confirmed; it runs
// on the acker's goroutine.
func (m *Metrics) ackFailed() {
	if m != nil {
		m.acksFailed.Inc()
	}
}

func (m *Metrics) recovered() {
	if m != nil {
		m.recoveries.Inc()
	}
}

// SetLease records whether this worker holds its graph's lease.
func (m *Metrics) SetLease(held bool) {
	if m != nil {
		m.leaseHeld.Set(b2f(held))
	}
}

// SetReady records whether the worker is consuming (for /readyz).
func (m *Metrics) SetReady(ready bool) {
	if m != nil {
		m.mu.Lock()
		m.ready = ready
		m.mu.Unlock()
	}
}

// retryBudgetSpent counts a message whose retry budget ran out, by what was done about it.
func (m *Metrics) retryBudgetSpent(action string) {
	if m != nil {
		m.budgetSpent.WithLabelValues(action).Inc()
	}
}

// setStalled records why the worker is stalled, or "" when it no longer is.
func (m *Metrics) setStalled(reason string) {
	if m != nil {
		m.mu.Lock()
		m.stalled = reason
		m.held()
		m.mu.Unlock()
	}
}

// setOperator records the kind and reason of the error that needs an operator, or "" when no
// error does any more.
func (m *Metrics) setOperator(kind, reason string) {
	if m != nil {
		m.mu.Lock()
		m.operatorKind, m.operator = kind, reason
		m.held()
		m.mu.Unlock()
	}
}

// setIntake records the failure streak of what, or none (nil).
func (m *Metrics) setIntake(what string, in *intake) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if in == nil {
		delete(m.intake, what)
	} else {
		if m.intake == nil {
			m.intake = map[string]intake{}
		}
		m.intake[what] = *in
	}
	m.held()
}

// recreated counts a stream or the consumer made again (what: its setting's name).
func (m *Metrics) recreated(what string) {
	if m != nil {
		m.recreatedC.WithLabelValues(what).Inc()
	}
}

// held sets the gauges derived from stalled, operator and intake; m.mu is held.
func (m *Metrics) held() {
	stalled := m.stalled != "" || m.operator != ""
	for _, in := range m.intake {
		stalled = stalled || in.stalled != ""
	}
	m.stalledGauge.Set(b2f(stalled))
	for _, k := range errs.Catalogue() {
		if k.NeedsOperator {
			m.operatorReq.WithLabelValues(k.Kind).Set(b2f(m.operator != "" && m.operatorKind == k.Kind))
		}
	}
}

// setIndexWork records each main table's unindexed rows (setUnindexed) and bytes, what the
// index work due will hold (Worker.indexWorkBytes).
func (m *Metrics) setIndexWork(rows map[string]uint64, bytes int64) {
	if m != nil {
		m.setUnindexed(rows)
		m.indexWork.Set(float64(bytes))
	}
}

// setUnindexed records each main table's unindexed rows (engine.Graph.UnindexedRows).
func (m *Metrics) setUnindexed(rows map[string]uint64) {
	if m != nil {
		for table, n := range rows {
			m.unindexed.WithLabelValues(table).Set(float64(n))
		}
	}
}

func (m *Metrics) setPending(n uint64) {
	if m != nil {
		m.pending.Set(float64(n))
	}
}

// ExportedFamilies are the metric families a `worker run --graph` registry exports, name to
// type (COUNTER, GAUGE, HISTOGRAM, …), read from a new registry with a probe value in each
// vector that starts empty: what dashboards and alert rules may name (a fleet adds its own
// omnigraph_fleet_* gauges).
func ExportedFamilies() (map[string]string, error) {
	m := NewMetricsFor("probe")
	m.setUnindexed(map[string]uint64{"probe": 0})
	mfs, err := m.reg.Gather()
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(mfs))
	for _, mf := range mfs {
		out[mf.GetName()] = mf.GetType().String()
	}
	return out, nil
}

// Registry is where the metrics are registered, for a caller that adds its own collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// WriteTo writes the metrics in the Prometheus text format.
func (m *Metrics) WriteTo(w io.Writer) (int64, error) {
	mfs, err := m.reg.Gather()
	if err != nil {
		return 0, err
	}
	cw := &countingWriter{w: w}
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(cw, mf); err != nil {
			return cw.n, err
		}
	}
	return cw.n, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func b2f(v bool) float64 {
	if v {
		return 1
	}
	return 0
}

// Handler serves /metrics, /healthz (httpserve.Healthz: the process can still write) and
// /readyz (consuming, lease held, not held for an operator, not stalled past a retry budget:
// each answers 503 with its reason).
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", httpserve.Healthz)
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		st := m.Status()
		// A hold says why nothing is consumed, also before consuming starts (a graph that
		// does not open, a recovery that needs an operator, streams JetStream lost and will not
		// make again, a lease bucket that does not answer).
		if held := st.Held(); held != "" {
			http.Error(w, held, http.StatusServiceUnavailable)
			return
		}
		if !st.Ready {
			http.Error(w, "not consuming (standby or starting)", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	return mux
}

// watchPending refreshes the consumer-pending gauge until ctx ends.
func (w *Worker) watchPending(ctx context.Context) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		if info, err := w.cons.Info(ctx); err == nil {
			w.metrics.setPending(info.NumPending)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SetOperator records, for a caller that holds the worker before the service runs (the graph
// does not open), the kind and reason of the error that needs an operator; "" clears it.
func (m *Metrics) SetOperator(kind, reason string) { m.setOperator(kind, reason) }

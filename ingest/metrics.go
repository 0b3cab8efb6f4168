package ingest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
)

// Metrics are the worker's Prometheus metrics, written in the text exposition format by hand
// (a handful of counters and one histogram do not need a client library).
type Metrics struct {
	mu          sync.Mutex
	messages    map[string]uint64 // by outcome
	deadLetters map[string]uint64 // by reason
	rows, bytes uint64
	recoveries  uint64
	compactions map[string]uint64 // by result
	compactSecs float64
	leaseHeld   bool
	pending     uint64
	ready       bool
	// stalled is why the message in flight is held past its retry budget on a known-transient
	// error ("" when not stalled); /readyz reports it.
	stalled     string
	budgetSpent map[string]uint64 // by action: stalled, dead_lettered
	buckets     []float64         // commit latency upper bounds, seconds
	counts      []uint64
	sum         float64
	n           uint64

	// operatorKind and operator are the kind and the reason of the error that holds the
	// message in flight until an operator fixes the graph ("" when none does).
	operatorKind, operator string
}

// NewMetrics returns empty metrics.
func NewMetrics() *Metrics {
	b := []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
	return &Metrics{messages: map[string]uint64{}, deadLetters: map[string]uint64{}, compactions: map[string]uint64{}, budgetSpent: map[string]uint64{}, buckets: b, counts: make([]uint64, len(b))}
}

func (m *Metrics) message(out outcome, rows int, size int, took time.Duration, reason string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.messages[string(out)]++
	if out == outcomeDeadLetter {
		m.deadLetters[reason]++
	}
	if out == outcomeCommitted {
		m.rows += uint64(rows)
		m.bytes += uint64(size)
		s := took.Seconds()
		for i, ub := range m.buckets {
			if s <= ub {
				m.counts[i]++
			}
		}
		m.sum += s
		m.n++
	}
}

func (m *Metrics) compaction(ok bool, took time.Duration) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	result := "ok"
	if !ok {
		result = "failed"
	}
	m.compactions[result]++
	m.compactSecs += took.Seconds()
}

func (m *Metrics) recovered() {
	if m != nil {
		m.mu.Lock()
		m.recoveries++
		m.mu.Unlock()
	}
}

// SetLease records whether this worker holds its graph's lease.
func (m *Metrics) SetLease(held bool) {
	if m != nil {
		m.mu.Lock()
		m.leaseHeld = held
		m.mu.Unlock()
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
		m.mu.Lock()
		m.budgetSpent[action]++
		m.mu.Unlock()
	}
}

// setStalled records why the worker is stalled, or "" when it no longer is.
func (m *Metrics) setStalled(reason string) {
	if m != nil {
		m.mu.Lock()
		m.stalled = reason
		m.mu.Unlock()
	}
}

// setOperator records the kind and reason of the error that needs an operator, or "" when no
// error does any more.
func (m *Metrics) setOperator(kind, reason string) {
	if m != nil {
		m.mu.Lock()
		m.operatorKind, m.operator = kind, reason
		m.mu.Unlock()
	}
}

func (m *Metrics) setPending(n uint64) {
	if m != nil {
		m.mu.Lock()
		m.pending = n
		m.mu.Unlock()
	}
}

// WriteTo writes the metrics in the Prometheus text format.
func (m *Metrics) WriteTo(w io.Writer) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	labelled := func(name, help, label string, vals map[string]uint64) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s counter\n", name, help, name)
		keys := make([]string, 0, len(vals))
		for k := range vals {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "%s{%s=%q} %d\n", name, label, k, vals[k])
		}
	}
	single := func(name, typ, help string, v any) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n%s %v\n", name, help, name, typ, name, v)
	}
	labelled("omnigraph_messages_total", "Messages by final outcome.", "outcome", m.messages)
	labelled("omnigraph_dead_letters_total", "Dead-lettered messages by reason.", "reason", m.deadLetters)
	single("omnigraph_rows_total", "counter", "Input records committed.", m.rows)
	single("omnigraph_bytes_total", "counter", "Batch bytes committed.", m.bytes)
	single("omnigraph_recoveries_total", "counter", "Recovery passes run for RecoveryRequired.", m.recoveries)
	labelled("omnigraph_compactions_total", "Automatic compactions between messages, by result (ok: one graph commit each).", "result", m.compactions)
	single("omnigraph_compaction_seconds_total", "counter", "Time spent in automatic compaction.", m.compactSecs)
	single("omnigraph_lease_held", "gauge", "1 while this worker holds its graph's single-writer lease.", b2i(m.leaseHeld))
	single("omnigraph_consumer_pending", "gauge", "Messages waiting in the consumer.", m.pending)
	single("omnigraph_stalled", "gauge", "1 while the message in flight is held: past its retry budget on a known-transient error, or until an operator fixes the graph (the reason is on /readyz).",
		b2i(m.stalled != "" || m.operator != ""))
	fmt.Fprintf(&b, "# HELP omnigraph_operator_required 1 for the kind of error that holds the message in flight until an operator fixes the graph.\n# TYPE omnigraph_operator_required gauge\n")
	for _, k := range errs.Catalogue() {
		if k.NeedsOperator {
			fmt.Fprintf(&b, "omnigraph_operator_required{kind=%q} %d\n", k.Kind, b2i(m.operator != "" && m.operatorKind == k.Kind))
		}
	}
	labelled("omnigraph_retry_budget_exhausted_total", "Messages whose retry budget ran out, by action: stalled (known-transient error, held and retried) or dead_lettered (retry_exhausted).", "action", m.budgetSpent)
	fmt.Fprintf(&b, "# HELP omnigraph_commit_seconds Message processing time of committed batches.\n# TYPE omnigraph_commit_seconds histogram\n")
	for i, ub := range m.buckets {
		fmt.Fprintf(&b, "omnigraph_commit_seconds_bucket{le=\"%g\"} %d\n", ub, m.counts[i])
	}
	fmt.Fprintf(&b, "omnigraph_commit_seconds_bucket{le=\"+Inf\"} %d\nomnigraph_commit_seconds_sum %g\nomnigraph_commit_seconds_count %d\n", m.n, m.sum, m.n)
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}

// Handler serves /metrics, /healthz (the process is up) and /readyz (consuming, lease held, not
// held for an operator, not stalled past a retry budget: each answers 503 with its reason).
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = m.WriteTo(w)
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		m.mu.Lock()
		ready, stalled, operator := m.ready, m.stalled, m.operator
		m.mu.Unlock()
		if !ready {
			http.Error(w, "not consuming (standby or starting)", http.StatusServiceUnavailable)
			return
		}
		if operator != "" {
			http.Error(w, "operator required: "+operator, http.StatusServiceUnavailable)
			return
		}
		if stalled != "" {
			http.Error(w, "stalled: "+stalled, http.StatusServiceUnavailable)
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

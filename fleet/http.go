package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/omnigraph/omnigraph-worker/internal/httpserve"
)

// WithHTTP serves /metrics, /healthz and /readyz on addr while Run runs ("" serves nothing,
// the default). Run fails at once when addr cannot be listened on.
func WithHTTP(addr string) Opt {
	return func(f *Fleet) error { f.http.Addr = addr; return nil }
}

// WithProfiles also serves the Go runtime's profiles at /debug/pprof/ on the HTTP server
// (internal/profiling): off by default.
func WithProfiles(on bool) Opt {
	return func(f *Fleet) error { f.http.Profiles = on; return nil }
}

// WithHTTPListener serves the HTTP endpoints on ln instead of an address; Run closes it when
// it returns.
func WithHTTPListener(ln net.Listener) Opt {
	return func(f *Fleet) error {
		if ln == nil {
			return errors.New("fleet: WithHTTPListener(nil)")
		}
		f.http.Listener = ln
		return nil
	}
}

// Status is this process's part in the fleet, as /readyz reports it.
type Status struct {
	Fleet   string   `json:"fleet"`
	Member  string   `json:"member"`
	Joined  bool     `json:"joined"`  // its heartbeat stored and the members read at least once
	Members []string `json:"members"` // live members as last read, this one included
	// Assigned are the graphs this member should serve, Serving those it serves (holds the
	// lease and consumes), Standby those assigned and started but not yet serving (waiting
	// for the previous owner's lease, recovering).
	Assigned []string `json:"assigned"`
	Serving  []string `json:"serving"`
	Standby  []string `json:"standby"`
	// Held are served graphs whose message in flight is held (an operator is needed, or it is
	// stalled past its retry budget), Failed graphs whose service failed and is tried again later.
	Held   map[string]string `json:"held,omitempty"`
	Failed map[string]string `json:"failed,omitempty"`
}

// Ready is whether the process is doing its part: joined, with none of its graphs held or failed.
func (s Status) Ready() bool { return s.Joined && len(s.Held) == 0 && len(s.Failed) == 0 }

// Status is this process's part in the fleet now.
func (f *Fleet) Status() Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := Status{Fleet: f.cfg.ID, Member: f.cfg.Member, Joined: f.joined, Members: append([]string{}, f.members...),
		Assigned: append([]string{}, f.mine...), Serving: []string{}, Standby: []string{}}
	for _, g := range f.cfg.Graphs {
		run, ok := f.running[g]
		if fl := f.failed[g]; fl != nil && !ok {
			if s.Failed == nil {
				s.Failed = map[string]string{}
			}
			s.Failed[g] = fl.err.Error()
		}
		if !ok || run.stopping {
			continue
		}
		st := f.metrics[g].Status()
		if !st.Ready {
			s.Standby = append(s.Standby, g)
			continue
		}
		s.Serving = append(s.Serving, g)
		if held := st.Held(); held != "" {
			if s.Held == nil {
				s.Held = map[string]string{}
			}
			s.Held[g] = held
		}
	}
	return s
}

// registerGauges adds the fleet's own gauges, read from Status at each scrape.
func (f *Fleet) registerGauges() {
	for _, g := range f.cfg.Graphs {
		labels := prometheus.Labels{"graph": g}
		f.reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "omnigraph_fleet_graph_served", ConstLabels: labels,
				Help: "1 while this process serves the graph: it holds the graph's lease and consumes."},
				func() float64 { return b2f(slices.Contains(f.Status().Serving, g)) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "omnigraph_fleet_graph_assigned", ConstLabels: labels,
				Help: "1 while the fleet's assignment gives the graph to this process."},
				func() float64 { return b2f(slices.Contains(f.Status().Assigned, g)) }),
		)
	}
	f.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "omnigraph_fleet_members",
		Help: "Live members of the fleet as this process last read them, itself included."},
		func() float64 { return float64(len(f.Status().Members)) }))
}

func b2f(v bool) float64 {
	if v {
		return 1
	}
	return 0
}

// Handler serves /metrics (every graph's series labelled with its graph, the fleet's gauges,
// the Go runtime's and the process's), /healthz (httpserve.Healthz) and /readyz (Status as
// JSON: 200 when Ready, else 503).
func (f *Fleet) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(f.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", httpserve.Healthz)
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		st := f.Status()
		w.Header().Set("Content-Type", "application/json")
		if !st.Ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(st)
	})
	return mux
}

// serveHTTP starts the metrics and health server; stop closes it and waits for it to end.
func (f *Fleet) serveHTTP() (stop func(), err error) {
	if stop, err = httpserve.Start(f.http, f.Handler(), f.log); err != nil {
		return nil, fmt.Errorf("fleet: metrics server: %w", err)
	}
	return stop, nil
}

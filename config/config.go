// Package config merges the worker's settings from defaults, a YAML file, OMNIGRAPH_*
// environment variables and command-line flags (later sources win) into one validated Config,
// and builds from it what the other packages take: ingest.Config, NATS connection options,
// storage options. It is the only package that reads the environment (through the getenv its
// caller passes), so every setting has one name, one env spelling and one error form.
package config

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/ingest"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// Config is every setting of the worker's commands: `worker run` uses them all, the other
// commands bind the ones they take (Bind).
type Config struct {
	Root  string `yaml:"root"`
	Graph string `yaml:"graph"`
	// Graphs (a comma list, or a YAML list) makes `worker run` one process of a fleet serving
	// these graphs, each at <root>/<graph>, shared with the other processes of Fleet; it
	// excludes Graph.
	Graphs string `yaml:"graphs"`
	// Fleet names the processes that share Graphs (default: one fleet per graph list).
	Fleet     string `yaml:"fleet"`
	Schema    string `yaml:"schema"`
	NATSURL   string `yaml:"nats_url"`
	NATSCreds string `yaml:"nats_creds"`
	NATSCA    string `yaml:"nats_ca"`
	NATSCert  string `yaml:"nats_cert"`
	NATSKey   string `yaml:"nats_key"`
	NATSDir   string `yaml:"nats_dir"`
	NATSPort  int    `yaml:"nats_port"`
	// NATSSyncInterval is when the embedded server fsyncs JetStream writes: "always" (every
	// write before its publish is acknowledged) or a duration (NATS's own default is 2m: a
	// power loss may lose what was acknowledged since the last fsync).
	NATSSyncInterval string `yaml:"nats_sync_interval"`
	Stream           string `yaml:"stream"`
	DLQStream        string `yaml:"dlq_stream"`
	// EventsStream stores omnigraph.<graph>.events, so that a pipeline that was down, or a
	// CLI waiting for its request's outcome, still finds every event.
	EventsStream string        `yaml:"events_stream"`
	EventsMaxAge time.Duration `yaml:"events_max_age"`
	Consumer     string        `yaml:"consumer"`
	AckWait      time.Duration `yaml:"ack_wait"`
	MaxDeliver   int           `yaml:"max_deliver"`
	LeaseTTL     time.Duration `yaml:"lease_ttl"`
	// RetryBudget is how long one message may keep failing in place: past it, an error not
	// known to be transient is dead-lettered as retry_exhausted, and a known-transient one
	// (storage or NATS unwell) keeps being retried with the worker reported stalled.
	RetryBudget time.Duration `yaml:"retry_budget"`
	// RetryMax caps the in-place retry backoff, and is how often a message (or the recovery
	// before consuming) held for an operator is tried again.
	RetryMax time.Duration `yaml:"retry_max"`
	HTTP     string        `yaml:"http"`
	// GCPercent is the collector's GOGC for `worker run` (the GOGC variable, when set, wins).
	// Framing and Arrow building allocate several times a batch's size while the live heap
	// of a writer is small, so at Go's default of 100 the collector runs through nearly every
	// batch; 400 measured about 10% off the end-to-end latency. GOMEMLIMIT still caps it.
	GCPercent int `yaml:"gc_percent"`
	// MemoryLimit is the collector's soft memory limit for `worker run`, in bytes (0: the graphs'
	// state + the pipeline_bytes of the graphs served + a headroom, followed as the state grows
	// and never above nine tenths of the container's cgroup limit; the GOMEMLIMIT variable, when
	// set, wins).
	MemoryLimit int `yaml:"memory_limit"`
	// HugePageHeap is how much of the Go heap's growth `worker run` asks the kernel to back
	// with transparent huge pages, in bytes, where the kernel gives them only on request
	// (hugepage.AdviseHeap); 0 (the default) asks for none. Whether they pay depends on the
	// host: a virtual machine may charge a first touch of fresh memory far more in one page
	// size than in the other, and which one has changed under the same guest
	// (docs/operators.md has both measurements and how to take them).
	HugePageHeap int `yaml:"huge_page_heap"`
	// CompactionFanout is the size-tier fanout of the worker's automatic compaction between
	// messages: the newest run of same-size fragments of a main table is merged once it holds
	// this many. 0 turns it off.
	CompactionFanout int `yaml:"compaction_fanout"`
	// BuildIndices: the automatic maintenance also builds and refolds the reference's indices.
	BuildIndices bool `yaml:"build_indices"`
	// IndexCacheBytes is the memory `worker run` keeps for the page data of the BTREE indices
	// it wrote last, so that folding one starts from memory instead of reading it back
	// (lance.SetBTreeCacheBytes). 0 keeps none.
	IndexCacheBytes int `yaml:"index_cache_bytes"`
	// LanceFileVersion is the Lance data file version ("2.0", "2.1", "2.2") of every table of a
	// graph this worker initialises; empty is engine.DefaultFileVersion. An existing graph
	// keeps the version it was made with, whatever this says.
	LanceFileVersion string `yaml:"lance_file_version"`
	// LocalFsync: writes to a local root are fsynced (file and directory) before they count.
	// Off, a power loss may lose the newest commits, though a crash still never shows a torn
	// one (storage.WithLocalFsync).
	LocalFsync bool `yaml:"local_fsync"`
	// Profiles: `worker run` also serves the Go runtime's profiles at /debug/pprof/ on HTTP.
	Profiles bool `yaml:"pprof"`
	// LogLevel is the least level `worker run` logs: debug, info, warn or error.
	LogLevel string `yaml:"log_level"`
	// StreamMaxAge, StreamMaxBytes, DLQMaxAge and DLQMaxBytes cap the ingest and dead-letter
	// streams (0: unlimited); the worker applies them to streams that already exist too.
	StreamMaxAge   time.Duration `yaml:"stream_max_age"`
	StreamMaxBytes int           `yaml:"stream_max_bytes"`
	DLQMaxAge      time.Duration `yaml:"dlq_max_age"`
	DLQMaxBytes    int           `yaml:"dlq_max_bytes"`
	// StreamReplicas, PlacementCluster and PlacementTags (a comma list) apply to every stream
	// and bucket `worker run` creates: ingest, dead letters, events and the lease bucket.
	StreamReplicas   int    `yaml:"stream_replicas"`
	PlacementCluster string `yaml:"placement_cluster"`
	PlacementTags    string `yaml:"placement_tags"`
	// PipelineDepth and PipelineBytes bound the messages held at once (ingest.Config).
	PipelineDepth int `yaml:"pipeline_depth"`
	PipelineBytes int `yaml:"pipeline_bytes"`
}

// DefaultNATSURL is where the commands other than `run` find NATS when nats_url is not set:
// they cannot start an embedded server, and `run` starts its embedded one on this port.
const DefaultNATSURL = "nats://127.0.0.1:4222"

// DefaultHugePageHeap is huge_page_heap's default: nothing advised, so the heap gets huge
// pages only where the kernel's own setting (transparent_hugepage=always) gives them, as for
// any Go program. It was 1 GiB while the test machine's hypervisor charged 4 KiB first touches
// dearly; it came to charge fresh huge pages ten times as much per byte as small ones, and a
// worker young enough to be growing its heap then spent half its CPU zeroing them.
const DefaultHugePageHeap = 0

// Defaults are `worker run`'s values before any source is applied.
func Defaults() Config {
	return Config{NATSPort: 4222, NATSSyncInterval: "always", AckWait: ingest.DefaultAckWait, MaxDeliver: ingest.DefaultMaxDeliver, LeaseTTL: ingest.DefaultLeaseTTL,
		RetryBudget: ingest.DefaultRetryBudget, RetryMax: ingest.DefaultRetryMax, EventsMaxAge: ingest.DefaultEventsMaxAge, HTTP: "127.0.0.1:9464", GCPercent: 400, HugePageHeap: DefaultHugePageHeap, CompactionFanout: engine.DefaultCompactionFanout, BuildIndices: true, IndexCacheBytes: lance.DefaultBTreeCacheBytes,
		LocalFsync: true, LogLevel: "info", StreamReplicas: 1, PipelineDepth: ingest.DefaultPipelineDepth, PipelineBytes: ingest.DefaultPipelineBytes}
}

// ToolDefaults are the other commands' values before any source is applied: Defaults, with
// nats_url the local server (DefaultNATSURL) instead of an embedded one.
func ToolDefaults() Config {
	c := Defaults()
	c.NATSURL = DefaultNATSURL
	return c
}

// setting is one field: its YAML/env/flag names, how to set it from text, how to show it, and
// what a value must be (check: nil for any).
type setting struct {
	name, help string
	set        func(c *Config, v string) error
	get        func(c *Config) string
	check      func(c *Config) error
	// kind names the value's type in help: string, duration, int or on|off.
	kind string
}

func str(get func(c *Config) *string) (func(*Config, string) error, func(*Config) string) {
	return func(c *Config, v string) error { *get(c) = v; return nil }, func(c *Config) string { return *get(c) }
}

// reason is a refusal of a setting's value; Load names the setting and source around it.
type reason string

func (r reason) Error() string { return string(r) }

func settings() []setting {
	s := func(name, help string, f func(c *Config) *string, check func(c *Config) error) setting {
		set, get := str(f)
		return setting{name, help, set, get, check, "string"}
	}
	dur := func(name, help string, f func(c *Config) *time.Duration, least time.Duration) setting {
		return setting{name, help, func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("want a duration like 30s: %w", err)
			}
			*f(c) = d
			return nil
		}, func(c *Config) string { return f(c).String() }, func(c *Config) error {
			if *f(c) < least {
				return reason("must be at least " + least.String())
			}
			return nil
		}, "duration"}
	}
	num := func(name, help string, f func(c *Config) *int, check func(c *Config) error) setting {
		return setting{name, help, func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("want a whole number: %w", err)
			}
			*f(c) = n
			return nil
		}, func(c *Config) string { return strconv.Itoa(*f(c)) }, check, "int"}
	}
	onOff := func(name, help string, f func(c *Config) *bool) setting {
		return setting{name, help, func(c *Config, v string) error {
			switch strings.ToLower(v) {
			case "1", "true", "on", "yes":
				*f(c) = true
			case "0", "false", "off", "no":
				*f(c) = false
			default:
				return fmt.Errorf("want on or off (true/false, 1/0, yes/no), not %q", v)
			}
			return nil
		}, func(c *Config) string { return strconv.FormatBool(*f(c)) }, nil, "on|off"}
	}
	return []setting{
		s("root", "graph root URI (path, file://, mem://, s3://, gs://, azblob://)", func(c *Config) *string { return &c.Root }, func(c *Config) error {
			if c.Root == "" {
				return nil // required or not by the command
			}
			var ue *storage.URIError
			if err := storage.CheckURI(c.Root); errors.As(err, &ue) {
				return reason(fmt.Sprintf("%q: %s", c.Root, ue.Reason))
			}
			return nil
		}),
		s("graph", "graph name: the <graph> token of omnigraph.<graph>.ingest", func(c *Config) *string { return &c.Graph }, func(c *Config) error {
			if c.Graph == "" {
				return nil // required or not by the command
			}
			if err := ingest.CheckGraphName(c.Graph); err != nil {
				return reason(fmt.Sprintf("%q must be one NATS subject token (no dots, spaces, * or >)", c.Graph))
			}
			return nil
		}),
		s("graphs", "serve these graphs (comma list) as one process of a fleet: each graph's root is <root>/<graph>, and the processes given the same list share the graphs between them (excludes graph)", func(c *Config) *string { return &c.Graphs }, checkGraphs),
		s("fleet", "name of the fleet of processes sharing graphs (default: one fleet per graph list)", func(c *Config) *string { return &c.Fleet }, func(c *Config) error {
			if c.Fleet != "" && !fleetName.MatchString(c.Fleet) {
				return reason(fmt.Sprintf("%q: want letters, digits, '-', '_' or '=' only", c.Fleet))
			}
			return nil
		}),
		s("schema", "initialise the graph from this .pg schema if the root holds none", func(c *Config) *string { return &c.Schema }, nil),
		s("nats_url", "NATS server URL, or several separated by commas: nats://, tls://, ws:// or wss:// (the NATS_URL variable when this is not set; worker run: empty starts an embedded JetStream server)", func(c *Config) *string { return &c.NATSURL }, func(c *Config) error {
			if err := CheckNATSURL(c.NATSURL); err != nil {
				return reason(err.Error())
			}
			return nil
		}),
		s("nats_creds", "NATS credentials file", func(c *Config) *string { return &c.NATSCreds }, nil),
		s("nats_ca", "CA certificate for NATS TLS", func(c *Config) *string { return &c.NATSCA }, nil),
		s("nats_cert", "client certificate for NATS TLS", func(c *Config) *string { return &c.NATSCert }, func(c *Config) error {
			if (c.NATSCert == "") != (c.NATSKey == "") {
				return reason("nats_cert and nats_key go together")
			}
			return nil
		}),
		s("nats_key", "client key for NATS TLS", func(c *Config) *string { return &c.NATSKey }, nil),
		s("nats_dir", "embedded server data directory (default: <root>.nats beside a local root)", func(c *Config) *string { return &c.NATSDir }, nil),
		num("nats_port", "embedded server port (-1: any free port)", func(c *Config) *int { return &c.NATSPort }, func(c *Config) error {
			if c.NATSPort < -1 || c.NATSPort == 0 || c.NATSPort > 65535 {
				return reason("must be a port from 1 to 65535, or -1 for any free port")
			}
			return nil
		}),
		s("nats_sync_interval", "when the embedded server fsyncs JetStream writes: always (each before its publish is acknowledged, so an acknowledged batch survives a power loss) or a duration such as 2m, NATS's own default (faster; a power loss or OS crash may lose what was acknowledged since the last fsync, a process crash loses nothing)", func(c *Config) *string { return &c.NATSSyncInterval }, func(c *Config) error {
			if _, err := SyncInterval(c.NATSSyncInterval); err != nil {
				return reason(err.Error())
			}
			return nil
		}),
		s("stream", "ingest stream name (default OMNIGRAPH_<GRAPH>)", func(c *Config) *string { return &c.Stream }, nil),
		s("dlq_stream", "dead-letter stream name (default OMNIGRAPH_<GRAPH>_DLQ)", func(c *Config) *string { return &c.DLQStream }, nil),
		s("events_stream", "events stream name (default OMNIGRAPH_<GRAPH>_EVENTS)", func(c *Config) *string { return &c.EventsStream }, nil),
		dur("events_max_age", "how long the events stream keeps an event", func(c *Config) *time.Duration { return &c.EventsMaxAge }, time.Minute),
		s("consumer", "durable consumer name (default "+ingest.DefaultConsumer+")", func(c *Config) *string { return &c.Consumer }, nil),
		dur("ack_wait", "JetStream AckWait; InProgress is sent every third of it during a commit", func(c *Config) *time.Duration { return &c.AckWait }, time.Second),
		num("max_deliver", "deliveries before a message is dead-lettered as max_deliver", func(c *Config) *int { return &c.MaxDeliver }, func(c *Config) error {
			if c.MaxDeliver < 2 {
				return reason("must be at least 2")
			}
			return nil
		}),
		dur("lease_ttl", "single-writer lease TTL", func(c *Config) *time.Duration { return &c.LeaseTTL }, 500*time.Millisecond),
		dur("retry_budget", "how long one message may fail in place: then an unrecognised error is dead-lettered as retry_exhausted, a transient one (storage, NATS) is retried on with the worker reported stalled", func(c *Config) *time.Duration { return &c.RetryBudget }, time.Second),
		dur("retry_max", "longest wait between two tries of a message retried in place (the backoff's cap), and how often a message or a recovery held for an operator is tried again", func(c *Config) *time.Duration { return &c.RetryMax }, 100*time.Millisecond),
		s("http", "address of the Prometheus /metrics (Go, process and omnigraph_* metrics), /healthz and /readyz; default 127.0.0.1:9464, so http://127.0.0.1:9464/metrics (empty: none; an address in use fails at start)", func(c *Config) *string { return &c.HTTP }, func(c *Config) error {
			if err := CheckListenAddress(c.HTTP); err != nil {
				return reason(err.Error())
			}
			return nil
		}),
		onOff("build_indices", "the automatic maintenance beside the messages also builds the indices the reference OmniGraph keeps on every main table with rows (BTREE on id, and id, src, dst on edges; INVERTED on each single-column @index or @key String; IVF_FLAT on each @index Vector; BTREE on another @index scalar), and folds one (a BTREE merged with the new rows, an INVERTED index given a partition of them, its partitions merged into one at 8) once the rows it does not cover exceed those it does (needs compaction_fanout above 0)", func(c *Config) *bool { return &c.BuildIndices }),
		num("compaction_fanout", "merge the newest run of same-size fragments of a main table once it holds this many (0: no automatic compaction)", func(c *Config) *int { return &c.CompactionFanout }, func(c *Config) error {
			if c.CompactionFanout < 0 || c.CompactionFanout == 1 {
				return reason("must be 0 (off) or at least 2")
			}
			return nil
		}),
		s("lance_file_version", "Lance data file version of the tables of a graph initialised here: 2.0, 2.1 or 2.2 (default: the engine's, as the reference OmniGraph does); an existing graph keeps its own", func(c *Config) *string { return &c.LanceFileVersion }, func(c *Config) error {
			if c.LanceFileVersion == "" {
				return nil
			}
			if _, err := FileVersion(c.LanceFileVersion); err != nil {
				return reason(err.Error())
			}
			return nil
		}),
		num("index_cache_bytes", "memory kept for the page data of the BTREE indices this process wrote last, in bytes, so that folding one starts from memory instead of reading it back (0: none; the least recently folded go first; the default memory limit counts it among the graphs' state)", func(c *Config) *int { return &c.IndexCacheBytes }, nonNegative("index_cache_bytes")),
		num("gc_percent", "the Go collector's GOGC for this process (the GOGC variable wins; -1 turns the collector off, leaving GOMEMLIMIT)", func(c *Config) *int { return &c.GCPercent }, func(c *Config) error {
			if c.GCPercent < -1 || c.GCPercent == 0 {
				return reason("must be -1 (off) or a positive percentage")
			}
			return nil
		}),
		num("memory_limit", "the Go collector's soft memory limit for this process, in bytes: it collects harder as the heap nears it (0: what the graphs' state keeps live + the pipeline_bytes of every graph served + 48 MiB, followed as the state grows, never above nine tenths of the container's cgroup limit; the GOMEMLIMIT variable wins)", func(c *Config) *int { return &c.MemoryLimit }, nonNegative("memory_limit")),
		num("huge_page_heap", "bytes of the Go heap's growth backed by transparent huge pages where the kernel gives them on request (transparent_hugepage=madvise), at most a quarter of the machine's memory or of the container's limit; 0 (the default): none, the kernel decides (always or never). Worth it only on a host that charges a first touch of fresh memory less in 2 MiB pages than in 4 KiB ones, per byte: measure yours (docs/operators.md, huge pages)", func(c *Config) *int { return &c.HugePageHeap }, nonNegative("huge_page_heap")),
		s("log_level", "least level logged: debug, info, warn or error", func(c *Config) *string { return &c.LogLevel }, func(c *Config) error {
			if _, err := LogLevel(c.LogLevel); err != nil {
				return reason(err.Error())
			}
			return nil
		}),
		dur("stream_max_age", "drop ingest-stream messages older than this (0: keep them)", func(c *Config) *time.Duration { return &c.StreamMaxAge }, 0),
		num("stream_max_bytes", "drop the oldest ingest-stream messages past this many bytes (0: no limit)", func(c *Config) *int { return &c.StreamMaxBytes }, nonNegative("stream_max_bytes")),
		dur("dlq_max_age", "drop dead letters older than this (0: keep them)", func(c *Config) *time.Duration { return &c.DLQMaxAge }, 0),
		num("dlq_max_bytes", "drop the oldest dead letters past this many bytes (0: no limit)", func(c *Config) *int { return &c.DLQMaxBytes }, nonNegative("dlq_max_bytes")),
		num("stream_replicas", "replicas of every stream and bucket the worker creates (ingest, dead letters, events, leases): 3 on a NATS cluster", func(c *Config) *int { return &c.StreamReplicas }, func(c *Config) error {
			if c.StreamReplicas < 1 || c.StreamReplicas > 5 {
				return reason("must be 1 to 5 (JetStream's range)")
			}
			return nil
		}),
		s("placement_cluster", "place those streams in this NATS cluster (empty: the server's choice)", func(c *Config) *string { return &c.PlacementCluster }, nil),
		s("placement_tags", "place those streams on servers with all these tags (comma list)", func(c *Config) *string { return &c.PlacementTags }, nil),
		num("pipeline_depth", "messages in flight: later ones are framed and built while the first commits, every commit, ack and event in stream order (1: one at a time)", func(c *Config) *int { return &c.PipelineDepth }, atLeastOne("pipeline_depth")),
		num("pipeline_bytes", "bound on what the pipeline holds in flight: the held messages (bodies, records, built rows) and the one being committed with what its commit builds; the fetcher waits while it is reached (one message is always held ahead, built only if it fits)", func(c *Config) *int { return &c.PipelineBytes }, atLeastOne("pipeline_bytes")),
		onOff("pprof", "also serve the Go runtime's profiles (heap, goroutines, CPU) at /debug/pprof/ on the http address, for `go tool pprof`; off by default: a profile shows the process's inner workings to whoever reaches that address", func(c *Config) *bool { return &c.Profiles }),
		onOff("local_fsync", "fsync every write to a local root (file and directory) before it counts; off, a power loss may lose the newest commits, a crash still shows none half-written", func(c *Config) *bool { return &c.LocalFsync }),
	}
}

// listSettings are the comma lists, which a YAML file may also give as lists.
var listSettings = []string{"graphs", "placement_tags"}

// fleetName is what a fleet name may hold: it is a token of the heartbeat keys.
var fleetName = regexp.MustCompile(`^[-_=A-Za-z0-9]+$`)

// checkGraphs refuses a graph list with a name that is no subject token, beside graph (one
// graph or a fleet, not both), or beside stream names that would be every graph's at once.
func checkGraphs(c *Config) error {
	if c.Graphs == "" {
		return nil
	}
	if c.Graph != "" {
		return reason(fmt.Sprintf("graph %q is set too: graph serves one graph, graphs a fleet of them; set only one", c.Graph))
	}
	names := splitList(c.Graphs)
	if len(names) == 0 {
		return reason("names no graph")
	}
	for _, g := range names {
		if err := ingest.CheckGraphName(g); err != nil {
			return reason(fmt.Sprintf("%q must be one NATS subject token (no dots, spaces, * or >)", g))
		}
	}
	for _, n := range []struct{ name, v string }{{"stream", c.Stream}, {"dlq_stream", c.DLQStream}, {"events_stream", c.EventsStream}} {
		if n.v != "" {
			return reason(fmt.Sprintf("%s %q is set too: in a fleet every graph has its own streams, named after it", n.name, n.v))
		}
	}
	return nil
}

// SyncInterval reads nats_sync_interval: 0 for "always", else a positive duration.
func SyncInterval(v string) (time.Duration, error) {
	if strings.EqualFold(v, "always") {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q: want always or a positive duration like 2m", v)
	}
	return d, nil
}

// nonNegative is the check of a count where 0 means no limit.
func nonNegative(name string) func(c *Config) error {
	return func(c *Config) error {
		s, _ := lookup(name)
		if strings.HasPrefix(s.get(c), "-") {
			return reason("must be 0 (no limit) or positive")
		}
		return nil
	}
}

func atLeastOne(name string) func(c *Config) error {
	return func(c *Config) error {
		s, _ := lookup(name)
		if n, err := strconv.Atoi(s.get(c)); err != nil || n < 1 {
			return reason("must be at least 1")
		}
		return nil
	}
}

// Names of settings that commands bind as groups (Bind).
var (
	// NATSSettings are taken by every command that talks to NATS.
	NATSSettings = []string{"graph", "nats_url", "nats_creds", "nats_ca", "nats_cert", "nats_key", "stream", "dlq_stream", "events_stream"}
	// RootSettings are taken by every command that opens a graph root.
	RootSettings = []string{"root", "local_fsync"}
)

// AllSettings are the names of every setting, in the order `worker run -h` lists them.
func AllSettings() []string {
	var out []string
	for _, s := range settings() {
		out = append(out, s.name)
	}
	return out
}

// flagName is the command-line spelling of a setting.
func flagName(n string) string { return strings.ReplaceAll(n, "_", "-") }

// EnvName is the environment spelling of a setting.
func EnvName(n string) string { return "OMNIGRAPH_" + strings.ToUpper(n) }

// ConfigEnv names the YAML file when --config does not.
const ConfigEnv = "OMNIGRAPH_CONFIG"

// Error names the setting and source that are wrong.
type Error struct {
	Setting, Source, Reason string
}

func (e *Error) Error() string {
	if e.Setting == "config" {
		// The file itself (unreadable, not YAML): its name is the whole story.
		return fmt.Sprintf("config file %s: %s", e.Source, e.Reason)
	}
	if e.Source == "" {
		return fmt.Sprintf("config %s: %s", e.Setting, e.Reason)
	}
	return fmt.Sprintf("config %s (from %s): %s", e.Setting, e.Source, e.Reason)
}

// NATSURLEnv is the variable every NATS tool reads for the server URL; nats_url falls back to
// it when OMNIGRAPH_NATS_URL is not set.
const NATSURLEnv = "NATS_URL"

// CheckNATSURL refuses a nats_url value nats.Connect would misread: each comma-separated URL
// must have a nats, tls, ws or wss scheme and a host. Empty is allowed (no URL).
func CheckNATSURL(v string) error {
	if v == "" {
		return nil
	}
	for one := range strings.SplitSeq(v, ",") {
		one = strings.TrimSpace(one)
		u, err := url.Parse(one)
		if err != nil {
			return fmt.Errorf("%q is not a URL: %w", one, err)
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Errorf("%q: want a nats://, tls://, ws:// or wss:// URL", one)
		}
		if u.Hostname() == "" {
			return fmt.Errorf("%q has no host", one)
		}
	}
	return nil
}

// CheckListenAddress refuses an http value net.Listen would refuse for its form: it must be
// host:port (the host may be empty: every interface) with a port from 0 (any free one) to
// 65535. Empty is allowed (no server). Whether the port is free is only known by listening.
func CheckListenAddress(v string) error {
	if v == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		return fmt.Errorf("%q: want host:port, e.g. 127.0.0.1:9464 (empty: no HTTP server)", v)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		if p, lerr := net.LookupPort("tcp", port); lerr != nil || p == 0 {
			return fmt.Errorf("%q: port %q is not a port from 0 to 65535", v, port)
		}
	}
	return nil
}

// Load builds `worker run`'s config from args: defaults, then the YAML file named by --config
// or OMNIGRAPH_CONFIG, then OMNIGRAPH_* variables, then flags, every setting bound, root and
// graph (or graphs) required. getenv is os.Getenv outside tests.
func Load(args []string, getenv func(string) string) (*Config, error) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	l := Bind(fs, Defaults(), AllSettings()...).Require(RunRequired...)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, &Error{Setting: "arguments", Source: "command line", Reason: fmt.Sprintf("unexpected %q", fs.Args())}
	}
	return l.Load(getenv)
}

// RunRequired are the settings `worker run` requires: a root, and one graph or several.
var RunRequired = []string{"root", "graph|graphs"}

// Validate refuses a config `worker run` cannot run with, naming the setting.
func (c *Config) Validate() error {
	return c.validate(AllSettings(), RunRequired, nil)
}

// validate checks the named settings, and that the required ones are set. sources says where
// each value came from (flag, variable, file line), for the error; a setting not in it holds
// its default.
func (c *Config) validate(names, required []string, sources map[string]string) error {
	bad := func(name, why string) error {
		src, ok := sources[name]
		if !ok {
			src = "the default"
		}
		return &Error{Setting: name, Source: src, Reason: why}
	}
	for _, req := range required {
		// "a|b": one of them is required.
		alts := strings.Split(req, "|")
		set := false
		for _, name := range alts {
			s, _ := lookup(name)
			set = set || s.get(c) != ""
		}
		if !set {
			// No source set it: the error says where one can.
			name := alts[0]
			why := fmt.Sprintf("is required (--%s, %s or %s: in the --config file)", flagName(name), EnvName(name), name)
			for _, alt := range alts[1:] {
				why += fmt.Sprintf(", or %s (--%s) instead", alt, flagName(alt))
			}
			return &Error{Setting: name, Reason: why}
		}
	}
	for _, s := range settings() {
		if s.check == nil || !slices.Contains(names, s.name) {
			continue
		}
		if err := s.check(c); err != nil {
			return bad(s.name, err.Error())
		}
	}
	return nil
}

// lookup finds a setting by name.
func lookup(name string) (setting, bool) {
	for _, s := range settings() {
		if s.name == name {
			return s, true
		}
	}
	return setting{}, false
}

// FileVersion parses a lance_file_version value, refusing a version this build cannot write.
func FileVersion(s string) (file.Version, error) {
	v, err := file.ParseVersion(s)
	if err != nil {
		return v, err
	}
	if !file.Writable(v) {
		return v, &file.UnsupportedVersionError{Version: v, Op: "write"}
	}
	return v, nil
}

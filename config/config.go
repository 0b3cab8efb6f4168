// Package config merges the worker's settings from defaults, a YAML file, OMNIGRAPH_*
// environment variables and command-line flags (later sources win) into one validated Config.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is everything `worker run` needs.
type Config struct {
	Root       string        `yaml:"root"`
	Graph      string        `yaml:"graph"`
	Schema     string        `yaml:"schema"`
	NATSURL    string        `yaml:"nats_url"`
	NATSCreds  string        `yaml:"nats_creds"`
	NATSCA     string        `yaml:"nats_ca"`
	NATSCert   string        `yaml:"nats_cert"`
	NATSKey    string        `yaml:"nats_key"`
	NATSDir    string        `yaml:"nats_dir"`
	NATSPort   int           `yaml:"nats_port"`
	Stream     string        `yaml:"stream"`
	DLQStream  string        `yaml:"dlq_stream"`
	Consumer   string        `yaml:"consumer"`
	AckWait    time.Duration `yaml:"ack_wait"`
	MaxDeliver int           `yaml:"max_deliver"`
	LeaseTTL   time.Duration `yaml:"lease_ttl"`
	// RetryBudget is how long one message may keep failing in place: past it, an error not
	// known to be transient is dead-lettered as retry_exhausted, and a known-transient one
	// (storage or NATS unwell) keeps being retried with the worker reported stalled.
	RetryBudget time.Duration `yaml:"retry_budget"`
	HTTP        string        `yaml:"http"`
	// GCPercent is the collector's GOGC for `worker run` (the GOGC variable, when set, wins).
	// Framing and Arrow building allocate several times a batch's size while the live heap
	// of a writer is small, so at Go's default of 100 the collector runs through nearly every
	// batch; 400 measured about 10% off the end-to-end latency. GOMEMLIMIT still caps it.
	GCPercent int `yaml:"gc_percent"`
	// CompactionFanout is the size-tier fanout of the worker's automatic compaction between
	// messages: the newest run of same-size fragments of a main table is merged once it holds
	// this many. 0 turns it off.
	CompactionFanout int `yaml:"compaction_fanout"`
}

// Defaults are the values before any source is applied.
func Defaults() Config {
	return Config{NATSPort: 4222, AckWait: 30 * time.Second, MaxDeliver: 10, LeaseTTL: 10 * time.Second, RetryBudget: 10 * time.Minute, HTTP: "127.0.0.1:9464", GCPercent: 400, CompactionFanout: 16}
}

// setting is one field: its YAML/env/flag names and how to set it from text.
type setting struct {
	name, help string
	set        func(c *Config, v string) error
	get        func(c *Config) string
}

func str(get func(c *Config) *string) (func(*Config, string) error, func(*Config) string) {
	return func(c *Config, v string) error { *get(c) = v; return nil }, func(c *Config) string { return *get(c) }
}

func settings() []setting {
	s := func(name, help string, f func(c *Config) *string) setting {
		set, get := str(f)
		return setting{name, help, set, get}
	}
	dur := func(name, help string, f func(c *Config) *time.Duration) setting {
		return setting{name, help, func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("want a duration like 30s: %w", err)
			}
			*f(c) = d
			return nil
		}, func(c *Config) string { return f(c).String() }}
	}
	num := func(name, help string, f func(c *Config) *int) setting {
		return setting{name, help, func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("want a whole number: %w", err)
			}
			*f(c) = n
			return nil
		}, func(c *Config) string { return strconv.Itoa(*f(c)) }}
	}
	return []setting{
		s("root", "graph root URI (path, file://, mem://, s3://, gs://, azblob://)", func(c *Config) *string { return &c.Root }),
		s("graph", "graph name: the <graph> token of omnigraph.<graph>.ingest", func(c *Config) *string { return &c.Graph }),
		s("schema", "initialise the graph from this .pg schema if the root holds none", func(c *Config) *string { return &c.Schema }),
		s("nats_url", "NATS server URL; empty starts an embedded JetStream server", func(c *Config) *string { return &c.NATSURL }),
		s("nats_creds", "NATS credentials file", func(c *Config) *string { return &c.NATSCreds }),
		s("nats_ca", "CA certificate for NATS TLS", func(c *Config) *string { return &c.NATSCA }),
		s("nats_cert", "client certificate for NATS TLS", func(c *Config) *string { return &c.NATSCert }),
		s("nats_key", "client key for NATS TLS", func(c *Config) *string { return &c.NATSKey }),
		s("nats_dir", "embedded server data directory (default: <root>.nats beside a local root)", func(c *Config) *string { return &c.NATSDir }),
		num("nats_port", "embedded server port (-1: any free port)", func(c *Config) *int { return &c.NATSPort }),
		s("stream", "ingest stream name (default OMNIGRAPH_<GRAPH>)", func(c *Config) *string { return &c.Stream }),
		s("dlq_stream", "dead-letter stream name (default OMNIGRAPH_<GRAPH>_DLQ)", func(c *Config) *string { return &c.DLQStream }),
		s("consumer", "durable consumer name (default omnigraph-worker)", func(c *Config) *string { return &c.Consumer }),
		dur("ack_wait", "JetStream AckWait; InProgress is sent every third of it during a commit", func(c *Config) *time.Duration { return &c.AckWait }),
		num("max_deliver", "deliveries before a message is dead-lettered as max_deliver", func(c *Config) *int { return &c.MaxDeliver }),
		dur("lease_ttl", "single-writer lease TTL", func(c *Config) *time.Duration { return &c.LeaseTTL }),
		dur("retry_budget", "how long one message may fail in place: then an unrecognised error is dead-lettered as retry_exhausted, a transient one (storage, NATS) is retried on with the worker reported stalled", func(c *Config) *time.Duration { return &c.RetryBudget }),
		s("http", "address of /metrics, /healthz and /readyz (empty: none)", func(c *Config) *string { return &c.HTTP }),
		num("compaction_fanout", "merge the newest run of same-size fragments of a main table once it holds this many (0: no automatic compaction)", func(c *Config) *int { return &c.CompactionFanout }),
		num("gc_percent", "the Go collector's GOGC for this process (the GOGC variable wins; -1 turns the collector off, leaving GOMEMLIMIT)", func(c *Config) *int { return &c.GCPercent }),
	}
}

// flagName is the command-line spelling of a setting.
func flagName(n string) string { return strings.ReplaceAll(n, "_", "-") }

// EnvName is the environment spelling of a setting.
func EnvName(n string) string { return "OMNIGRAPH_" + strings.ToUpper(n) }

// Error names the setting and source that are wrong.
type Error struct {
	Setting, Source, Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("config %s (from %s): %s", e.Setting, e.Source, e.Reason)
}

// Load builds the config: defaults, then the YAML file named by --config or OMNIGRAPH_CONFIG,
// then OMNIGRAPH_* variables, then flags. getenv is os.Getenv outside tests.
func Load(args []string, getenv func(string) string) (*Config, error) {
	c := Defaults()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	file := fs.String("config", getenv("OMNIGRAPH_CONFIG"), "YAML config file")
	flagVals := map[string]*string{}
	for _, s := range settings() {
		flagVals[s.name] = fs.String(flagName(s.name), "", s.help+" (env "+EnvName(s.name)+")")
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, &Error{Setting: "arguments", Source: "command line", Reason: fmt.Sprintf("unexpected %q", fs.Args())}
	}
	if *file != "" {
		raw, err := os.ReadFile(*file)
		if err != nil {
			return nil, &Error{Setting: "config", Source: *file, Reason: err.Error()}
		}
		dec := yaml.NewDecoder(strings.NewReader(string(raw)))
		dec.KnownFields(true)
		var y map[string]yaml.Node
		if err := dec.Decode(&y); err != nil && !errors.Is(err, io.EOF) {
			return nil, &Error{Setting: "config", Source: *file, Reason: err.Error()}
		}
		known := map[string]setting{}
		for _, s := range settings() {
			known[s.name] = s
		}
		for k, node := range y {
			s, ok := known[k]
			if !ok {
				name := k
				if name == "" {
					name = `""` // an empty key, named visibly
				}
				return nil, &Error{Setting: name, Source: fmt.Sprintf("%s line %d", *file, node.Line), Reason: "unknown setting"}
			}
			if err := s.set(&c, node.Value); err != nil {
				return nil, &Error{Setting: k, Source: fmt.Sprintf("%s line %d", *file, node.Line), Reason: err.Error()}
			}
		}
	}
	for _, s := range settings() {
		if v := getenv(EnvName(s.name)); v != "" {
			if err := s.set(&c, v); err != nil {
				return nil, &Error{Setting: s.name, Source: EnvName(s.name), Reason: err.Error()}
			}
		}
	}
	var ferr error
	fs.Visit(func(f *flag.Flag) {
		for _, s := range settings() {
			if flagName(s.name) == f.Name && ferr == nil {
				if err := s.set(&c, *flagVals[s.name]); err != nil {
					ferr = &Error{Setting: s.name, Source: "--" + f.Name, Reason: err.Error()}
				}
			}
		}
	})
	if ferr != nil {
		return nil, ferr
	}
	return &c, c.Validate()
}

// Validate refuses a config the worker cannot run with, naming the setting.
func (c *Config) Validate() error {
	bad := func(name, why string) error { return &Error{Setting: name, Source: "merged config", Reason: why} }
	switch {
	case c.Root == "":
		return bad("root", "is required (--root or OMNIGRAPH_ROOT)")
	case c.Graph == "" || strings.ContainsAny(c.Graph, ". *>\t\r\n"):
		return bad("graph", fmt.Sprintf("%q must be one NATS subject token (no dots, spaces, * or >)", c.Graph))
	case c.AckWait < time.Second:
		return bad("ack_wait", "must be at least 1s")
	case c.MaxDeliver < 2:
		return bad("max_deliver", "must be at least 2")
	case c.LeaseTTL < 500*time.Millisecond:
		return bad("lease_ttl", "must be at least 500ms")
	case c.RetryBudget < time.Second:
		return bad("retry_budget", "must be at least 1s")
	case c.GCPercent < -1 || c.GCPercent == 0:
		return bad("gc_percent", "must be -1 (off) or a positive percentage")
	case c.CompactionFanout < 0 || c.CompactionFanout == 1:
		return bad("compaction_fanout", "must be 0 (off) or at least 2")
	case (c.NATSCert == "") != (c.NATSKey == ""):
		return bad("nats_cert", "nats_cert and nats_key go together")
	}
	return nil
}

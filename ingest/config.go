// Package ingest is the JetStream side of the worker: it consumes graph batches for one graph
// in stream order, applies each as one load transaction, acknowledges only after the commit is
// visible, and routes batches that can never succeed to dead-letter subjects.
package ingest

import (
	"fmt"
	"strings"
	"time"
)

// Header names of the message contract.
const (
	HeaderBranch = "Omnigraph-Branch"
	HeaderFrom   = "Omnigraph-From"
	HeaderMode   = "Omnigraph-Mode"
	HeaderActor  = "Omnigraph-Actor"
	HeaderMsgID  = "Nats-Msg-Id"

	HeaderErrorKind   = "Omnigraph-Error-Kind"
	HeaderError       = "Omnigraph-Error"
	HeaderErrorDetail = "Omnigraph-Error-Detail"
	HeaderOrigStream  = "Omnigraph-Original-Stream"
	HeaderOrigSubject = "Omnigraph-Original-Subject"
	HeaderOrigSeq     = "Omnigraph-Original-Sequence"
	// HeaderOrigMsgID is the producer's Nats-Msg-Id on a dead letter (whose own Nats-Msg-Id
	// is dlq:<stream>@<created>:<seq>); a replay keeps it, so a batch dead-lettered again still
	// names it.
	HeaderOrigMsgID  = "Omnigraph-Original-Msg-Id"
	HeaderDeliveries = "Omnigraph-Delivery-Count"
	// HeaderOrigError and HeaderOrigErrorKind are the error (and its kind) a batch was first
	// dead-lettered with: a replay carries them, and a replay dead-lettered again keeps them
	// beside its own Omnigraph-Error, so a wrong replay never hides why the batch failed first.
	HeaderOrigError     = "Omnigraph-Original-Error"
	HeaderOrigErrorKind = "Omnigraph-Original-Error-Kind"
	HeaderDeadAt        = "Omnigraph-Dead-Lettered-At"
	// HeaderBodyOmitted marks a dead letter sent by reference: its value is the body's size,
	// and the body is the original message (Omnigraph-Original-Stream and -Sequence).
	HeaderBodyOmitted = "Omnigraph-Body-Omitted"
)

// MaxBatchBytes is the largest graph batch body (the engine's request limit).
const MaxBatchBytes = 32 << 20

// MaxMessageBytes is what the streams accept: a 32 MiB body plus room for headers. The NATS
// server's max_payload must be at least this (the embedded server is configured for it).
const MaxMessageBytes = MaxBatchBytes + 64<<10

// Defaults of Config's zero values (config.Defaults starts from the same ones).
const (
	DefaultAckWait    = 30 * time.Second
	DefaultMaxDeliver = 10
	DefaultConsumer   = "omnigraph-worker"
	DefaultRetryMax   = 30 * time.Second
	// DefaultRetryBudget is long enough to ride out a store's or a network's bad minutes,
	// short enough that a message failing for a reason nobody recognised does not hold its
	// graph for hours.
	DefaultRetryBudget = 10 * time.Minute
	// DefaultEventsMaxAge keeps a week of events: a pipeline down over a weekend still finds
	// the merge it chains on.
	DefaultEventsMaxAge = 7 * 24 * time.Hour
)

// Config names the streams and consumer of one graph and tunes delivery. The zero value of a
// field is its default; config.Config.Ingest builds one from the worker's settings.
type Config struct {
	Graph     string // the <graph> subject token
	Stream    string // ingest stream; default StreamName(Graph)
	DLQStream string // dead-letter stream; default DLQStreamName(Graph)
	// EventsStream stores the graph's events subject; default EventsStreamName(Graph).
	EventsStream string
	EventsMaxAge time.Duration // how long EventsStream keeps an event; default DefaultEventsMaxAge
	Consumer     string        // durable pull consumer; default DefaultConsumer
	AckWait      time.Duration // default DefaultAckWait; InProgress is sent every AckWait/3 during a load
	MaxDeliver   int           // default DefaultMaxDeliver; the last delivery is dead-lettered instead of retried
	RetryMax     time.Duration // cap of the in-place retry backoff; default DefaultRetryMax
	// RetryBudget is how long one message may keep failing in place with an error not known
	// to be transient before it is dead-lettered as retry_exhausted, or, for a known-transient
	// error, before the worker reports itself stalled; default DefaultRetryBudget.
	RetryBudget time.Duration
	// CompactionFanout is the size-tier fanout of the compaction run beside the messages
	// (engine.OptimizeOptions.Fanout): 0 turns automatic compaction off (the same meaning as
	// the compaction_fanout setting), otherwise at least 2.
	CompactionFanout int
	// BuildIndices has that maintenance also build the indices the reference OmniGraph
	// keeps on every main table with rows that lacks one (engine.OptimizeOptions.Indices).
	BuildIndices bool
	// StreamMaxAge and StreamMaxBytes cap the ingest stream, DLQMaxAge and DLQMaxBytes the
	// dead-letter stream; 0 is unlimited. Setup applies them to existing streams too.
	StreamMaxAge, DLQMaxAge     time.Duration
	StreamMaxBytes, DLQMaxBytes int64
	// Replication is the replicas and placement of every stream and bucket Setup and
	// AcquireLease create or update (zero: one copy, placed by the server).
	Replication Replication
	// PipelineDepth is how many messages the worker holds at once (the consumer's
	// MaxAckPending): later ones are framed and built while the first commits. 0 or 1 is one
	// message at a time, the consumer as it was before the pipeline; config.Defaults sets
	// DefaultPipelineDepth.
	PipelineDepth int
	// PipelineBytes bounds what the pipeline counts in flight: the held messages (bodies,
	// records, built rows) and the one being committed with what its commit builds. The
	// fetcher waits while it is reached, but one message is always held ahead; default
	// DefaultPipelineBytes.
	PipelineBytes int64
	// footprint, set by WithFootprint, is the process's sum of what its pipelines count.
	footprint *Footprint
}

// Defaults of the pipeline settings.
const (
	DefaultPipelineDepth = 4
	DefaultPipelineBytes = 128 << 20
)

// GraphNameError is a graph name that cannot be the <graph> token of the graph's subjects.
type GraphNameError struct{ Name string }

func (e *GraphNameError) Error() string {
	return fmt.Sprintf("graph name %q must be one NATS subject token (no dots, spaces, * or >)", e.Name)
}

// CheckGraphName refuses a graph name that is not one NATS subject token.
func CheckGraphName(name string) error {
	if name == "" || strings.ContainsAny(name, ". *>\t\r\n") {
		return &GraphNameError{Name: name}
	}
	return nil
}

// StreamName is the default ingest stream of graph: OMNIGRAPH_<GRAPH>, dashes as underscores.
func StreamName(graph string) string {
	return "OMNIGRAPH_" + strings.ToUpper(strings.ReplaceAll(graph, "-", "_"))
}

// DLQStreamName is the default dead-letter stream of graph: OMNIGRAPH_<GRAPH>_DLQ.
func DLQStreamName(graph string) string { return StreamName(graph) + "_DLQ" }

// EventsStreamName is the default events stream of graph: OMNIGRAPH_<GRAPH>_EVENTS.
func EventsStreamName(graph string) string { return StreamName(graph) + "_EVENTS" }

func (c *Config) withDefaults() error {
	if err := CheckGraphName(c.Graph); err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	if c.CompactionFanout < 0 || c.CompactionFanout == 1 {
		return fmt.Errorf("ingest: compaction fanout %d: want 0 (off) or at least 2", c.CompactionFanout)
	}
	if c.StreamMaxAge < 0 || c.DLQMaxAge < 0 || c.StreamMaxBytes < 0 || c.DLQMaxBytes < 0 {
		return fmt.Errorf("ingest: stream limits must be 0 (unlimited) or positive")
	}
	if c.PipelineDepth < 0 || c.PipelineBytes < 0 {
		return fmt.Errorf("ingest: pipeline depth and bytes must be 0 (default) or positive")
	}
	if c.PipelineDepth == 0 {
		c.PipelineDepth = 1
	}
	if c.PipelineBytes == 0 {
		c.PipelineBytes = DefaultPipelineBytes
	}
	if c.Stream == "" {
		c.Stream = StreamName(c.Graph)
	}
	if c.DLQStream == "" {
		c.DLQStream = DLQStreamName(c.Graph)
	}
	if c.EventsStream == "" {
		c.EventsStream = EventsStreamName(c.Graph)
	}
	if c.EventsMaxAge <= 0 {
		c.EventsMaxAge = DefaultEventsMaxAge
	}
	if c.Consumer == "" {
		c.Consumer = DefaultConsumer
	}
	if c.AckWait <= 0 {
		c.AckWait = DefaultAckWait
	}
	if c.MaxDeliver <= 0 {
		c.MaxDeliver = DefaultMaxDeliver
	}
	if c.RetryMax <= 0 {
		c.RetryMax = DefaultRetryMax
	}
	if c.RetryBudget <= 0 {
		c.RetryBudget = DefaultRetryBudget
	}
	return nil
}

// consumed are the subjects of the ingest stream, all applied in one stream order.
func (c *Config) consumed() []string {
	return []string{c.IngestSubject(), c.MergeSubject(), c.MaintenanceSubject(), c.SchemaSubject()}
}

// Subjects of one graph.
func (c *Config) IngestSubject() string           { return "omnigraph." + c.Graph + ".ingest" }
func (c *Config) MergeSubject() string            { return "omnigraph." + c.Graph + ".merge" }
func (c *Config) MaintenanceSubject() string      { return "omnigraph." + c.Graph + ".maintenance" }
func (c *Config) SchemaSubject() string           { return "omnigraph." + c.Graph + ".schema" }
func (c *Config) EventSubject() string            { return "omnigraph." + c.Graph + ".events" }
func (c *Config) DLQSubject(reason string) string { return "omnigraph." + c.Graph + ".dlq." + reason }

// maxBytes is a stream's MaxBytes for a limit where 0 means unlimited (JetStream's -1).
func maxBytes(n int64) int64 {
	if n == 0 {
		return -1
	}
	return n
}

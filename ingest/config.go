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
	HeaderDeliveries  = "Omnigraph-Delivery-Count"
	HeaderDeadAt      = "Omnigraph-Dead-Lettered-At"
	// HeaderBodyOmitted marks a dead letter sent by reference: its value is the body's size,
	// and the body is the original message (Omnigraph-Original-Stream and -Sequence).
	HeaderBodyOmitted = "Omnigraph-Body-Omitted"
)

// MaxBatchBytes is the largest graph batch body (the engine's request limit).
const MaxBatchBytes = 32 << 20

// MaxMessageBytes is what the streams accept: a 32 MiB body plus room for headers. The NATS
// server's max_payload must be at least this (the embedded server is configured for it).
const MaxMessageBytes = MaxBatchBytes + 64<<10

// DefaultRetryBudget is the default Config.RetryBudget: long enough to ride out a store's or a
// network's bad minutes, short enough that a message failing for a reason nobody recognised
// does not hold its graph for hours.
const DefaultRetryBudget = 10 * time.Minute

// Config names the streams and consumer of one graph and tunes delivery.
type Config struct {
	Graph      string        // the <graph> subject token
	Stream     string        // ingest stream; default OMNIGRAPH_<GRAPH>
	DLQStream  string        // dead-letter stream; default OMNIGRAPH_<GRAPH>_DLQ
	Consumer   string        // durable pull consumer; default omnigraph-worker
	AckWait    time.Duration // default 30s; InProgress is sent every AckWait/3 during a load
	MaxDeliver int           // default 10; the last delivery is dead-lettered instead of retried
	RetryMax   time.Duration // cap of the in-place retry backoff; default 30s
	// RetryBudget is how long one message may keep failing in place with an error not known
	// to be transient before it is dead-lettered as retry_exhausted, or, for a known-transient
	// error, before the worker reports itself stalled; default DefaultRetryBudget.
	RetryBudget time.Duration
	// CompactionFanout is the size-tier fanout of the compaction run between messages
	// (engine.OptimizeOptions.Fanout); 0 means engine.DefaultCompactionFanout, negative turns
	// automatic compaction off.
	CompactionFanout int
}

func (c *Config) withDefaults() error {
	if c.Graph == "" || strings.ContainsAny(c.Graph, ". *>\t\r\n") {
		return fmt.Errorf("ingest: graph name %q must be one NATS subject token", c.Graph)
	}
	up := strings.ToUpper(strings.NewReplacer("-", "_").Replace(c.Graph))
	if c.Stream == "" {
		c.Stream = "OMNIGRAPH_" + up
	}
	if c.DLQStream == "" {
		c.DLQStream = "OMNIGRAPH_" + up + "_DLQ"
	}
	if c.Consumer == "" {
		c.Consumer = "omnigraph-worker"
	}
	if c.AckWait <= 0 {
		c.AckWait = 30 * time.Second
	}
	if c.MaxDeliver <= 0 {
		c.MaxDeliver = 10
	}
	if c.RetryMax <= 0 {
		c.RetryMax = 30 * time.Second
	}
	if c.RetryBudget <= 0 {
		c.RetryBudget = DefaultRetryBudget
	}
	return nil
}

// consumed are the subjects of the ingest stream, all applied in one stream order.
func (c *Config) consumed() []string {
	return []string{c.IngestSubject(), c.MergeSubject(), c.MaintenanceSubject()}
}

// Subjects of one graph.
func (c *Config) IngestSubject() string           { return "omnigraph." + c.Graph + ".ingest" }
func (c *Config) MergeSubject() string            { return "omnigraph." + c.Graph + ".merge" }
func (c *Config) MaintenanceSubject() string      { return "omnigraph." + c.Graph + ".maintenance" }
func (c *Config) EventSubject() string            { return "omnigraph." + c.Graph + ".events" }
func (c *Config) DLQSubject(reason string) string { return "omnigraph." + c.Graph + ".dlq." + reason }

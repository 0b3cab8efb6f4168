package config

import (
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/omnigraph/omnigraph-worker/ingest"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// Ingest is the ingest configuration of c's graph, the stream and consumer names filled in
// with ingest's defaults where c leaves them empty (ingest computes those names; this only
// asks it), so that a tool reading a graph's dead letters finds the streams its worker made.
func (c *Config) Ingest() ingest.Config {
	ic := ingest.Config{Graph: c.Graph, Stream: c.Stream, DLQStream: c.DLQStream, EventsStream: c.EventsStream, EventsMaxAge: c.EventsMaxAge, Consumer: c.Consumer,
		AckWait: c.AckWait, MaxDeliver: c.MaxDeliver, RetryBudget: c.RetryBudget, RetryMax: c.RetryMax, CompactionFanout: c.CompactionFanout, BuildIndices: c.BuildIndices,
		StreamMaxAge: c.StreamMaxAge, StreamMaxBytes: int64(c.StreamMaxBytes), DLQMaxAge: c.DLQMaxAge, DLQMaxBytes: int64(c.DLQMaxBytes),
		Replication:   ingest.Replication{Replicas: c.StreamReplicas, Cluster: c.PlacementCluster, Tags: splitList(c.PlacementTags)},
		PipelineDepth: c.PipelineDepth, PipelineBytes: int64(c.PipelineBytes)}
	if c.Graph != "" {
		if ic.Stream == "" {
			ic.Stream = ingest.StreamName(c.Graph)
		}
		if ic.DLQStream == "" {
			ic.DLQStream = ingest.DLQStreamName(c.Graph)
		}
		if ic.EventsStream == "" {
			ic.EventsStream = ingest.EventsStreamName(c.Graph)
		}
	}
	if ic.Consumer == "" {
		ic.Consumer = ingest.DefaultConsumer
	}
	return ic
}

// GraphList is the graphs setting's graphs, each once, in the order given.
func (c *Config) GraphList() []string {
	var out []string
	for _, g := range splitList(c.Graphs) {
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

// IngestOf is the ingest configuration of graph in a fleet: Ingest with that graph, and so
// with its own streams.
func (c *Config) IngestOf(graph string) ingest.Config {
	one := *c
	one.Graph, one.Graphs = graph, ""
	return one.Ingest()
}

// GraphRoot is graph's root in a fleet: <root>/<graph>, the graph name added to a URI's path
// (before its parameters: s3://bucket/graphs/g?endpoint=… for s3://bucket/graphs?endpoint=…).
func (c *Config) GraphRoot(graph string) string {
	if !strings.Contains(c.Root, "://") {
		return filepath.Join(c.Root, graph)
	}
	u, err := url.Parse(c.Root)
	if err != nil {
		return strings.TrimSuffix(c.Root, "/") + "/" + graph // storage.Open names the error
	}
	u.Path = path.Join("/", u.Path, graph)
	u.RawPath = ""
	return u.String()
}

// splitList is a comma list's items, trimmed, empty ones dropped.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// NATSOptions are the connection options of c's NATS settings (credentials, TLS), the
// connection named client as the server's monitoring shows it.
func (c *Config) NATSOptions(client string) []nats.Option {
	opts := []nats.Option{nats.Name(client)}
	if c.NATSCreds != "" {
		opts = append(opts, nats.UserCredentials(c.NATSCreds))
	}
	if c.NATSCA != "" {
		opts = append(opts, nats.RootCAs(c.NATSCA))
	}
	if c.NATSCert != "" {
		opts = append(opts, nats.ClientCert(c.NATSCert, c.NATSKey))
	}
	return opts
}

// StorageOptions are the options of storage.Open for a graph root under c.
func (c *Config) StorageOptions() []storage.Option {
	return []storage.Option{storage.WithLocalFsync(c.LocalFsync)}
}

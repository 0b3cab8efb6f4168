package ingest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Replication is how JetStream keeps every stream and bucket the worker creates (ingest, dead
// letters, events, the lease bucket). One setting for all of them, because losing any one
// loses the graph's guarantees: acked batches (ingest), the only copy of a refused batch
// (dead letters), outcomes a waiting CLI or pipeline needs (events), or the single-writer fence
// (leases).
type Replication struct {
	Replicas int      // copies of each stream; 0 is 1
	Cluster  string   // place them in this cluster ("": wherever the server puts them)
	Tags     []string // on servers carrying all these tags
}

func (r Replication) replicas() int { return max(r.Replicas, 1) }

// placement is the JetStream placement of r, nil when r asks for none.
func (r Replication) placement() *jetstream.Placement {
	if r.Cluster == "" && len(r.Tags) == 0 {
		return nil
	}
	return &jetstream.Placement{Cluster: r.Cluster, Tags: r.Tags}
}

// JetStream's answers to a stream it cannot place as asked.
const (
	codeNoPeers              jetstream.ErrorCode = 10005 // no suitable peers for placement
	codeInsufficientResource jetstream.ErrorCode = 10023 // insufficient resources
	codeReplicasUnsupported  jetstream.ErrorCode = 10074 // replicas > 1 not supported in non-clustered mode
)

// PlacementError is a stream or bucket JetStream refused to place with the configured replicas
// and placement: a configuration the NATS deployment cannot honour, which no retry mends.
type PlacementError struct {
	Setting  string // the settings to change, e.g. "stream_replicas"
	Stream   string // the stream refused (the lease bucket's is KV_omnigraph_leases)
	Replicas int
	Cluster  string
	Tags     []string
	Answer   string // JetStream's own words
	Err      error  // JetStream's *jetstream.APIError
}

func (e *PlacementError) Error() string {
	where := ""
	if e.Cluster != "" {
		where += fmt.Sprintf(" in cluster %q", e.Cluster)
	}
	if len(e.Tags) > 0 {
		where += fmt.Sprintf(" on servers tagged %s", strings.Join(e.Tags, ","))
	}
	return fmt.Sprintf("config %s: JetStream cannot place stream %s with %d replicas%s: %s", e.Setting, e.Stream, e.Replicas, where, e.Answer)
}

func (e *PlacementError) Unwrap() error { return e.Err }

// placementError is err as a *PlacementError when it is JetStream refusing to place stream as
// r asks, else err unchanged.
func placementError(err error, stream string, r Replication) error {
	var api *jetstream.APIError
	if !errors.As(err, &api) {
		return err
	}
	switch api.ErrorCode {
	case codeNoPeers, codeInsufficientResource, codeReplicasUnsupported:
	default:
		return err
	}
	setting := "stream_replicas"
	if r.Cluster != "" {
		setting += ", placement_cluster"
	}
	if len(r.Tags) > 0 {
		setting += ", placement_tags"
	}
	return &PlacementError{Setting: setting, Stream: stream, Replicas: r.replicas(), Cluster: r.Cluster, Tags: r.Tags, Answer: api.Description, Err: err}
}

// Bucket creates or updates the key-value bucket name, keeping one revision per key and
// dropping entries ttl after their last put, with r's replicas and placement (a
// *PlacementError when JetStream cannot honour them). The lease bucket is one; a fleet's
// membership bucket another, placed alike since either lost would leave graphs unserved.
func (r Replication) Bucket(ctx context.Context, js jetstream.JetStream, name string, ttl time.Duration) (jetstream.KeyValue, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name, TTL: ttl, History: 1,
		Replicas: r.replicas(), Placement: r.placement()})
	if err != nil {
		return nil, placementError(err, "KV_"+name, r)
	}
	return kv, nil
}

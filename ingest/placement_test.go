package ingest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestReplicasASingleServerCannotPlace: three replicas asked of one (real, standalone)
// nats-server. Setup and the lease bucket both refuse with a *PlacementError naming the
// setting, the stream, the replicas and the server's answer; with one replica the same
// server takes them, and every stream and the bucket carry the replicas asked.
func TestReplicasASingleServerCannotPlace(t *testing.T) {
	ns, err := StartEmbedded(t.TempDir(), -1)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()

	w, err := New(nc, nil, Config{Graph: "demo", Replication: Replication{Replicas: 3}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = w.Setup(ctx)
	var pe *PlacementError
	if !errors.As(err, &pe) {
		t.Fatalf("Setup with 3 replicas on one server: %v, want a *PlacementError", err)
	}
	if pe.Stream != "OMNIGRAPH_DEMO" || pe.Replicas != 3 || pe.Setting != "stream_replicas" || !strings.Contains(pe.Answer, "replicas > 1 not supported") {
		t.Fatalf("placement error %+v", pe)
	}
	for _, want := range []string{"stream_replicas", "OMNIGRAPH_DEMO", "3 replicas", "not supported in non-clustered mode"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("%q does not say %q", err, want)
		}
	}
	_, err = AcquireLease(ctx, js, "demo", "a", DefaultLeaseTTL, Replication{Replicas: 3, Cluster: "east", Tags: []string{"ssd"}})
	if !errors.As(err, &pe) || pe.Stream != "KV_"+LeaseBucket || pe.Setting != "stream_replicas, placement_cluster, placement_tags" {
		t.Fatalf("lease bucket with 3 replicas on one server: %v", err)
	}
	if !strings.Contains(err.Error(), `in cluster "east" on servers tagged ssd`) {
		t.Fatalf("%q does not name the placement", err)
	}

	// What a single server can place is placed, and every stream says how.
	one := Replication{Replicas: 1}
	if w, err = New(nc, nil, Config{Graph: "demo", Replication: one}, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := AcquireLease(ctx, js, "demo", "a", DefaultLeaseTTL, one)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	for _, name := range []string{"OMNIGRAPH_DEMO", "OMNIGRAPH_DEMO_DLQ", "OMNIGRAPH_DEMO_EVENTS", "KV_" + LeaseBucket} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if r := s.CachedInfo().Config.Replicas; r != 1 {
			t.Fatalf("%s has %d replicas", name, r)
		}
	}
}

// TestOtherErrorsAreNotPlacementErrors: only JetStream's placement answers become
// *PlacementError.
func TestOtherErrorsAreNotPlacementErrors(t *testing.T) {
	other := &jetstream.APIError{Code: 400, ErrorCode: 10058, Description: "stream name already in use"}
	if err := placementError(other, "S", Replication{Replicas: 3}); err != other {
		t.Fatalf("%v became %T", err, err)
	}
	if err := placementError(nil, "S", Replication{}); err != nil {
		t.Fatal(err)
	}
	no := &jetstream.APIError{Code: 400, ErrorCode: codeNoPeers, Description: "no suitable peers for placement"}
	var pe *PlacementError
	if err := placementError(no, "S", Replication{Replicas: 5}); !errors.As(err, &pe) || pe.Replicas != 5 || !errors.Is(err, no) {
		t.Fatalf("%v", err)
	}
}

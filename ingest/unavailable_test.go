package ingest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestUnavailable: what JetStream says when it cannot answer now is waited for; what it
// refuses, and a context the caller ended, are not.
func TestUnavailable(t *testing.T) {
	api := func(code jetstream.ErrorCode, status int) error {
		return fmt.Errorf("ingest: stream OMNIGRAPH_DEMO: %w", &jetstream.APIError{ErrorCode: code, Code: status, Description: "x"})
	}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"JetStream's request timeout", fmt.Errorf("ingest: stream OMNIGRAPH_DEMO: %w", context.DeadlineExceeded), true},
		{"nats timeout", nats.ErrTimeout, true},
		{"no responders", fmt.Errorf("x: %w", nats.ErrNoResponders), true},
		{"disconnected", nats.ErrDisconnected, true},
		{"reconnecting", nats.ErrConnectionReconnecting, true},
		{"JetStream not enabled", jetstream.ErrJetStreamNotEnabled, true},
		{"not enabled for the account", jetstream.ErrJetStreamNotEnabledForAccount, true},
		{"cluster temporarily unavailable", api(codeClusterNotAvailable, 503), true},
		{"no cluster leader", api(codeClusterNotLeader, 500), true},
		{"store full", api(codeStorageExceeded, 500), true},
		{"store failed", api(codeStreamStoreFailed, 503), true},
		{"nil", nil, false},
		{"context cancelled", context.Canceled, false},
		{"placement", placementError(api(codeReplicasUnsupported, 500), "OMNIGRAPH_DEMO", Replication{Replicas: 3}), false},
		{"subjects overlap", api(10065, 400), false},
		{"connection closed", nats.ErrConnectionClosed, false},
		{"the server reports no creation time", &StreamIdentityError{Stream: "OMNIGRAPH_DEMO"}, false},
	} {
		if got := unavailable(c.err); got != c.want {
			t.Errorf("%s (%v): unavailable %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// TestServiceStartsBeforeJetStream: a worker started against a server with JetStream off
// (as a cluster's servers answer before they elect a meta leader, or a server restarting
// without its store) does not exit: /readyz says why it waits, past the retry budget it
// reports itself stalled, and once JetStream is on it makes its streams, takes the lease,
// is ready, commits, and the stall clears.
func TestServiceStartsBeforeJetStream(t *testing.T) {
	dir := t.TempDir()
	ns := startJetStream(t, dir, -1, 0)
	port := ns.Addr().(*net.TCPAddr).Port
	t.Cleanup(func() { ns.Shutdown() })
	sg := newSvcGraphOn(t, ns.ClientURL())
	const budget = time.Second
	a := sg.runConfig("a", Config{Graph: "demo", AckWait: 2 * time.Second, RetryBudget: budget, RetryMax: 500 * time.Millisecond})
	a.waitHeld(20*time.Second, "stalled: ", "stream setup", "no responders")
	select {
	case err := <-a.done:
		t.Fatalf("Run returned %v while JetStream was off", err)
	default:
	}
	if got := testutil.ToFloat64(a.svc.metrics.stalledGauge); got != 1 {
		t.Fatalf("omnigraph_stalled %v while JetStream is off", got)
	}
	if a.logs.FilterMessageSnippet("JetStream unavailable for the streams' setup").Len() == 0 {
		t.Fatalf("no warning logged: %v", a.logs.All())
	}

	ns.Shutdown()
	ns.WaitForShutdown()
	ns = startJetStream(t, dir, port, 1<<30)
	a.waitReady()
	if st := a.svc.metrics.Status(); st.Stalled != "" || testutil.ToFloat64(a.svc.metrics.stalledGauge) != 0 {
		t.Fatalf("still stalled: %+v", st)
	}
	if a.logs.FilterMessageSnippet("stall over").Len() == 0 {
		t.Fatalf("the stall's end not logged: %v", a.logs.All())
	}
	events := sg.events()
	sg.eventsResubscribed()
	sg.publish(`{"type":"Person","data":{"handle":"p1","name":"P","active":true}}`)
	if ev := nextEvent(t, events); ev.GraphCommitID == "" || ev.SourceSequence != 1 {
		t.Fatalf("event %+v, want message 1 committed", ev)
	}
	if h := sg.holder(); h != "a" {
		t.Fatalf("lease held by %q", h)
	}
}

// TestServiceExitsOnARefusedSetup: what waiting cannot mend still ends Run at once, with the
// typed error: three replicas on one server.
func TestServiceExitsOnARefusedSetup(t *testing.T) {
	sg := newSvcGraph(t)
	a := sg.runConfig("a", Config{Graph: "demo", AckWait: 2 * time.Second, Replication: Replication{Replicas: 3}})
	select {
	case err := <-a.done:
		a.done <- err
		var pe *PlacementError
		if !errors.As(err, &pe) || pe.Stream != "OMNIGRAPH_DEMO" {
			t.Fatalf("Run returned %v, want a *PlacementError for OMNIGRAPH_DEMO", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return on a placement JetStream refused")
	}
}

// TestServiceStopsWhileWaitingForJetStream: a worker waiting for JetStream to make its
// streams stops at once when told to, with no error and the HTTP server closed.
func TestServiceStopsWhileWaitingForJetStream(t *testing.T) {
	ns := startJetStream(t, t.TempDir(), -1, 0)
	t.Cleanup(func() { ns.Shutdown() })
	sg := newSvcGraphOn(t, ns.ClientURL())
	a := sg.runConfig("a", Config{Graph: "demo", AckWait: 2 * time.Second})
	for deadline := time.Now().Add(20 * time.Second); a.logs.FilterMessageSnippet("JetStream unavailable for the streams' setup").Len() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no wait for JetStream logged: %v", a.logs.All())
		}
	}
	if err := a.end(); err != nil {
		t.Fatalf("Run returned %v when stopped while waiting for JetStream", err)
	}
	if code := a.readyz(); code != 0 {
		t.Fatalf("/readyz answered %d after Run returned", code)
	}
}

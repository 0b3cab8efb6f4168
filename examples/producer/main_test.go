package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestProducer builds the example (this test is in its package) and runs its publish and wait
// against an in-process JetStream server, with a stand-in for the worker that answers the
// batch with a committed event, as the worker does.
func TestProducer(t *testing.T) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	defer srv.Shutdown()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, subject := range map[string]string{"OMNIGRAPH_EX_1": "omnigraph.ex-1.ingest", "OMNIGRAPH_EX_1_EVENTS": "omnigraph.ex-1.events"} {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}}); err != nil {
			t.Fatal(err)
		}
	}
	// An event of another message first: Wait must pass it over.
	if _, err := js.Publish(ctx, "omnigraph.ex-1.events", []byte(`{"kind":"load","outcome":"committed","source_stream":"OMNIGRAPH_EX_1","source_sequence":99}`)); err != nil {
		t.Fatal(err)
	}
	// The stand-in worker: each ingest message gets a held, then a committed event.
	cons, err := js.CreateOrUpdateConsumer(ctx, "OMNIGRAPH_EX_1", jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		meta, _ := m.Metadata()
		if m.Headers().Get("Omnigraph-Mode") != "append" || m.Headers().Get(jetstream.MsgIDHeader) != "ex-batch-1" {
			t.Errorf("headers %v", m.Headers())
		}
		_ = m.DoubleAck(ctx)
		for _, outcome := range []string{"held", "committed"} {
			ev, _ := json.Marshal(Event{Kind: "load", Outcome: outcome, SourceStream: meta.Stream, SourceSequence: meta.Sequence.Stream, SourceMsgID: "ex-batch-1", GraphCommitID: "c1"})
			if _, err := js.Publish(ctx, "omnigraph.ex-1.events", ev); err != nil {
				t.Error(err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()

	ack, from, err := Publish(ctx, js, Batch{Graph: "ex-1", Mode: "append", MsgID: "ex-batch-1", Body: []byte(`{"type":"Person","data":{"handle":"a"}}` + "\n")})
	if err != nil {
		t.Fatal(err)
	}
	if from != 1 || ack.Sequence != 1 {
		t.Fatalf("from %d, ack sequence %d", from, ack.Sequence)
	}
	held, err := Wait(ctx, js, "ex-1", ack, from, true)
	if err != nil || held.Outcome != "held" {
		t.Fatalf("stop at held: %+v, %v", held, err)
	}
	ev, err := Wait(ctx, js, "ex-1", ack, from, false)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Outcome != "committed" || ev.SourceSequence != ack.Sequence || ev.GraphCommitID != "c1" {
		t.Fatalf("event %+v", ev)
	}
	// A publish again with the same id is a duplicate JetStream drops.
	again, _, err := Publish(ctx, js, Batch{Graph: "ex-1", Mode: "append", MsgID: "ex-batch-1", Body: []byte("{}\n")})
	if err != nil || !again.Duplicate || again.Sequence != ack.Sequence {
		t.Fatalf("republish: %+v, %v", again, err)
	}
}

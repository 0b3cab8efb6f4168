package ingest

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A publish to a graph whose stream does not exist says so, naming the graph and subject.
func TestPublishNoStream(t *testing.T) {
	ns, err := StartEmbedded(t.TempDir(), -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Graph: "demo"}
	_, err = Publish(context.Background(), js, cfg, nats.NewMsg(cfg.IngestSubject()))
	var nse *NoStreamError
	if !errors.As(err, &nse) || err.Error() != "no stream for graph demo: is its worker running? (subject omnigraph.demo.ingest)" {
		t.Fatalf("err %v", err)
	}
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "S", Subjects: []string{cfg.IngestSubject()}}); err != nil {
		t.Fatal(err)
	}
	if ack, err := Publish(context.Background(), js, cfg, nats.NewMsg(cfg.IngestSubject())); err != nil || ack.Sequence != 1 {
		t.Fatalf("publish with a stream: %v %v", ack, err)
	}
}

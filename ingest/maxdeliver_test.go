package ingest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A message on its last delivery (max_deliver) is dead-lettered by the worker under the reason
// max_deliver, and counted under it: omnigraph_dead_letters_total{reason="max_deliver"}, not
// under the kind of the error it carries.
func TestLastDeliveryIsCountedAsMaxDeliver(t *testing.T) {
	ctx := context.Background()
	m := NewMetrics()
	h := start(t, func(w *Worker) { w.UseMetrics(m) })
	h.stop()
	<-h.done
	h.done <- nil
	h.w.cfg.MaxDeliver, h.w.cfg.AckWait = 2, 300*time.Millisecond
	if err := h.w.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	h.publish(`{"type":"Person","data":{"handle":"poison","name":"P","active":true}}`, nil)
	// The first delivery dies unacknowledged (a worker killed on it).
	b, err := h.w.cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for range b.Messages() {
	}
	time.Sleep(400 * time.Millisecond)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.w.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	if dl := h.deadLetter("max_deliver"); dl.Header.Get(HeaderOrigSeq) != "1" {
		t.Fatalf("dead letter %v", dl.Header)
	}
	waitMetrics(t, m, `omnigraph_dead_letters_total{reason="max_deliver"} 1`)
}

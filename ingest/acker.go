package ingest

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
)

// A message is acknowledged once its commit is visible, with a double ack: the server
// confirms it, a round trip. Nothing the next commit does depends on that confirmation, so the
// writer hands the ack to the acker and goes on to the next message instead of waiting for it
// (measured on the sustained bench stream: 0.6 to 1.2 ms at the median and 1.6 to 4.6 ms on
// average of the writer's 6 to 16 ms per message, with the server in the same process).
//
// The acker acknowledges in commit order, one at a time, and publishes each message's event
// after its ack: an event still follows its message's ack, and the events keep the order of
// the commits. Its queue is as long as the pipeline is deep, and the consumer's MaxAckPending
// (the pipeline depth) counts a message until its ack lands, so a server slow to confirm holds
// the writer back instead of letting acks pile up. A failed ack changes nothing that was
// promised: the commit is visible, and the redelivery is recognised by its receipt and
// acknowledged then.
//
// Run stops the acker after its consumer ended, and it acknowledges everything queued before
// Run returns: a commit under way when the worker is told to stop is still acknowledged.

// FailpointAckQueued fires in the acker before it acknowledges a message whose commit is
// visible: a crash there leaves a committed message unacknowledged.
const FailpointAckQueued = "ingest.ack_queued"

// ackJob is the ack of one committed message and what follows it.
type ackJob struct {
	msg jetstream.Msg
	log *zap.Logger
	// then runs after the ack, whether it landed or not (the commit event).
	then func()
}

// acker acknowledges committed messages in order, beside the writer.
type acker struct {
	jobs    chan ackJob
	timeout time.Duration // bounds one ack's wait for the server's confirmation
	failed  func()        // counts an ack not sent or not confirmed
	done    sync.WaitGroup
}

// startAcker starts an acker whose queue holds depth acks (at least one); failed is called
// for each ack not sent or not confirmed by the server.
func startAcker(depth int, timeout time.Duration, failed func()) *acker {
	a := &acker{jobs: make(chan ackJob, max(depth, 1)), timeout: timeout, failed: failed}
	a.done.Go(a.run)
	return a
}

// ack queues j; it waits while the queue is full.
func (a *acker) ack(j ackJob) { a.jobs <- j }

// stop acknowledges what is queued and returns once the acker ended. No ack may be queued
// after stop began.
func (a *acker) stop() {
	close(a.jobs)
	a.done.Wait()
}

func (a *acker) run() {
	for j := range a.jobs {
		a.one(j)
	}
}

func (a *acker) one(j ackJob) {
	defer j.then()
	if err := failpoint.Inject(FailpointAckQueued); err != nil {
		a.failed()
		j.log.Warn("ack after commit not sent; the redelivery will be recognised by its receipt", zap.Error(err))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	defer cancel()
	if err := j.msg.DoubleAck(ctx); err != nil {
		// The commit is visible; the redelivery is recognised by its receipt.
		a.failed()
		j.log.Warn("ack after commit failed; the redelivery will be recognised by its receipt", zap.Error(err))
	}
}

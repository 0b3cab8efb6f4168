package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"go.uber.org/zap"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// maxDeliverAdvisory is the server's notice that a message exhausted MaxDeliver
// ($JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<consumer>); it carries a pointer, not the
// message.
type maxDeliverAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// WatchMaxDeliveries dead-letters messages the server gave up on: when a message reaches
// MaxDeliver without this worker having dead-lettered it (it died on every delivery), the
// advisory names it, and the stored copy is published to the dlq.max_deliver subject. The
// dead letter's message id makes a repeated advisory harmless. It returns when ctx ends.
func (w *Worker) WatchMaxDeliveries(ctx context.Context) error {
	subj := fmt.Sprintf("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.%s.%s", w.cfg.Stream, w.cfg.Consumer)
	ch := make(chan *nats.Msg, 16)
	sub, err := w.nc.ChanSubscribe(subj, ch)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-ch:
			var a maxDeliverAdvisory
			if err := json.Unmarshal(m.Data, &a); err != nil {
				w.log.Warn("unreadable max-deliver advisory", zap.Error(err))
				continue
			}
			w.deadLetterStoredUntilAccepted(ctx, a)
		}
	}
}

// deadLetterStoredUntilAccepted tries the dead letter of an exhausted message until JetStream
// accepts it or ctx ends: the server has already moved its ack floor past the message, so this
// dead letter is the only place it is kept.
func (w *Worker) deadLetterStoredUntilAccepted(ctx context.Context, a maxDeliverAdvisory) {
	retry := w.backoff()
	for {
		err := w.deadLetterStored(ctx, a)
		if err == nil {
			return
		}
		wait := retry.NextBackOff()
		w.log.Error("max-deliver dead letter not accepted; trying again", zap.Uint64("seq", a.StreamSeq), zap.Duration("in", wait), zap.Error(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func (w *Worker) deadLetterStored(ctx context.Context, a maxDeliverAdvisory) error {
	s, err := w.js.Stream(ctx, w.cfg.Stream)
	if err != nil {
		return err
	}
	m, err := s.GetMsg(ctx, a.StreamSeq)
	if err != nil {
		return fmt.Errorf("fetch stream sequence %d: %w", a.StreamSeq, err)
	}
	reason := fmt.Sprintf("delivered %d times without being acknowledged (max_deliver)", a.Deliveries)
	detail, _ := json.Marshal(map[string]any{"deliveries": a.Deliveries, "stream_seq": a.StreamSeq})
	l := letter{reason: errs.ReasonMaxDeliver, kind: errs.ReasonMaxDeliver, text: reason, detail: detail, data: m.Data, header: m.Header,
		stream: a.Stream, subject: m.Subject, seq: a.StreamSeq, deliveries: a.Deliveries}
	ack, omitted, err := w.publishDeadLetter(ctx, l)
	if err != nil {
		return err
	}
	rc := &publisher.Receipt{Stream: a.Stream, Sequence: a.StreamSeq, MsgID: m.Header.Get(HeaderMsgID)}
	if a.Stream == w.cfg.Stream {
		rc.StreamCreated = w.streamCreated.Load()
	}
	w.deadLettered(l, rc, ack, omitted)
	w.metrics.message(outcomeDeadLetter, 0, len(m.Data), 0, errs.ReasonMaxDeliver)
	w.log.Warn("dead-lettered after max_deliver", zap.Uint64("seq", a.StreamSeq), zap.Uint64("deliveries", a.Deliveries))
	return nil
}

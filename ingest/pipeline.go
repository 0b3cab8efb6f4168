package ingest

import (
	"context"
	"errors"
	"runtime/pprof"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// The pipeline (PipelineDepth > 1) holds up to PipelineDepth messages at once: a fetcher
// pulls them, a stager frames and builds them, and the commit loop applies them one at a time
// exactly as the one-message consumer does (handle: commit, ack, event). Only what reads no
// graph state is done ahead, so a batch never commits on a check made against a state its
// predecessor changed.
//
// Stream order is not taken from the delivery order: after a takeover, messages the previous
// holder had in flight are redelivered when their AckWait runs out, each on its own clock, and
// meanwhile the server delivers newer ones. So the commit loop takes the lowest sequence held,
// and applies it only when nothing below it can still come: either its predecessor is the
// message this loop finished last, or the consumer's state says so (its ack floor is right
// below it, or every message pending on the consumer is one this pipeline holds). Otherwise it
// waits, heartbeating what it holds, until the missing one is redelivered to it.

// ProfileLabel is the profiler label (runtime/pprof) that says which part of the worker a
// sample's goroutine works for: "stage" (framing and building the messages ahead), "commit"
// (applying them in order: the graph's commits, acks and events) or "maintenance" (the
// compactor's compactions and index work). Goroutines inherit it from the one that started
// them, so a table's parallel encoding counts for the part that asked for it, and
// `go tool pprof -tagfocus omnigraph_part=commit` shows the commit loop's whole cost alone.
// (With pipeline_depth 1 one loop frames and commits each message, unlabelled.)
const ProfileLabel = "omnigraph_part"

// stagingFactor is how many times its body a message is taken to hold until it is staged:
// the body and the Arrow rows built from its records (which point into the body).
const stagingFactor = 2

// commitFactor is how many times its body a message's commit builds beyond what staging built:
// the encoded data files, which the Lance writer keeps whole in memory until they are written,
// and the writer's own state growing with the rows (id index entries). Measured by sampling the
// live heap through commits of 8,192-row batches with the collector at GOGC 5: 1.05 times the
// body for 23.3 MiB batches (2,900-byte names), 0.97 for 2.9 MiB, 1.75 for 0.7 MiB (10-byte
// names, where the per-row state outweighs the values; under 0.3 MiB off at 1.5). Before the
// writer sized its output for the batch up front it was 1.69 for the 23.3 MiB batch.
const commitFactor = 1.5

// buildFactor is how many times its body the Arrow rows of a load hold (the builders' buffers
// at their capacity): 1.4 for the bench's batch, 1.1 for rows of short values. A message not
// built ahead builds them in its commit.
const buildFactor = 1.5

// fetchWait bounds one pull request: how long shutdown may wait for the fetcher.
const fetchWait = time.Second

// orderPoll is how often a commit loop waiting for a missing predecessor asks the consumer.
const orderPoll = 250 * time.Millisecond

// held is one message in the pipeline, the latest delivery of its stream sequence.
type held struct {
	msg   jetstream.Msg
	meta  *jetstream.MsgMetadata
	seq   uint64
	size  int64
	ahead bool          // its rows are built ahead: they fit under the bound
	ready chan struct{} // closed once st is set
	st    *staged
}

type pipe struct {
	w    *Worker
	mu   sync.Mutex
	held map[uint64]*held
	// bytes is what is counted in flight: the held messages and the one being committed.
	bytes   int64
	closed  bool          // the session ended: a message fetched now goes straight back
	waiting bool          // the commit loop waits for a missing predecessor (see room)
	changed chan struct{} // to the commit loop: the held set changed
	space   chan struct{} // to the fetcher: a message left or the commit loop began to wait
	stageQ  chan *held
	// waitingSince is when the commit loop began to wait; forced is when the fetcher last took a
	// message for it (see room).
	waitingSince, forced time.Time
	// last is the highest sequence whose message this session finished (committed,
	// recognised as applied or dead-lettered) with every message below it finished too.
	last uint64
}

// pipeline consumes with up to PipelineDepth messages in flight until ctx ends, the lease is
// lost, the fetch fails for good or a message goes back to the stream.
func (w *Worker) pipeline(ctx context.Context, lost <-chan struct{}) error {
	p := &pipe{w: w, held: map[uint64]*held{}, changed: make(chan struct{}, 1), space: make(chan struct{}, 1), stageQ: make(chan *held, 2*w.cfg.PipelineDepth)}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-lost:
			cancel()
		case <-pctx.Done():
		}
	}()
	var fetchErr error
	var fetcher, helpers sync.WaitGroup
	fetcher.Go(func() {
		if err := p.fetch(pctx); err != nil {
			fetchErr = err
			cancel()
		}
	})
	helpers.Go(func() { pprof.Do(pctx, pprof.Labels(ProfileLabel, "stage"), p.stage) })
	helpers.Go(func() { p.heartbeat(pctx) })
	var err error
	pprof.Do(ctx, pprof.Labels(ProfileLabel, "commit"), func(context.Context) { err = p.commit(ctx, pctx) })
	cancel()
	helpers.Wait()
	p.giveBack()
	fetcher.Wait()
	if fetchErr != nil {
		return fetchErr
	}
	return err
}

// errRequeued ends a session whose message went back to the stream: the ones behind it must
// not commit before it.
var errRequeued = errors.New("ingest: a message went back to the stream; the pipeline starts again from it")

// commit applies the held messages in stream order until pctx ends.
func (p *pipe) commit(stop, pctx context.Context) error {
	for {
		h := p.next(pctx)
		if h == nil {
			return nil
		}
		select {
		case <-h.ready:
		case <-pctx.Done():
		}
		if pctx.Err() != nil { // stopping: what is held goes back, even if it is ready
			return nil
		}
		p.mu.Lock()
		h = p.held[h.seq] // the latest delivery, should the server have sent it again
		delete(p.held, h.seq)
		// It stays counted until its commit returns, and its commit builds more on top: the
		// fetcher must not fill the bound again while the largest thing in flight is built.
		committing := h.size + h.growth()
		p.count(committing - h.size)
		p.mu.Unlock()
		p.signal()
		out := p.w.handle(stop, h.msg, h.st)
		h.st.done()
		p.mu.Lock()
		p.count(-committing)
		if len(p.held) == 0 && p.bytes != 0 {
			// Nothing in flight holds nothing: a residue would stop the fetcher for good.
			p.w.log.Error("pipeline byte count off with nothing in flight; reset", zap.Int64("bytes", p.bytes))
			p.count(-p.bytes)
		}
		p.mu.Unlock()
		p.signal()
		if out == outcomeRequeued {
			return errRequeued
		}
		p.last = max(p.last, h.seq)
	}
}

// count adds delta to what is counted in flight, here and in the process's footprint; p.mu
// is held.
func (p *pipe) count(delta int64) {
	p.bytes += delta
	p.w.cfg.footprint.add(delta)
}

// next waits for the lowest held message that may be applied now; nil when pctx ends. A wait
// for a missing predecessor longer than ack_wait (which redelivers it) is logged, once per
// missing sequence.
func (p *pipe) next(pctx context.Context) *held {
	var since time.Time
	var told uint64
	for pctx.Err() == nil {
		h, n := p.lowest()
		ordered, known := false, true
		if h != nil {
			// At or below last it is a redelivery of a message this session finished (its ack
			// was lost): every message below it is finished too, so it goes now, and is
			// recognised by its receipt. The consumer's state would not let it through: its
			// ack floor is past it, and it may no longer be pending there.
			ordered = p.last != 0 && h.seq <= p.last+1
			if !ordered {
				ordered, known = p.inOrder(pctx, h.seq, n)
			}
		}
		if ordered {
			p.setWaiting(false)
			return h
		}
		var poll <-chan time.Time
		if h != nil {
			// Only a predecessor known to be missing lets the fetcher past the bound on
			// bytes: while the consumer's state cannot be read (a server that does not
			// answer), nothing says one is, and the bound holds.
			p.setWaiting(known)
			poll = time.After(orderPoll)
			if since.IsZero() {
				since = time.Now()
			}
			if waited := time.Since(since); waited > p.w.cfg.AckWait && told != h.seq {
				told = h.seq
				p.w.log.Warn("the pipeline waits for a missing predecessor to be redelivered", zap.Uint64("lowest_held", h.seq),
					zap.Uint64("last_finished", p.last), zap.Int("held", n), zap.Duration("waited", waited))
			}
		}
		select {
		case <-pctx.Done():
			return nil
		case <-p.changed:
		case <-poll:
		}
	}
	return nil
}

// inOrder asks the consumer whether nothing below seq can still be delivered: its ack floor
// is right below seq, or every message pending on it is one of the n this pipeline holds. The
// count is taken before and after the request so that a message delivered meanwhile is not
// taken for one that was held. known is false when the consumer's state was not read.
func (p *pipe) inOrder(ctx context.Context, seq uint64, n int) (ordered, known bool) {
	info, err := p.w.cons.Info(ctx)
	if err != nil {
		if ctx.Err() == nil {
			p.w.log.Warn("consumer state not read; the pipeline waits", zap.Error(err))
		}
		return false, false
	}
	if info.AckFloor.Stream+1 == seq {
		return true, true
	}
	_, after := p.lowest()
	return after == n && info.NumAckPending == n, true
}

// lowest is the held message of the lowest sequence and how many are held.
func (p *pipe) lowest() (*held, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var low *held
	for _, h := range p.held {
		if low == nil || h.seq < low.seq {
			low = h
		}
	}
	return low, len(p.held)
}

func (p *pipe) setWaiting(v bool) {
	p.mu.Lock()
	changed := p.waiting != v
	p.waiting = v
	if changed && v {
		p.waitingSince, p.forced = time.Now(), time.Time{}
	}
	p.mu.Unlock()
	if changed {
		p.signal()
	}
}

// signal wakes the commit loop and the fetcher after a change of the held set.
func (p *pipe) signal() {
	for _, c := range []chan struct{}{p.changed, p.space} {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// fetch pulls one message at a time while the pipeline has room: fewer than PipelineDepth
// held, and what is in flight (the held bodies, records and built rows, the message being
// committed with what its commit builds, the compaction under way) with what the next commit
// will build under PipelineBytes. Two exceptions: one message is always held ahead, so that
// the next is framed while one commits however large they are, and a missing predecessor the
// commit loop waits for must be let in (see room). One at a time, so no message waits in a
// client buffer without a heartbeat. It returns nil when ctx ends, the error when the pull
// subscription is broken for good.
//
// The pull does not ask for a message no larger than the room left (a pull's max_bytes): with
// nats.go 1.55 such a pull of one message sometimes ended in "batch completed" with its
// message dropped, to be redelivered only after ack_wait.
//
// Each pull's outcome goes to the worker's fetch streak (restore.go). A failed pull is tried
// again with the in-place backoff, unless the stream or the consumer is gone: that ends the
// session, and Run makes them again. A pull that ends empty while the connection is down did
// not fetch either: nats.go answers it without an error.
func (p *pipe) fetch(ctx context.Context) error {
	// Capped at a pull's own wait, which an idle fetcher spends anyway: a broker back from a
	// blip is fetched from again within a second.
	retry := p.w.backoff()
	retry.MaxInterval = fetchWait
	for {
		for !p.room() {
			select {
			case <-ctx.Done():
				return nil
			case <-p.space:
			case <-time.After(fetchWait): // room may come with time alone (see room)
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		batch, err := p.w.cons.Fetch(1, jetstream.FetchMaxWait(fetchWait))
		got := 0
		if err == nil {
			for msg := range batch.Messages() {
				p.add(msg)
				got++
			}
			err = batch.Error()
		}
		if ctx.Err() != nil || p.w.leaseLost() {
			continue
		}
		if err == nil && got == 0 && !p.w.nc.IsConnected() {
			err = nats.ErrDisconnected
		}
		if err == nil {
			p.w.fetching.ok()
			retry.Reset()
			continue
		}
		p.w.fetching.fail(err)
		if errors.Is(err, jetstream.ErrNoHeartbeat) || errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, jetstream.ErrServerShutdown) {
			return err
		}
		// Only a consumer JetStream reports missing ends the session: "no responders" is also a
		// consumer whose leader is being elected, and the session goes on holding its messages.
		if gone(err) && p.w.consumerGone(ctx) {
			return err
		}
		wait := p.w.fetching.wait(retry.NextBackOff())
		if !p.w.fetching.isStalled() {
			p.w.log.Warn("fetch", zap.Duration("in", wait), zap.Error(err))
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// room reports whether the fetcher may take a message now.
//
// While the commit loop waits for a missing predecessor nothing commits, so nothing would
// make room: the missing message must be let in whatever its size, and under the bound any
// message is (one past it at most). Over the bound, taking newer messages in the hope that the
// missing one comes next would fill the pipeline to its depth past the bound (a lost delivery
// did: 4 times the bound, for the 30 s of an ack_wait); but a missing message comes back only
// when its ack_wait has run out since it was delivered, before the wait began, and JetStream
// then delivers it before any new one. So over the bound the fetcher waits out one ack_wait
// from the start of the wait, then takes one message each fetchWait until the missing one is
// among them.
func (p *pipe) room() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.held) >= p.w.cfg.PipelineDepth {
		return false
	}
	if len(p.held) == 0 { // one is always held ahead
		return true
	}
	under := p.bytes+p.w.compacting.Load()+p.nextGrowth() < p.w.cfg.PipelineBytes
	if !p.waiting {
		return under
	}
	now := time.Now()
	if under || now.Sub(p.waitingSince) >= p.w.cfg.AckWait && now.Sub(p.forced) >= fetchWait {
		p.forced = now
		return true
	}
	return false
}

// nextGrowth is what the commit of the held message that builds most will add to its count
// when its turn comes, after the one committing now has given back its own; p.mu is held.
func (p *pipe) nextGrowth() int64 {
	var next int64
	for _, h := range p.held {
		next = max(next, h.growth())
	}
	return next
}

// growth is what h's commit builds beyond its staged count: the encoded data files, and its
// rows if they were not built ahead.
func (h *held) growth() int64 {
	body := int64(len(h.msg.Data()))
	if h.ahead {
		return int64(commitFactor * float64(body))
	}
	return int64((commitFactor + buildFactor) * float64(body))
}

// add takes a fetched message into the pipeline, or gives it back at once if the session
// ended.
func (p *pipe) add(msg jetstream.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		p.w.log.Error("message without metadata", zap.Error(err))
		_ = msg.Term()
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = msg.Nak()
		return
	}
	if h, ok := p.held[meta.Sequence.Stream]; ok {
		// Delivered again while held (a heartbeat came late): ack the newest delivery.
		h.msg, h.meta = msg, meta
		p.mu.Unlock()
		return
	}
	// Until it is staged, a message counts as its body twice (the body and the rows to be built
	// from it): the fetcher must not take more on the body alone.
	h := &held{msg: msg, meta: meta, seq: meta.Sequence.Stream, size: stagingFactor * int64(len(msg.Data())), ready: make(chan struct{})}
	// Its rows are built ahead only if, built and committing, it stays under the bound with what
	// is in flight; past it (the one message always held ahead) it is only framed, so that what
	// is in flight beyond the bound is its body and records.
	h.ahead = p.bytes+p.w.compacting.Load()+int64((stagingFactor+commitFactor)*float64(len(msg.Data())))+p.nextGrowth() <= p.w.cfg.PipelineBytes
	p.held[h.seq] = h
	p.count(h.size)
	p.mu.Unlock()
	p.stageQ <- h // never blocks: at most PipelineDepth are held, and the queue holds twice that
	p.signal()
}

// stage frames and builds the held messages in the order they came.
func (p *pipe) stage(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case h := <-p.stageQ:
			p.mu.Lock()
			msg, meta := h.msg, h.meta // add may swap in a newer delivery of the same message
			p.mu.Unlock()
			st := p.w.stage(ctx, msg, meta, h.ahead)
			// What staging built counts against the bound too, in place of the estimate.
			p.mu.Lock()
			if _, still := p.held[h.seq]; still && !p.closed {
				size := int64(len(msg.Data())) + st.bytes
				p.count(size - h.size)
				h.size = size
			}
			p.mu.Unlock()
			p.signal()
			h.st = st
			close(h.ready)
		}
	}
}

// heartbeat keeps every held message from being redelivered while it waits (handle
// heartbeats the one it applies).
func (p *pipe) heartbeat(ctx context.Context) {
	t := time.NewTicker(p.w.cfg.AckWait / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.mu.Lock()
		msgs := make([]jetstream.Msg, 0, len(p.held))
		for _, h := range p.held {
			msgs = append(msgs, h.msg)
		}
		p.mu.Unlock()
		for _, m := range msgs {
			_ = m.InProgress()
		}
	}
}

// giveBack returns every message still held to the stream, lowest sequence first, so that
// the next session (or the next owner of the graph) gets them at once instead of after their
// AckWait; a message fetched from now on goes back as it comes. It runs once the stager and
// the commit loop have returned.
func (p *pipe) giveBack() {
	p.mu.Lock()
	p.closed = true
	hs := make([]*held, 0, len(p.held))
	for _, h := range p.held {
		hs = append(hs, h)
	}
	p.held = map[uint64]*held{}
	p.count(-p.bytes)
	p.mu.Unlock()
	sort.Slice(hs, func(i, j int) bool { return hs[i].seq < hs[j].seq })
	for _, h := range hs {
		_ = h.msg.Nak()
	}
	// What the stager made of them goes back too (their records to the framer, data files
	// written ahead from storage): the stager has stopped, so each h.st is final.
	for _, h := range hs {
		h.st.done()
	}
}

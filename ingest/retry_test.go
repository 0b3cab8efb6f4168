package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/recovery"
)

// waitMetrics polls m until it shows every line of want.
// exposition is m's metrics in the text exposition format.
func exposition(m *Metrics) string {
	var buf bytes.Buffer
	_, _ = m.WriteTo(&buf)
	return buf.String()
}

func waitMetrics(t *testing.T, m *Metrics, want ...string) {
	t.Helper()
	var out string
	if !poll(func() bool {
		out = exposition(m)
		for _, w := range want {
			if !strings.Contains(out, w+"\n") {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("metrics lack some of %q:\n%s", want, out)
	}
}

// startFailing arms failpoint name with action for the test and starts a worker with metrics.
func startFailing(t *testing.T, name, action string) (*harness, *Metrics) {
	t.Helper()
	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable(name, action); err != nil {
		t.Fatal(err)
	}
	m := NewMetrics()
	return start(t, func(w *Worker) { w.UseMetrics(m) }), m
}

// checkNoRedelivery requires that every message was delivered once: retries happened in
// place, not through the server.
func (h *harness) checkNoRedelivery() {
	h.t.Helper()
	info, err := h.w.cons.Info(context.Background())
	if err != nil || info.NumRedelivered != 0 || info.NumAckPending != 0 {
		h.t.Fatalf("consumer %+v %v", info, err)
	}
}

// A transient failure (here the load failing before it arms anything) is retried in place
// with backoff: the message is not redelivered, and the one behind it waits its turn.
func TestTransientFailureRetriesInPlace(t *testing.T) {
	h, m := startFailing(t, "load.after_prepare", "2*error")
	h.publish(batch, map[string]string{HeaderMode: "append"})
	h.publish(`{"type":"Person","data":{"handle":"bob","name":"Bob","active":true}}`, map[string]string{HeaderMode: "append"})
	for want := uint64(1); want <= 2; want++ {
		if ev := h.event(); ev.SourceSequence != want {
			t.Fatalf("event for message %d, want %d: a retry let a later message overtake", ev.SourceSequence, want)
		}
	}
	waitMetrics(t, m, `omnigraph_messages_total{outcome="committed"} 2`, "omnigraph_recoveries_total 0")
	h.checkNoRedelivery()
	if out := h.export(); strings.Count(out, `"handle":"alice"`) != 1 || strings.Count(out, `"handle":"bob"`) != 1 {
		t.Fatalf("export:\n%s", out)
	}
}

// RecoveryRequired (here a load failing after its first table committed) makes the worker
// resolve the intent and retry the same delivery: one commit, no sidecar left, no redelivery.
func TestRecoveryRequiredRecoversThenRetries(t *testing.T) {
	h, m := startFailing(t, "load.after_table_commit", "1*error")
	h.publish(batch, map[string]string{HeaderMode: "append", HeaderMsgID: "once"})
	if ev := h.event(); ev.SourceSequence != 1 || ev.AlreadyApplied {
		t.Fatalf("event %+v", ev)
	}
	waitMetrics(t, m, `omnigraph_messages_total{outcome="committed"} 1`, "omnigraph_recoveries_total 1")
	h.checkNoRedelivery()
	if pending, err := recovery.List(context.Background(), h.g.Root()); err != nil || len(pending) != 0 {
		t.Fatalf("sidecars left: %v %v", pending, err)
	}
	if out := h.export(); strings.Count(out, `"handle":"alice"`) != 1 || strings.Count(out, `"id":"w1"`) != 1 {
		t.Fatalf("export:\n%s", out)
	}
}

// A batch near the store's 32 MiB record limit that can never succeed does not fit in a dead
// letter beside the error headers. It is dead-lettered by reference (no body, its size in
// Omnigraph-Body-Omitted) instead of blocking the stream, and replay fetches the body from the
// ingest stream: whole it is too large to re-publish with the replay headers (a clear error,
// the dead letter kept), split it commits.
func TestNearLimitBatchIsDeadLetteredByReference(t *testing.T) {
	h := start(t)
	h.publish(`{"type":"Person","data":{"handle":"p0","name":"first","active":true}}`, map[string]string{HeaderMode: "append"})
	h.event()
	hdr := nats.Header{}
	hdr.Set(HeaderMode, "append")
	limit := MaxBodyBytes(h.w.cfg.IngestSubject(), hdr)
	var b strings.Builder
	b.WriteString(`{"type":"Person","data":{"handle":"p0","name":"second","active":true}}` + "\n")
	line := func(i, size int) {
		head := fmt.Sprintf(`{"type":"Person","data":{"handle":"big-%05d","active":true,"name":"`, i)
		b.WriteString(head + strings.Repeat("n", size-len(head)-4) + "\"}}\n")
	}
	for i := range 8190 {
		line(i, 4096)
	}
	line(8190, limit-b.Len())
	body := b.String()
	if len(body) != limit {
		t.Fatalf("body %d bytes, limit %d", len(body), limit)
	}
	h.publish(body, map[string]string{HeaderMode: "append"})
	// Refused for its Arrow size (strict_input_arrow_bytes), the natural failure of a batch
	// this size.
	m := h.deadLetter("resource_limit")
	if m.Header.Get(HeaderBodyOmitted) != strconv.Itoa(len(body)) || len(m.Data) != 0 || m.Header.Get(HeaderOrigSeq) != "2" {
		t.Fatalf("dead letter %v with %d bytes", m.Header, len(m.Data))
	}
	h.publish(`{"type":"Person","data":{"handle":"bob","name":"Bob","active":true}}`, nil)
	if ev := h.event(); ev.SourceSequence != 3 {
		t.Fatalf("the stream did not go on past the dead letter: %+v", ev)
	}
	ctx := context.Background()
	_, err := Replay(ctx, h.js, h.w.cfg, ReplayOptions{Reason: "resource_limit", Mode: "merge"}, func(string) {})
	if err == nil || !strings.Contains(err.Error(), "--split") {
		t.Fatalf("whole replay of a near-limit batch: %v", err)
	}
	res, err := Replay(ctx, h.js, h.w.cfg, ReplayOptions{Reason: "resource_limit", Mode: "merge", Split: true}, func(string) {})
	if err != nil || res.Replayed != 1 || res.Published != 2 {
		t.Fatalf("split replay %+v %v", res, err)
	}
	// Two commits, one per half. A half may also come back as already_applied: the test's
	// 2 s AckWait can lapse between a 16 MiB commit and its ack on a loaded race-detector run,
	// and the redelivery is recognised by its receipt.
	committed := map[uint64]bool{}
	for len(committed) < 2 {
		if ev := h.event(); !ev.AlreadyApplied {
			if committed[ev.SourceSequence] {
				t.Fatalf("message %d committed twice", ev.SourceSequence)
			}
			committed[ev.SourceSequence] = true
		}
	}
	if dls, _ := DeadLetters(ctx, h.js, h.w.cfg, ""); len(dls) != 0 {
		t.Fatalf("dead letters left: %+v", dls)
	}
	out := h.export()
	if n := strings.Count(out, `"type":"Person"`); n != 8192+1 || !strings.Contains(out, `"name":"second"`) {
		t.Fatalf("%d people after the replay, or p0 not renamed", n)
	}
}

// Fetching or re-publishing a 32 MiB body can take longer than the jetstream package's
// default request timeout (5 s) on a busy server: the dead-letter tools give each such request
// two minutes when the caller set no deadline, and keep the caller's deadline otherwise.
func TestTransferTimeout(t *testing.T) {
	got, err := transfer(context.Background(), func(ctx context.Context) (time.Duration, error) {
		dl, ok := ctx.Deadline()
		if !ok {
			return 0, errors.New("no deadline")
		}
		return time.Until(dl), nil
	})
	if err != nil || got <= transferTimeout-time.Minute || got > transferTimeout {
		t.Fatalf("without a deadline: %v left, %v", got, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	want, _ := ctx.Deadline()
	if _, err := transfer(ctx, func(c context.Context) (struct{}, error) {
		if dl, _ := c.Deadline(); !dl.Equal(want) {
			return struct{}{}, fmt.Errorf("deadline %v, want the caller's %v", dl, want)
		}
		return struct{}{}, nil
	}); err != nil {
		t.Fatal(err)
	}
}

package publisher

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/graph/ids"
)

func TestReceiptKeyNamesTheStreamIncarnation(t *testing.T) {
	for _, tc := range []struct {
		rc        Receipt
		key, lgcy string
	}{
		{Receipt{Stream: "S", Sequence: 9, MsgID: "m-1", StreamCreated: 5}, "m-1", "S:9"},
		{Receipt{Stream: "S", Sequence: 9, StreamCreated: 1718000000123456789}, "S@1718000000123456789:9", "S:9"},
		{Receipt{Stream: "S", Sequence: 9}, "S:9", "S:9"}, // an older build's, or a load not read from a stream
	} {
		if got, lg := tc.rc.ReceiptKey(), tc.rc.LegacyKey(); got != tc.key || lg != tc.lgcy {
			t.Errorf("%+v: key %q legacy %q, want %q %q", tc.rc, got, lg, tc.key, tc.lgcy)
		}
	}
	// The same position in two incarnations of a stream is two keys.
	a := Receipt{Stream: "S", Sequence: 1, StreamCreated: 1}
	b := Receipt{Stream: "S", Sequence: 1, StreamCreated: 2}
	if a.ReceiptKey() == b.ReceiptKey() {
		t.Fatal("two incarnations share a key")
	}
	if !committedSince(5, 5000) || !committedSince(5, 5999) || committedSince(5, 6000) {
		t.Fatal("committedSince compares microseconds with nanoseconds")
	}
}

// Graphs written by older builds hold receipts keyed <stream>:<seq>. After an upgrade, one
// answers for a message of the stream it was written for (its commit is not older than the
// stream), so a redelivery of a batch committed just before the upgrade is recognised; it does
// not answer once the stream has been deleted and created again (its commit is older than the
// new stream), nor for a producer's msg id spelled like a position. Receipts keyed by msg id
// are unchanged. The writer's state, a state opened from a checkpoint and one that reads the
// receipt back from __manifest answer alike.
func TestLegacyReceiptAnswersOnlyForItsStream(t *testing.T) {
	smallCheckpoints(t, 40, 4)
	ctx := context.Background()
	root, _ := genesis(t)
	p := Open(root, "")
	base := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) int64 { return base.Add(d).UnixMicro() }
	publishReceipt := func(rc Receipt, created int64) string {
		t.Helper()
		id := ids.NewULID()
		if _, err := p.Publish(ctx, Request{Lineage: &Lineage{CommitID: id, CreatedAt: created}, Receipt: &rc}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	// Before the upgrade: S's messages 1 and 2 without ids, and a producer's id "S:3".
	legacy1 := publishReceipt(Receipt{Stream: "S", Sequence: 1, PayloadSHA256: "h1"}, at(0))
	publishReceipt(Receipt{Stream: "S", Sequence: 2, PayloadSHA256: "h2"}, at(time.Second))
	publishReceipt(Receipt{Stream: "S", Sequence: 3, MsgID: "S:3", PayloadSHA256: "h3"}, at(2*time.Second))
	old := base.Add(-time.Hour).UnixNano()      // the stream those messages came from
	renewed := base.Add(time.Minute).UnixNano() // the stream created again after them
	// After the upgrade, on the re-created stream: message 1 again, its receipt by the new key.
	fresh1 := publishReceipt(Receipt{Stream: "S", Sequence: 1, StreamCreated: renewed, PayloadSHA256: "h1"}, at(2*time.Minute))
	// Enough others that the receipts above leave the recent window and a checkpoint is written.
	for i := range 20 {
		publishReceipt(Receipt{Stream: "S", Sequence: uint64(100 + i), MsgID: fmt.Sprintf("m-%d", i)}, at(3*time.Minute+time.Duration(i)*time.Second))
	}
	cold, err := Open(root, "").Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cold.CheckpointStatus, "checkpoint ") {
		t.Fatalf("opened by %s", cold.CheckpointStatus)
	}
	msg := func(seq uint64, created int64) *Receipt {
		return &Receipt{Stream: "S", Sequence: seq, StreamCreated: created}
	}
	for name, st := range map[string]*State{"writer": p.Cached(), "checkpoint": cold, "scan": fullScan(t, root, "")} {
		for _, tc := range []struct {
			what   string
			msg    *Receipt
			commit string // "" : no receipt
		}{
			{"a redelivery of a batch an older build committed", msg(1, old), legacy1},
			{"an older build's receipt of the same stream, not yet redelivered", msg(2, old), "any"},
			{"message 1 of the re-created stream", msg(1, renewed), fresh1},
			{"message 2 of the re-created stream, never applied", msg(2, renewed), ""},
			{"message 1 of a third stream", msg(1, base.Add(time.Hour).UnixNano()), ""},
			{"a message at a position a producer's id is spelled like", msg(3, old), ""},
			{"that producer's id", &Receipt{MsgID: "S:3"}, "any"},
			{"a position without an incarnation (the legacy key itself)", msg(1, 0), legacy1},
		} {
			rc, ok, err := st.ReceiptFor(ctx, tc.msg)
			switch {
			case err != nil:
				t.Fatalf("%s: %s: %v", name, tc.what, err)
			case tc.commit == "" && ok:
				t.Errorf("%s: %s: receipt %+v, want none", name, tc.what, rc)
			case tc.commit != "" && !ok:
				t.Errorf("%s: %s: no receipt", name, tc.what)
			case tc.commit != "" && tc.commit != "any" && rc.GraphCommitID != tc.commit:
				t.Errorf("%s: %s: receipt of commit %s, want %s", name, tc.what, rc.GraphCommitID, tc.commit)
			}
		}
	}
	// The new field travels in the receipt's JSON, and so through checkpoints.
	if rc, ok, err := cold.Receipt(ctx, msg(1, renewed).ReceiptKey()); err != nil || !ok || rc.StreamCreated != renewed {
		t.Fatalf("receipt by the new key: %+v %v %v", rc, ok, err)
	}
}

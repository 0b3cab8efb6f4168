package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// Loads of messages without a producer's id, across an upgrade and a stream created again.
// An older build keyed their receipts <stream>:<seq>; after the upgrade, the redelivery of
// one is still recognised (nothing applied twice), while the re-created stream's messages at
// the same sequences are applied, whether a body is byte for byte an old one's (not
// already_applied) or another (not msg_id_reused); their own redeliveries are recognised by
// the new key.
func TestPositionReceiptsAcrossUpgradeAndRecreatedStream(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	old := time.Now().Add(-time.Hour).UnixNano() // the stream the older build read
	msg := func(seq uint64, created int64, sha string) *publisher.Receipt {
		return &publisher.Receipt{Stream: "S", Sequence: seq, StreamCreated: created, PayloadSHA256: sha}
	}
	first, err := g.Load(ctx, LoadRequest{Mode: ModeAppend, Records: records(t, people...), Receipt: msg(1, 0, "h1")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Load(ctx, LoadRequest{Mode: ModeMerge, Records: records(t, people[0]), Receipt: msg(2, 0, "h2")}); err != nil {
		t.Fatal(err)
	}
	// The upgrade: message 1 redelivered from the same stream. Applied again, the append of
	// the same ids would be a KeyConflict.
	again, err := g.Load(ctx, LoadRequest{Mode: ModeAppend, Records: records(t, people...), Receipt: msg(1, old, "h1")})
	if err != nil || !again.AlreadyApplied || again.Commit.GraphCommitID != first.Commit.GraphCommitID {
		t.Fatalf("redelivery after the upgrade: %+v %v", again, err)
	}
	// The stream is deleted and created again after those commits.
	time.Sleep(2 * time.Millisecond)
	renewed := time.Now().UnixNano()
	same, err := g.Load(ctx, LoadRequest{Mode: ModeMerge, Records: records(t, people...), Receipt: msg(1, renewed, "h1")})
	if err != nil || same.AlreadyApplied || same.Commit.GraphCommitID == first.Commit.GraphCommitID {
		t.Fatalf("message 1 of the re-created stream, the same body: %+v %v", same, err)
	}
	other, err := g.Load(ctx, LoadRequest{Mode: ModeMerge, Records: records(t, people[1]), Receipt: msg(2, renewed, "other")})
	var reused *errs.MsgIDReused
	if errors.As(err, &reused) || err != nil || other.AlreadyApplied {
		t.Fatalf("message 2 of the re-created stream, another body: %+v %v", other, err)
	}
	redelivered, err := g.Load(ctx, LoadRequest{Mode: ModeAppend, Records: records(t, people...), Receipt: msg(1, renewed, "h1")})
	if err != nil || !redelivered.AlreadyApplied || redelivered.Commit.GraphCommitID != same.Commit.GraphCommitID {
		t.Fatalf("redelivery on the re-created stream: %+v %v", redelivered, err)
	}
}

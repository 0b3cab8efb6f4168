package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
)

// A Nats-Msg-Id used again, after JetStream's duplicate window, for a different body is not
// "already applied": the new body would be dropped without a trace. It is dead-lettered as
// msg_id_reused, with both payload hashes and the commit that holds the first body; the same
// body again is still already_applied, and the stream goes on.
func TestReusedMsgIDWithAnotherBodyIsDeadLettered(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	s, err := h.js.Stream(ctx, h.w.cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.Duplicates = 100 * time.Millisecond
	if _, err := h.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	first := `{"type":"Person","data":{"handle":"alice","name":"Alice","active":true}}`
	second := `{"type":"Person","data":{"handle":"mallory","name":"Mallory","active":true}}`
	h.publish(first, map[string]string{HeaderMsgID: "m-1"})
	ev := h.event()
	time.Sleep(300 * time.Millisecond) // past the duplicate window: JetStream takes m-1 again
	h.publish(second, map[string]string{HeaderMsgID: "m-1"})
	m := h.deadLetter(errs.KindMsgIDReused)
	var detail map[string]any
	if err := json.Unmarshal([]byte(m.Header.Get(HeaderErrorDetail)), &detail); err != nil {
		t.Fatal(err)
	}
	hash := func(s string) string { b := sha256.Sum256([]byte(s)); return hex.EncodeToString(b[:]) }
	if detail["msg_id"] != "m-1" || detail["applied_payload_sha256"] != hash(first) || detail["payload_sha256"] != hash(second) ||
		detail["graph_commit_id"] != ev.GraphCommitID || string(m.Data) != second {
		t.Fatalf("dead letter %v %s", m.Header, m.Data)
	}
	time.Sleep(300 * time.Millisecond)
	h.publish(first, map[string]string{HeaderMsgID: "m-1"})
	if ev := h.event(); !ev.AlreadyApplied || ev.SourceSequence != 3 {
		t.Fatalf("the same body again: %+v", ev)
	}
	h.publish(`{"type":"Person","data":{"handle":"bob","name":"Bob","active":true}}`, map[string]string{HeaderMsgID: "m-2"})
	if ev := h.event(); ev.AlreadyApplied || ev.SourceSequence != 4 {
		t.Fatalf("event %+v", ev)
	}
}

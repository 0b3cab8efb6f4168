package ingest

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
)

// Branch names that pass a looser check but fail in storage (a "." segment, a name too long
// for one file name, gocloud's escape marker) are invalid input from every path that carries
// one: the load's Omnigraph-Branch and Omnigraph-From headers and a merge request's source and
// target. Each is dead-lettered as invalid naming the header and the rule, none holds up the
// stream, and a good batch after them commits.
func TestHostileBranchNamesAreDeadLettered(t *testing.T) {
	h := start(t)
	long := func(n int) string { return strings.Repeat("b", n) }
	loads := []struct {
		hdr   map[string]string
		field string
		rule  string
	}{
		{map[string]string{HeaderBranch: "."}, HeaderBranch, `"." or ".." segment`},
		{map[string]string{HeaderBranch: "x/."}, HeaderBranch, `"." or ".." segment`},
		{map[string]string{HeaderBranch: "./x"}, HeaderBranch, `"." or ".." segment`},
		{map[string]string{HeaderBranch: "../x"}, HeaderBranch, `"." or ".." segment`},
		{map[string]string{HeaderBranch: long(300), HeaderFrom: "main"}, HeaderBranch, "longer than"},
		{map[string]string{HeaderBranch: long(5000), HeaderFrom: "main"}, HeaderBranch, "longer than"},
		{map[string]string{HeaderBranch: "a__0xb", HeaderFrom: "main"}, HeaderBranch, "__0x"},
		{map[string]string{HeaderBranch: "stage", HeaderFrom: "../x"}, HeaderFrom, `"." or ".." segment`},
		{map[string]string{HeaderBranch: "stage", HeaderFrom: "x/."}, HeaderFrom, `"." or ".." segment`},
	}
	for _, c := range loads {
		h.publish(batch, c.hdr)
	}
	merges := []struct{ body, field, rule string }{
		{`{"source":"../x"}`, "source", `"." or ".." segment`},
		{`{"source":"stage","target":"x/."}`, "target", `"." or ".." segment`},
		{`{"source":"` + long(300) + `"}`, "source", "longer than"},
	}
	for _, c := range merges {
		h.publishMerge(c.body, "")
	}
	h.publish(`{"type":"Person","data":{"handle":"after","name":"A","active":true}}`, nil)
	if ev := h.event(); ev.SourceSequence != uint64(len(loads)+len(merges)+1) {
		t.Fatalf("event %+v: a hostile branch name held up the stream", ev)
	}
	ctx := context.Background()
	s, err := h.js.Stream(ctx, h.w.cfg.DLQStream)
	if err != nil {
		t.Fatal(err)
	}
	var want []struct{ field, rule string }
	for _, c := range loads {
		want = append(want, struct{ field, rule string }{c.field, c.rule})
	}
	for _, c := range merges {
		want = append(want, struct{ field, rule string }{c.field, c.rule})
	}
	for i, w := range want {
		m, err := s.GetMsg(ctx, uint64(i+1))
		if err != nil {
			t.Fatalf("dead letter %d: %v", i+1, err)
		}
		checkInvalidBranch(t, m, w.field, w.rule)
	}
	if strings.Contains(h.export(), `"name":"Alice"`) {
		t.Fatal("a batch with a hostile branch committed")
	}
}

func checkInvalidBranch(t *testing.T, m *jetstream.RawStreamMsg, field, rule string) {
	t.Helper()
	if m.Subject != h0DLQ("invalid") || m.Header.Get(HeaderErrorKind) != errs.KindInvalid ||
		!strings.Contains(m.Header.Get(HeaderErrorDetail), `"field":"`+field+`"`) || !strings.Contains(m.Header.Get(HeaderError), rule) {
		t.Fatalf("dead letter of seq %s on %s: want invalid, field %s, rule %q; got %v", m.Header.Get(HeaderOrigSeq), m.Subject, field, rule, m.Header)
	}
}

func h0DLQ(reason string) string { return "omnigraph.demo.dlq." + reason }

// Replay refuses a target branch no branch can have before it re-publishes anything.
func TestReplayRefusesBadBranchOptions(t *testing.T) {
	h := start(t)
	for _, o := range []ReplayOptions{{Branch: "x/."}, {Branch: "q", From: "../x"}} {
		_, err := Replay(context.Background(), h.js, h.w.cfg, o, func(string) {})
		if errs.Kind(err) != errs.KindInvalid || !strings.Contains(err.Error(), "segment") {
			t.Fatalf("replay %+v: %v", o, err)
		}
	}
}

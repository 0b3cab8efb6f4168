package ingest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// dlqFixture is a graph's streams, made by the worker's own setup, on an embedded server.
type dlqFixture struct {
	t       *testing.T
	js      jetstream.JetStream
	cfg     Config
	created int64 // the ingest stream's creation time
}

func newDLQFixture(t *testing.T) *dlqFixture {
	t.Helper()
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
	cfg := Config{Graph: "demo"}
	w, err := New(nc, nil, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Setup(context.Background()); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	_ = cfg.withDefaults()
	f := &dlqFixture{t: t, js: js, cfg: cfg}
	s, err := js.Stream(context.Background(), cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	f.created = s.CachedInfo().Created.UnixNano()
	return f
}

// original publishes a batch to the ingest stream and returns its sequence.
func (f *dlqFixture) original(body string) uint64 {
	f.t.Helper()
	m := nats.NewMsg(f.cfg.IngestSubject())
	m.Data = []byte(body)
	ack, err := f.js.PublishMsg(context.Background(), m)
	if err != nil {
		f.t.Fatal(err)
	}
	return ack.Sequence
}

// letter publishes a dead letter of reason for message seq of the ingest stream, whole or (size
// > 0) by reference, its id carrying the stream's creation time created (0: none; -1: no id
// at all), as the worker does; it returns the dead letter's sequence.
func (f *dlqFixture) letter(reason string, seq uint64, body string, size int, created int64) uint64 {
	f.t.Helper()
	m := nats.NewMsg(f.cfg.DLQSubject(reason))
	m.Data = []byte(body)
	m.Header.Set(HeaderErrorKind, reason)
	m.Header.Set(HeaderError, "refused")
	m.Header.Set(HeaderOrigStream, f.cfg.Stream)
	m.Header.Set(HeaderOrigSubject, f.cfg.IngestSubject())
	m.Header.Set(HeaderOrigSeq, fmt.Sprint(seq))
	if created >= 0 {
		m.Header.Set(HeaderMsgID, DeadLetterMsgID(f.cfg.Stream, created, seq))
	}
	if size > 0 {
		m.Data = nil
		m.Header.Set(HeaderBodyOmitted, fmt.Sprint(size))
	}
	ack, err := f.js.PublishMsg(context.Background(), m)
	if err != nil {
		f.t.Fatal(err)
	}
	return ack.Sequence
}

// seqs are the sequences stream holds.
func (f *dlqFixture) seqs(stream string) []uint64 {
	f.t.Helper()
	ctx := context.Background()
	s, err := f.js.Stream(ctx, stream)
	if err != nil {
		f.t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []uint64
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		if _, err := s.GetMsg(ctx, seq); err == nil {
			out = append(out, seq)
		}
	}
	return out
}

func seqsOf(dls []DeadLetter) []uint64 {
	out := []uint64{}
	for _, d := range dls {
		out = append(out, d.Seq)
	}
	return out
}

// dlq delete removes the dead letters selected by sequence, range or reason, and the body of
// each one sent by reference when that message is still its body and no dead letter that stays
// refers to it; a dry run changes nothing; a sequence that names no dead letter (of the reason)
// fails before anything is removed, as does an empty or backwards selection.
func TestDeleteDeadLetters(t *testing.T) {
	f := newDLQFixture(t)
	ctx := context.Background()
	big := strings.Repeat("x", 100)
	m1, m2, m3, m4 := f.original(big), f.original(big), f.original("whole"), f.original(big)
	d1 := f.letter("invalid", m1, "", 100, f.created)         // by reference, its body alone
	d2 := f.letter("key_conflict", m3, "whole", 0, f.created) // whole
	d3 := f.letter("invalid", m2, "", 100, f.created)         // by reference,
	d4 := f.letter("max_deliver", m2, "", 100, -1)            // twice to one body (past the duplicate window)
	d5 := f.letter("invalid", m4, "", 100, f.created+1)       // of an older incarnation
	d6 := f.letter("invalid", m4+1, "", 100, 0)               // names a message stored after it
	m5 := f.original(big)
	if m5 != m4+1 {
		t.Fatalf("m5 = %d", m5)
	}
	del := func(o DeleteOptions) (DeleteResult, error) { return DeleteDeadLetters(ctx, f.js, f.cfg, o) }
	body := func(res DeleteResult, dl uint64) ReferencedBody {
		for _, b := range res.Bodies {
			if b.DeadLetter == dl {
				return b
			}
		}
		t.Fatalf("no body of dead letter %d in %+v", dl, res.Bodies)
		return ReferencedBody{}
	}

	// A dry run says what would go, and nothing goes.
	res, err := del(DeleteOptions{Seqs: []SeqRange{{d1, d1}, {d3, d3}}, DryRun: true})
	if err != nil || res.Deleted != 2 || !reflect.DeepEqual(seqsOf(res.DeadLetters), []uint64{d1, d3}) || len(res.Bodies) != 2 {
		t.Fatalf("dry run: %+v %v", res, err)
	}
	if b := body(res, d1); !b.Deleted || b.Seq != m1 || b.Stream != f.cfg.Stream {
		t.Errorf("d1's body: %+v", b)
	}
	if b := body(res, d3); b.Deleted || !strings.Contains(b.NotDeleted, fmt.Sprintf("dead letter %d, which stays", d4)) {
		t.Errorf("d3's body, shared with d4: %+v", b)
	}
	if got := f.seqs(f.cfg.DLQStream); !reflect.DeepEqual(got, []uint64{d1, d2, d3, d4, d5, d6}) {
		t.Fatalf("the dry run removed dead letters: %v", got)
	}

	// Refusals, before anything is removed.
	for _, c := range []struct {
		o    DeleteOptions
		want any
		says string
	}{
		{DeleteOptions{Seqs: []SeqRange{{d1, d1}, {99, 99}}}, new(*NoDeadLetterError), "no dead letter at sequence 99: nothing was deleted"},
		{DeleteOptions{Seqs: []SeqRange{{50, 60}}}, new(*NoDeadLetterError), "no dead letter at sequences 50-60"},
		{DeleteOptions{Seqs: []SeqRange{{d2, d2}}, Reason: "invalid"}, new(*NoDeadLetterError), fmt.Sprintf("no dead letter of reason invalid at sequence %d", d2)},
		{DeleteOptions{}, new(*SelectionError), "no dead letters selected"},
		{DeleteOptions{Seqs: []SeqRange{{9, 3}}}, new(*SelectionError), "goes backwards"},
		{DeleteOptions{All: true}, nil, ""}, // (dry run below: a valid selection)
	} {
		c.o.DryRun = c.want == nil
		_, err := del(c.o)
		if c.want == nil {
			if err != nil {
				t.Errorf("%+v: %v", c.o, err)
			}
			continue
		}
		if !errors.As(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%+v: %v, want %T saying %q", c.o, err, c.want, c.says)
		}
	}
	if got := f.seqs(f.cfg.DLQStream); len(got) != 6 {
		t.Fatalf("a refused delete removed dead letters: %v", got)
	}

	// Removed: d1 and its body; d3 and d4 and their one body, once.
	res, err = del(DeleteOptions{Seqs: []SeqRange{{d1, d1}, {d3, d4}}})
	if err != nil || res.Deleted != 3 || len(res.Bodies) != 2 || !body(res, d1).Deleted || !body(res, d3).Deleted {
		t.Fatalf("delete: %+v %v", res, err)
	}
	if got := f.seqs(f.cfg.DLQStream); !reflect.DeepEqual(got, []uint64{d2, d5, d6}) {
		t.Fatalf("dead letters left: %v", got)
	}
	if got := f.seqs(f.cfg.Stream); !reflect.DeepEqual(got, []uint64{m3, m4, m5}) {
		t.Fatalf("ingest messages left: %v, want the bodies of d1, d3 and d4 removed", got)
	}

	// By reason: d5 and d6 go, their bodies stay: m4 is a message of another incarnation of
	// the stream, m5 was stored after d6 (another message under that sequence).
	res, err = del(DeleteOptions{Reason: "invalid"})
	if err != nil || res.Deleted != 2 || !reflect.DeepEqual(seqsOf(res.DeadLetters), []uint64{d5, d6}) {
		t.Fatalf("delete --reason invalid: %+v %v", res, err)
	}
	if b := body(res, d5); b.Deleted || !strings.Contains(b.NotDeleted, "created again") {
		t.Errorf("d5's body: %+v", b)
	}
	if b := body(res, d6); b.Deleted || !strings.Contains(b.NotDeleted, "holds another message") {
		t.Errorf("d6's body: %+v", b)
	}
	if got := f.seqs(f.cfg.Stream); !reflect.DeepEqual(got, []uint64{m3, m4, m5}) {
		t.Fatalf("ingest messages left: %v, want m4 and m5 kept", got)
	}
	// A reason with nothing left deletes nothing, and that is no failure.
	if res, err := del(DeleteOptions{Reason: "invalid"}); err != nil || res.Deleted != 0 {
		t.Fatalf("delete of nothing: %+v %v", res, err)
	}

	// A graph with no streams says so, as publish does.
	other := f.cfg
	other.Graph, other.Stream, other.DLQStream, other.EventsStream = "dmeo", "", "", ""
	_, err = DeleteDeadLetters(ctx, f.js, other, DeleteOptions{All: true})
	var nse *NoStreamError
	if !errors.As(err, &nse) || err.Error() != "no stream for graph dmeo: is its worker running? (stream OMNIGRAPH_DMEO_DLQ)" {
		t.Fatalf("unknown graph: %v", err)
	}
}

// A selection is sequences and ranges separated by commas; an empty item, a sequence that is
// no positive number and a backwards range are refused.
func TestParseSeqs(t *testing.T) {
	got, err := ParseSeqs("3, 5-9,12")
	if err != nil || !reflect.DeepEqual(got, []SeqRange{{3, 3}, {5, 9}, {12, 12}}) {
		t.Fatalf("%v %v", got, err)
	}
	for in, says := range map[string]string{
		"9-3": `selection "9-3": goes backwards`, "1,9-3": `"9-3" goes backwards`, "": "an empty item", "3,,4": "an empty item", "x": "is not a sequence", "0": "is not a sequence",
		"3-": "is not a sequence", "-3": "is not a sequence", "1-2-3": "is not a sequence",
	} {
		_, err := ParseSeqs(in)
		var se *SelectionError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), says) {
			t.Errorf("ParseSeqs(%q) = %v, want a SelectionError saying %q", in, err, says)
		}
	}
}

// Every look-up of a graph's stream that is not there says which graph has none, the same
// words for a stream as for a subject published to.
func TestNoStreamForEveryLookUp(t *testing.T) {
	f := newDLQFixture(t)
	ctx := context.Background()
	cfg := Config{Graph: "dmeo"}
	_ = cfg.withDefaults()
	want := "no stream for graph dmeo: is its worker running? (stream OMNIGRAPH_DMEO_DLQ)"
	if _, err := DeadLetters(ctx, f.js, cfg, ""); !errors.As(err, new(*NoStreamError)) || err.Error() != want {
		t.Errorf("DeadLetters: %v", err)
	}
	if _, err := Replay(ctx, f.js, cfg, ReplayOptions{}, func(string) {}); !errors.As(err, new(*NoStreamError)) || err.Error() != want {
		t.Errorf("Replay: %v", err)
	}
	if _, err := GraphStream(ctx, f.js, cfg, cfg.EventsStream); err == nil || err.Error() != "no stream for graph dmeo: is its worker running? (stream OMNIGRAPH_DMEO_EVENTS)" {
		t.Errorf("GraphStream: %v", err)
	}
	if _, err := Publish(ctx, f.js, cfg, nats.NewMsg(cfg.MergeSubject())); err == nil || err.Error() != "no stream for graph dmeo: is its worker running? (subject omnigraph.dmeo.merge)" {
		t.Errorf("Publish: %v", err)
	}
	if err := NoStream(cfg, "", "S", errors.New("other")); err.Error() != "other" {
		t.Errorf("NoStream of another error: %v", err)
	}
}

// faultyJS is a JetStream whose streams' DeleteMsg fails as deleteErr says for each stream.
type faultyJS struct {
	jetstream.JetStream
	deleteErr map[string]error
}

func (f faultyJS) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	s, err := f.JetStream.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	return faultyStream{Stream: s, err: f.deleteErr[name]}, nil
}

type faultyStream struct {
	jetstream.Stream
	err error
}

func (s faultyStream) DeleteMsg(ctx context.Context, seq uint64) error {
	if s.err != nil {
		return s.err
	}
	return s.Stream.DeleteMsg(ctx, seq)
}

// What stops a body from going with its dead letter, and what a failing delete says: a body in
// a stream that is not there, a dead letter that names no message, a message already gone; a
// dead letter someone else removed meanwhile keeps its body; a delete JetStream refuses fails
// naming the dead letter or the body and how far it got.
func TestDeleteDeadLettersFailures(t *testing.T) {
	f := newDLQFixture(t)
	ctx := context.Background()
	big := strings.Repeat("x", 100)
	m1 := f.original(big)
	d1 := f.letter("invalid", m1, "", 100, f.created)
	gone := f.original(big)
	d2 := f.letter("invalid", gone, "", 100, f.created)
	s, err := f.js.Stream(ctx, f.cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMsg(ctx, gone); err != nil {
		t.Fatal(err)
	}
	f.letter("invalid", 0, "", 100, -1) // names no message
	m := nats.NewMsg(f.cfg.DLQSubject("invalid"))
	m.Header.Set(HeaderOrigStream, "GONE")
	m.Header.Set(HeaderOrigSeq, "1")
	m.Header.Set(HeaderBodyOmitted, "100")
	ack, err := f.js.PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := ack.Sequence
	res, err := DeleteDeadLetters(ctx, f.js, f.cfg, DeleteOptions{Seqs: []SeqRange{{d2, elsewhere}}, DryRun: true})
	if err != nil || len(res.Bodies) != 3 {
		t.Fatalf("dry run: %+v %v", res, err)
	}
	for i, says := range []string{"already gone from the stream", "names no original message", "stream GONE is not there"} {
		if b := res.Bodies[i]; b.Deleted || !strings.Contains(b.NotDeleted, says) {
			t.Errorf("body %d: %+v, want kept: %s", i, b, says)
		}
	}

	refused := errors.New("refused")
	for _, c := range []struct {
		deleteErr map[string]error
		says      string
		deleted   int
	}{
		{map[string]error{f.cfg.DLQStream: refused}, fmt.Sprintf("delete dead letter %d (0 deleted before it): refused", d1), 0},
		{map[string]error{f.cfg.Stream: refused}, fmt.Sprintf("delete the body of dead letter %d (%s sequence %d) after the dead letter: refused", d1, f.cfg.Stream, m1), 1},
	} {
		res, err := DeleteDeadLetters(ctx, faultyJS{f.js, c.deleteErr}, f.cfg, DeleteOptions{Seqs: []SeqRange{{d1, d1}}})
		if !errors.Is(err, refused) || err.Error() != c.says || res.Deleted != c.deleted {
			t.Errorf("%v: %+v %v, want %q", c.deleteErr, res, err, c.says)
		}
		if c.deleted == 1 {
			break
		}
		if got := f.seqs(f.cfg.DLQStream); len(got) != 4 {
			t.Fatalf("a refused delete removed %v", got)
		}
	}
	// d1 is gone now (the body's delete was refused): a dead letter and a body someone else
	// removes meanwhile are counted as not deleted by this run.
	d3 := f.letter("invalid", f.original(big), "", 100, f.created)
	res, err = DeleteDeadLetters(ctx, faultyJS{f.js, map[string]error{f.cfg.DLQStream: jetstream.ErrMsgNotFound}}, f.cfg, DeleteOptions{Seqs: []SeqRange{{d3, d3}}})
	if err != nil || res.Deleted != 0 || len(res.Bodies) != 1 || res.Bodies[0].Deleted || !strings.Contains(res.Bodies[0].NotDeleted, "removed by someone else") {
		t.Fatalf("dead letter removed meanwhile: %+v %v", res, err)
	}
	res, err = DeleteDeadLetters(ctx, faultyJS{f.js, map[string]error{f.cfg.Stream: jetstream.ErrMsgNotFound}}, f.cfg, DeleteOptions{Seqs: []SeqRange{{d3, d3}}})
	if err != nil || res.Deleted != 1 || len(res.Bodies) != 1 || res.Bodies[0].Deleted || res.Bodies[0].NotDeleted != "already gone" {
		t.Fatalf("body removed meanwhile: %+v %v", res, err)
	}
}

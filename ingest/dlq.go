package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/framing"
)

// HeaderReplays counts how often a batch went through dead-letter replay (the loop guard).
const HeaderReplays = "Omnigraph-Replay-Count"

// DeadLetter is one message of a graph's dead-letter stream.
type DeadLetter struct {
	Seq     uint64      `json:"seq"`
	Subject string      `json:"subject"`
	Reason  string      `json:"reason"`
	Kind    string      `json:"error_kind"`
	Error   string      `json:"error"`
	Detail  string      `json:"error_detail,omitempty"`
	OrigSeq uint64      `json:"original_sequence"`
	Time    time.Time   `json:"time"`
	Header  nats.Header `json:"headers"`
	Data    []byte      `json:"-"`
	// BodyOmitted is the size of a body sent by reference (too large to go with the error
	// headers): the body is the original message, which replay fetches. 0 otherwise.
	BodyOmitted int `json:"body_omitted_bytes,omitempty"`
}

func deadLetterOf(m *jetstream.RawStreamMsg, graph string) DeadLetter {
	d := DeadLetter{Seq: m.Sequence, Subject: m.Subject, Time: m.Time, Header: m.Header, Data: m.Data,
		Reason: strings.TrimPrefix(m.Subject, "omnigraph."+graph+".dlq."),
		Kind:   m.Header.Get(HeaderErrorKind), Error: m.Header.Get(HeaderError), Detail: m.Header.Get(HeaderErrorDetail)}
	d.OrigSeq, _ = strconv.ParseUint(m.Header.Get(HeaderOrigSeq), 10, 64)
	d.BodyOmitted, _ = strconv.Atoi(m.Header.Get(HeaderBodyOmitted))
	return d
}

// DeadLetters lists a graph's dead letters in sequence order, optionally only one reason.
func DeadLetters(ctx context.Context, js jetstream.JetStream, cfg Config, reason string) ([]DeadLetter, error) {
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	s, err := GraphStream(ctx, js, cfg, cfg.DLQStream)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, NoStream(cfg, "", cfg.DLQStream, err)
	}
	var out []DeadLetter
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := transfer(ctx, func(ctx context.Context) (*jetstream.RawStreamMsg, error) { return s.GetMsg(ctx, seq) })
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // removed after replay
		}
		if err != nil {
			return nil, err
		}
		d := deadLetterOf(m, cfg.Graph)
		if reason == "" || d.Reason == reason {
			out = append(out, d)
		}
	}
	return out, nil
}

// ReplayOptions choose which dead letters to replay and how.
type ReplayOptions struct {
	Reason     string
	First      uint64 // dead-letter sequence range; 0 = unbounded
	Last       uint64
	Mode       string // override Omnigraph-Mode (e.g. merge)
	Branch     string // override Omnigraph-Branch (e.g. a quarantine branch)
	From       string // Omnigraph-From for that branch
	Split      bool   // split into batches under the limits, nodes before edges
	DryRun     bool
	MaxReplays int // loop guard: a batch replayed this often is not replayed again (default DefaultMaxReplays)
	// Published, when set, is told of each message a replay published and JetStream stored
	// (dead letter dlqSeq's; ack says where), so a caller can wait for its outcome event.
	Published func(dlqSeq uint64, ack *jetstream.PubAck)
}

// DefaultMaxReplays is the loop guard's default: a batch replayed this often already is left
// in place, since it keeps failing for a reason a replay does not change.
const DefaultMaxReplays = 3

// ReplayResult counts what a replay did (with DryRun, what it would do): dead letters
// replayed, the messages they became, and those the loop guard left in place.
type ReplayResult struct {
	Replayed, Published, Skipped int
}

// requestSubject is the subject a dead-lettered request (a merge, maintenance or schema request, not a
// graph batch) came from, or "" for a graph batch.
func requestSubject(d DeadLetter, cfg Config) string {
	switch s := d.Header.Get(HeaderOrigSubject); s {
	case cfg.MergeSubject(), cfg.MaintenanceSubject(), cfg.SchemaSubject():
		return s
	}
	return ""
}

// Replay re-publishes dead letters to the subject they came from: graph batches to the ingest
// subject (with the batch options), merge and maintenance requests to theirs. A dead letter is
// removed only after every replacement message was accepted by JetStream. Replacement message
// ids derive from the dead letter, so a replay interrupted and run again does not double a
// batch.
func Replay(ctx context.Context, js jetstream.JetStream, cfg Config, o ReplayOptions, progress func(string)) (ReplayResult, error) {
	var res ReplayResult
	if err := cfg.withDefaults(); err != nil {
		return res, err
	}
	if o.MaxReplays <= 0 {
		o.MaxReplays = DefaultMaxReplays
	}
	// A replay into a branch no branch can have would only be dead-lettered again.
	if err := engine.CheckBranchName("--branch", o.Branch); err != nil {
		return res, err
	}
	if err := engine.CheckBranchName("--from", o.From); err != nil {
		return res, err
	}
	dls, err := DeadLetters(ctx, js, cfg, o.Reason)
	if err != nil {
		return res, err
	}
	s, err := GraphStream(ctx, js, cfg, cfg.DLQStream)
	if err != nil {
		return res, err
	}
	inRange := func(d DeadLetter) bool { return (o.First == 0 || d.Seq >= o.First) && (o.Last == 0 || d.Seq <= o.Last) }
	// A merge or maintenance request goes back to its subject as it was: the batch options
	// have no meaning for it. Refuse before anything is replayed rather than half way.
	if o.Mode != "" || o.Branch != "" || o.From != "" || o.Split {
		for _, d := range dls {
			if s := requestSubject(d, cfg); inRange(d) && s != "" {
				return res, fmt.Errorf("dlq seq %d is a request from %s, not a graph batch: --mode, --branch, --from and --split apply to graph batches only; replay it without them", d.Seq, s)
			}
		}
	}
	for i, d := range dls {
		if !inRange(d) {
			continue
		}
		n, _ := strconv.Atoi(d.Header.Get(HeaderReplays))
		if n >= o.MaxReplays {
			res.Skipped++
			progress(fmt.Sprintf("[%d/%d] dlq seq %d: replayed %d times already; left in place (loop guard)", i+1, len(dls), d.Seq, n))
			continue
		}
		body := d.Data
		if d.BodyOmitted > 0 {
			if body, err = originalBody(ctx, js, d); err != nil {
				return res, fmt.Errorf("replay dlq seq %d: %w (the dead letter is kept)", d.Seq, err)
			}
		}
		bodies := [][]byte{body}
		if o.Split {
			// Room for the replay's headers beside each part.
			bodies = splitBatch(body, 4096, MaxBatchBytes-64<<10)
		}
		if o.DryRun {
			res.Replayed++
			res.Published += len(bodies)
			progress(fmt.Sprintf("[%d/%d] dlq seq %d (%s): would publish %d message(s)", i+1, len(dls), d.Seq, d.Reason, len(bodies)))
			continue
		}
		subject := requestSubject(d, cfg)
		if subject == "" {
			subject = cfg.IngestSubject()
		}
		for j, body := range bodies {
			m := nats.NewMsg(subject)
			m.Data = body
			for k, vs := range d.Header {
				// The producer's message id stays as Omnigraph-Original-Msg-Id and is not
				// restored as Nats-Msg-Id: inside JetStream's duplicate window the stream would
				// drop the replay as a duplicate of the dead-lettered original.
				if strings.HasPrefix(k, "Omnigraph-Error") || (strings.HasPrefix(k, "Omnigraph-Original") && k != HeaderOrigMsgID && k != HeaderOrigError && k != HeaderOrigErrorKind) ||
					k == HeaderDeliveries || k == HeaderDeadAt || k == HeaderMsgID || k == HeaderBodyOmitted {
					continue
				}
				for _, v := range vs {
					m.Header.Add(k, v)
				}
			}
			for k, v := range map[string]string{HeaderMode: o.Mode, HeaderBranch: o.Branch, HeaderFrom: o.From} {
				if v != "" {
					m.Header.Set(k, v)
				}
			}
			if m.Header.Get(HeaderOrigError) == "" && d.Error != "" {
				m.Header.Set(HeaderOrigError, d.Error)
				m.Header.Set(HeaderOrigErrorKind, d.Kind)
			}
			m.Header.Set(HeaderReplays, strconv.Itoa(n+1))
			m.Header.Set(HeaderMsgID, fmt.Sprintf("replay:%s:%d:%d:%d", cfg.DLQStream, d.Seq, n+1, j))
			ack, err := transfer(ctx, func(ctx context.Context) (*jetstream.PubAck, error) { return js.PublishMsg(ctx, m) })
			if err != nil {
				if tooLarge(err) {
					return res, fmt.Errorf("replay dlq seq %d: %d bytes and the replay headers are more than JetStream stores in one message; replay it with --split (the dead letter is kept)", d.Seq, len(body))
				}
				return res, fmt.Errorf("replay dlq seq %d: %w (the dead letter is kept)", d.Seq, err)
			}
			res.Published++
			if o.Published != nil {
				o.Published(d.Seq, ack)
			}
		}
		if err := s.DeleteMsg(ctx, d.Seq); err != nil {
			return res, fmt.Errorf("remove dlq seq %d after its replay was accepted: %w", d.Seq, err)
		}
		res.Replayed++
		progress(fmt.Sprintf("[%d/%d] dlq seq %d (%s): replayed as %d message(s)", i+1, len(dls), d.Seq, d.Reason, len(bodies)))
	}
	return res, nil
}

// transferTimeout bounds one JetStream request that moves a message body (up to 32 MiB) when
// the caller's context sets no deadline: the jetstream package's own default, 5 s, is too short
// for that on a busy server, and a dead-letter tool should not fail where the data is only slow.
const transferTimeout = 2 * time.Minute

// transfer runs one body-moving request under ctx's deadline, or transferTimeout without one.
func transfer[T any](ctx context.Context, req func(context.Context) (T, error)) (T, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, transferTimeout)
		defer cancel()
	}
	return req(ctx)
}

// BodyGoneError is a dead letter sent by reference whose body its stream no longer holds.
type BodyGoneError struct {
	Stream string
	Seq    uint64
	Reason string
}

func (e *BodyGoneError) Error() string {
	return fmt.Sprintf("its body was sent by reference to %s sequence %d, but %s", e.Stream, e.Seq, e.Reason)
}

// ErrorKind is "invalid": the dead letter cannot be replayed; its body is gone.
func (e *BodyGoneError) ErrorKind() string { return "invalid" }

// originalBody fetches the body of a dead letter sent by reference from the ingest stream.
func originalBody(ctx context.Context, js jetstream.JetStream, d DeadLetter) ([]byte, error) {
	stream := d.Header.Get(HeaderOrigStream)
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("its %d-byte body was sent by reference to stream %s, which is not there: %w", d.BodyOmitted, stream, err)
	}
	// A stream made again (an operator, a broker that lost its store) numbers its messages
	// from 1 again: its sequence d.OrigSeq is another message, whatever its size.
	if created, ok := deadLetterIncarnation(d); ok && s.CachedInfo().Created.UnixNano() != created {
		return nil, &BodyGoneError{Stream: stream, Seq: d.OrigSeq, Reason: "the stream was created again since the dead letter, so that sequence is another message"}
	}
	m, err := transfer(ctx, func(ctx context.Context) (*jetstream.RawStreamMsg, error) { return s.GetMsg(ctx, d.OrigSeq) })
	if err != nil {
		return nil, fmt.Errorf("its %d-byte body was sent by reference to %s sequence %d, which is not there: %w", d.BodyOmitted, stream, d.OrigSeq, err)
	}
	if len(m.Data) != d.BodyOmitted || m.Time.After(d.Time) {
		return nil, &BodyGoneError{Stream: stream, Seq: d.OrigSeq, Reason: fmt.Sprintf("it holds another message (%d bytes, stored %s), not the %d-byte body", len(m.Data), m.Time.UTC().Format(time.RFC3339), d.BodyOmitted)}
	}
	return m.Data, nil
}

// splitBatch splits NDJSON lines into batches of at most maxLines lines and maxBytes bytes,
// node lines first, so edges find the nodes of earlier batches. A line is an edge when the
// envelope says so (a node whose data mentions "edge" is still a node); a line that does not
// frame stays with the nodes, to be refused again with its reason.
func splitBatch(body []byte, maxLines, maxBytes int) [][]byte {
	var nodes, edges [][]byte
	for _, l := range bytes.Split(body, []byte("\n")) {
		t := bytes.TrimSpace(l)
		if len(t) == 0 {
			continue
		}
		if recs, err := framing.ParseBytes(t, framing.DefaultLimits()); err == nil && len(recs) == 1 && recs[0].Kind == framing.EdgeRecord {
			edges = append(edges, t)
		} else {
			nodes = append(nodes, t)
		}
	}
	var out [][]byte
	var cur []byte
	lines := 0
	for _, l := range append(nodes, edges...) {
		if lines > 0 && (lines == maxLines || len(cur)+len(l)+1 > maxBytes) {
			out = append(out, cur)
			cur, lines = nil, 0
		}
		cur = append(append(cur, l...), '\n')
		lines++
	}
	if lines > 0 {
		out = append(out, cur)
	}
	return out
}

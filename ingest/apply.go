package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// applied is what one message made visible: its commit event and the rows it carried.
type applied struct {
	event    Event
	entities int
}

// Event is what omnigraph.<graph>.events says of each message (events.go). Outcome says how it
// ended. A commit event (outcome committed or already_applied, after the ack) has Kind "load",
// "merge", "optimize", "cleanup" or "schema"; a merge event carries Merge, and an already_up_to_date
// merge has no commit id (nothing was published); an optimize event carries Optimize (no
// commit id when nothing needed compacting), a cleanup event Cleanup (a cleanup publishes no
// commit), a schema event Schema (no commit id when the schema was already the accepted one).
// The other outcomes (dead_lettered, held, empty) are their own Kind, with Request
// naming what the message asked for, so a reader of commit kinds never takes one for a commit.
type Event struct {
	Kind            string                 `json:"kind"`
	Outcome         string                 `json:"outcome"`
	Request         string                 `json:"request,omitempty"`
	Graph           string                 `json:"graph"`
	Branch          string                 `json:"branch"`
	Mode            engine.Mode            `json:"mode,omitempty"`
	Nodes           []engine.TypeCount     `json:"nodes,omitempty"`
	Edges           []engine.TypeCount     `json:"edges,omitempty"`
	Merge           *MergeEvent            `json:"merge,omitempty"`
	Optimize        *engine.OptimizeResult `json:"optimize,omitempty"`
	Cleanup         *engine.CleanupResult  `json:"cleanup,omitempty"`
	Schema          *SchemaEvent           `json:"schema,omitempty"`
	GraphCommitID   string                 `json:"graph_commit_id"`
	ManifestVersion uint64                 `json:"graph_manifest_version"`
	ActorID         *string                `json:"actor_id"`
	SourceStream    string                 `json:"source_stream"`
	SourceSequence  uint64                 `json:"source_sequence"`
	SourceMsgID     string                 `json:"source_msg_id,omitempty"`
	AlreadyApplied  bool                   `json:"already_applied,omitempty"`
	// ReceiptKey is the message's receipt key (publisher.Receipt.ReceiptKey): its
	// Nats-Msg-Id, or <stream>@<created>:<seq> without one.
	ReceiptKey string `json:"receipt_key,omitempty"`
	// Reason (dead_lettered), ErrorKind and Error (dead_lettered, held): why, as the dead
	// letter's subject and headers say it; ErrorDetail the error's fields.
	Reason      string          `json:"reason,omitempty"`
	ErrorKind   string          `json:"error_kind,omitempty"`
	Error       string          `json:"error,omitempty"`
	ErrorDetail json.RawMessage `json:"error_detail,omitempty"`
	// The dead letter (dead_lettered): its subject, stream and sequence there (what `worker
	// dlq show` takes), and the body's size when it went by reference.
	DLQSubject  string `json:"dlq_subject,omitempty"`
	DLQStream   string `json:"dlq_stream,omitempty"`
	DLQSequence uint64 `json:"dlq_sequence,omitempty"`
	BodyOmitted int    `json:"body_omitted_bytes,omitempty"`
	// Attempts is how often a held message had been tried when the hold began.
	Attempts int `json:"attempts,omitempty"`
}

// MergeEvent is the merge part of a commit event.
type MergeEvent struct {
	Source            string                   `json:"source"`
	Target            string                   `json:"target"`
	Outcome           string                   `json:"outcome"`
	Tables            []engine.MergeTableStats `json:"tables"`
	BranchDeleted     *bool                    `json:"branch_deleted,omitempty"`
	BranchDeleteError string                   `json:"branch_delete_error,omitempty"`
	BranchKept        *bool                    `json:"branch_kept,omitempty"`
	BranchKeptReason  string                   `json:"branch_kept_reason,omitempty"`
}

// MergeRequestBody is the JSON body of a merge request on omnigraph.<graph>.merge.
type MergeRequestBody struct {
	Source       string `json:"source"`
	Target       string `json:"target"` // default main
	DeleteSource bool   `json:"delete_source"`
}

// ParseMergeRequest reads a merge request strictly: one JSON object, known members only, a
// source branch.
func ParseMergeRequest(data []byte) (MergeRequestBody, error) {
	var body MergeRequestBody
	if err := decodeRequest(data, &body, "merge request", `{"source", "target", "delete_source"}`); err != nil {
		return body, err
	}
	if body.Source == "" {
		return body, &errs.InvalidInput{Field: "source", Reason: "a merge request needs a source branch"}
	}
	if body.Target == "" {
		body.Target = "main"
	}
	if err := engine.CheckBranchName("source", body.Source); err != nil {
		return body, err
	}
	if err := engine.CheckBranchName("target", body.Target); err != nil {
		return body, err
	}
	return body, nil
}

// decodeRequest reads a request body strictly: one JSON object of known members (want names
// them in the error), nothing after it.
func decodeRequest(data []byte, v any, field, want string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &errs.InvalidInput{Field: field, Reason: fmt.Sprintf("want %s: %v", want, err)}
	}
	if dec.More() {
		return &errs.InvalidInput{Field: field, Reason: "trailing data after the JSON object"}
	}
	return nil
}

// loadRequest frames a graph batch and returns the load that applies it; ahead builds its rows
// too, for the load's first attempt.
//
// held is about how much memory the staged load keeps beside the message's body; release
// gives the records' memory back to the framer once apply will not be called again.
func (w *Worker) loadRequest(ctx context.Context, msg jetstream.Msg, receipt *publisher.Receipt, ahead bool) (apply func(context.Context) (*applied, error), release func(), held int64, err error) {
	h := msg.Headers()
	for _, name := range []string{HeaderBranch, HeaderFrom} {
		if err := engine.CheckBranchName(name, h.Get(name)); err != nil {
			return nil, nil, 0, err
		}
	}
	mode := engine.Mode(h.Get(HeaderMode))
	if mode == "" {
		mode = engine.ModeMerge
	}
	// The body stays as it is while the message is held (its ack, receipt hash and any dead
	// letter need it), so the records may point into it rather than into a copy.
	fr, err := framing.FrameRetained(msg.Data(), framing.DefaultLimits())
	if err != nil {
		return nil, nil, 0, err
	}
	recs := fr.Records
	if len(recs) == 0 {
		return w.emptyLoad(msg, mode), fr.Release, 0, nil
	}
	req := engine.LoadRequest{Branch: h.Get(HeaderBranch), From: h.Get(HeaderFrom), Mode: mode, Actor: h.Get(HeaderActor), Records: recs,
		Receipt: receipt}
	if ahead {
		req.Built, _ = w.g.Build(req) // a refusal is Load's to report, in its order
		if err := req.Built.WriteAhead(ctx); err != nil && ctx.Err() == nil {
			// Not the batch's failure: its load writes the files in its own turn.
			w.log.Warn("writing a batch's data files ahead failed; its load writes them", zap.Error(err))
		}
	}
	held = stagedBytes(recs, req.Built)
	built := req.Built
	release = func() {
		fr.Release()
		built.Discard(context.WithoutCancel(ctx))
	}
	return func(ctx context.Context) (*applied, error) {
		res, err := w.g.Load(ctx, req)
		req.Built = nil // a retry builds anew
		if err != nil {
			return nil, err
		}
		return &applied{entities: res.TotalEntities, event: Event{Kind: "load", Branch: res.Branch, Mode: res.Mode, Nodes: res.Nodes, Edges: res.Edges,
			GraphCommitID: res.Commit.GraphCommitID, ManifestVersion: res.Commit.GraphManifestVersion, ActorID: res.Commit.ActorID,
			AlreadyApplied: res.AlreadyApplied}}, nil
	}, release, held, nil
}

// emptyLoad is the load of a batch with no records: nothing to commit, so the graph is not
// asked (its Load would make a commit of no rows). The mode is still one a load takes, as
// Load would check; the branch names were checked before framing.
func (w *Worker) emptyLoad(msg jetstream.Msg, mode engine.Mode) func(context.Context) (*applied, error) {
	return func(context.Context) (*applied, error) {
		switch mode {
		case engine.ModeAppend, engine.ModeMerge, engine.ModeOverwrite:
		default:
			return nil, &errs.InvalidInput{Field: HeaderMode, Reason: fmt.Sprintf("unknown load mode %q (want append, merge or overwrite)", mode)}
		}
		return &applied{event: w.outcomeEvent(OutcomeEmpty, msg.Subject(), msg.Headers())}, nil
	}
}

// stagedBytes is what a staged load holds beside the body: the records (which point into it)
// and the built rows.
func stagedBytes(recs []framing.Record, built *engine.Built) int64 {
	return int64(len(recs))*recordBytes + built.Bytes()
}

// recordBytes is about what one framed record holds beside the body it points into: the
// Record and a few data members. Measured: 8,192 records of five members held 2.2 MiB beside
// the body and the built rows, whatever the length of their values.
const recordBytes = 280

// mergeRequest parses a merge request and returns the merge that applies it.
func (w *Worker) mergeRequest(msg jetstream.Msg, receipt *publisher.Receipt) (func(context.Context) (*applied, error), error) {
	body, err := ParseMergeRequest(msg.Data())
	if err != nil {
		return nil, err
	}
	req := engine.MergeRequest{Source: body.Source, Target: body.Target, DeleteSource: body.DeleteSource,
		Actor: msg.Headers().Get(HeaderActor), Receipt: receipt}
	return func(ctx context.Context) (*applied, error) {
		res, err := w.g.Merge(ctx, req)
		if err != nil {
			return nil, err
		}
		if res.BranchDeleteError != "" {
			w.log.Warn("merged, but the source branch was not deleted", zap.String("source", res.Source), zap.String("error", res.BranchDeleteError))
		}
		ev := Event{Kind: "merge", Branch: res.Target, ActorID: res.ActorID, AlreadyApplied: res.AlreadyApplied,
			Merge: &MergeEvent{Source: res.Source, Target: res.Target, Outcome: res.Outcome, Tables: res.Tables,
				BranchDeleted: res.BranchDeleted, BranchDeleteError: res.BranchDeleteError, BranchKept: res.BranchKept, BranchKeptReason: res.BranchKeptReason}}
		if res.Commit != nil {
			ev.GraphCommitID, ev.ManifestVersion, ev.ActorID = res.Commit.GraphCommitID, res.Commit.GraphManifestVersion, res.Commit.ActorID
		}
		n := 0
		for _, t := range res.Tables {
			n += t.Inserted + t.Updated + t.Deleted
		}
		return &applied{entities: n, event: ev}, nil
	}, nil
}

// publishEvent publishes the event of a message applied and acknowledged: committed,
// already_applied or empty.
func (w *Worker) publishEvent(res *applied, receipt *publisher.Receipt) {
	w.emit(res.event, receipt)
}

// EventMsgID is the Nats-Msg-Id of the event of message seq of stream, the stream created at
// created (Unix ns; 0: not known): event:<stream>@<created>:<seq>. The creation time keeps
// the events of a stream created again, whose sequences start at 1 again, from being taken for
// duplicates of the old stream's events within the events stream's duplicate window.
func EventMsgID(stream string, created int64, seq uint64) string {
	if created == 0 {
		return fmt.Sprintf("event:%s:%d", stream, seq)
	}
	return fmt.Sprintf("event:%s@%d:%d", stream, created, seq)
}

// DeadLetterMsgID is the Nats-Msg-Id of the dead letter of message seq of stream, created at
// created as in EventMsgID: dlq:<stream>@<created>:<seq>. Without the creation time, a stream
// created again would number a new message as an old one's dead letter, the DLQ stream would
// drop the new dead letter as a duplicate within its window, and the message, Termed after
// its dead letter was "accepted", would be lost.
func DeadLetterMsgID(stream string, created int64, seq uint64) string {
	if created == 0 {
		return fmt.Sprintf("dlq:%s:%d", stream, seq)
	}
	return fmt.Sprintf("dlq:%s@%d:%d", stream, created, seq)
}

// receiptOf is the receipt a message's commit records: its stream, sequence and producer's id
// as JetStream delivered them, and the incarnation of the ingest stream, which keys the
// receipt of a message without an id (publisher.Receipt.ReceiptKey). The event and the dead
// letters still name the stream by its name alone.
func (w *Worker) receiptOf(msg jetstream.Msg, meta *jetstream.MsgMetadata) *publisher.Receipt {
	rc := &publisher.Receipt{Stream: meta.Stream, Sequence: meta.Sequence.Stream, MsgID: msg.Headers().Get(HeaderMsgID)}
	if meta.Stream == w.cfg.Stream {
		rc.StreamCreated = w.streamCreated.Load()
	}
	return rc
}

// refreshStreamIdentity reads the ingest stream's incarnation from JetStream: its creation
// time (StreamInfo.Created), which the server sets when the stream is created and keeps
// across its own restarts and, in a cluster, leader changes (the stream's assignment holds
// it), and which a stream deleted and created again under the same name does not share. It is
// the one place the worker learns it; whatever (re)creates the stream or reopens the pull
// calls it before messages are staged, so their receipts are keyed by the stream they
// came from.
func (w *Worker) refreshStreamIdentity(ctx context.Context) error {
	s, err := w.js.Stream(ctx, w.cfg.Stream)
	if err != nil {
		return fmt.Errorf("ingest: stream %s: %w", w.cfg.Stream, err)
	}
	created := s.CachedInfo().Created
	if created.IsZero() {
		return &StreamIdentityError{Stream: w.cfg.Stream}
	}
	now := created.UnixNano()
	if was := w.streamCreated.Swap(now); was != 0 && was != now {
		w.log.Warn("the ingest stream was created again: its messages are numbered from 1 again, and their receipts are keyed by the new stream",
			zap.String("stream", w.cfg.Stream), zap.Time("was_created", time.Unix(0, was).UTC()), zap.Time("created", created.UTC()))
	}
	return nil
}

// StreamIdentityError is an ingest stream whose creation time the server does not report:
// without it, a message without a Nats-Msg-Id could not be told from the message at the same
// sequence of an earlier stream of that name, so the worker does not consume it.
type StreamIdentityError struct{ Stream string }

func (e *StreamIdentityError) Error() string {
	return fmt.Sprintf("ingest: stream %s: the server reports no creation time, which keys the receipts of messages without a Nats-Msg-Id", e.Stream)
}

package ingest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// SeqRange is the dead-letter sequences First to Last, both included (one sequence: First ==
// Last).
type SeqRange struct{ First, Last uint64 }

func (r SeqRange) String() string {
	if r.First == r.Last {
		return strconv.FormatUint(r.First, 10)
	}
	return fmt.Sprintf("%d-%d", r.First, r.Last)
}

func (r SeqRange) has(seq uint64) bool { return seq >= r.First && seq <= r.Last }

// SelectionError is a selection of dead letters that names none by its form: a sequence that
// is not a number, a range whose first sequence is after its last, or no selection at all.
type SelectionError struct {
	Selection, Reason string
	// From names where the selection was given (a flag, a variable), for the message; ""
	// for a command's arguments.
	From string
}

func (e *SelectionError) Error() string {
	switch {
	case e.Selection == "":
		return e.Reason
	case e.From != "":
		return fmt.Sprintf("%s %q: %s", e.From, e.Selection, e.Reason)
	}
	return fmt.Sprintf("dead-letter selection %q: %s", e.Selection, e.Reason)
}

// ParseSeqs reads a selection of dead-letter sequences: sequences and ranges A-B, separated by
// commas ("3", "3,7", "3-9,12"). It refuses an empty item, a sequence that is not a positive
// number and a range that goes backwards (*SelectionError).
func ParseSeqs(s string) ([]SeqRange, error) {
	var out []SeqRange
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		bad := func(why string) error {
			if item != strings.TrimSpace(s) {
				why = fmt.Sprintf("%q %s", item, why)
			}
			return &SelectionError{Selection: s, Reason: why}
		}
		if item == "" {
			return nil, &SelectionError{Selection: s, Reason: "an empty item: want SEQ or A-B, separated by commas"}
		}
		a, b, isRange := strings.Cut(item, "-")
		if !isRange {
			b = a
		}
		first, errA := strconv.ParseUint(a, 10, 64)
		last, errB := strconv.ParseUint(b, 10, 64)
		if errA != nil || errB != nil || first == 0 || last == 0 {
			return nil, bad("is not a sequence or a range A-B of sequences (from 1)")
		}
		if first > last {
			return nil, bad("goes backwards: the first sequence is after the last")
		}
		out = append(out, SeqRange{First: first, Last: last})
	}
	return out, nil
}

// DeleteOptions choose the dead letters DeleteDeadLetters removes: those of Reason (every
// reason when empty) with a sequence in Seqs, or every one of Reason when Seqs is empty. Either
// Seqs, Reason or All must be given, so that no empty selection removes everything.
type DeleteOptions struct {
	Reason string
	Seqs   []SeqRange
	All    bool
	// DryRun finds what would be removed and removes nothing.
	DryRun bool
}

// DeleteResult is what DeleteDeadLetters removed (with DryRun, would remove).
type DeleteResult struct {
	DryRun bool `json:"dry_run"`
	// Deleted counts the dead letters removed; DeadLetters are the selected ones.
	Deleted     int          `json:"deleted"`
	DeadLetters []DeadLetter `json:"dead_letters"`
	// Bodies are the bodies of the selected dead letters sent by reference, each the original
	// message in the ingest stream.
	Bodies []ReferencedBody `json:"bodies_by_reference,omitempty"`
}

// ReferencedBody is the body of a dead letter sent by reference: message Seq of Stream, which
// belongs to the dead letter alone once it was dead-lettered (the worker never applies it).
type ReferencedBody struct {
	DeadLetter uint64 `json:"dead_letter_seq"`
	Stream     string `json:"stream"`
	Seq        uint64 `json:"sequence"`
	Bytes      int    `json:"bytes"`
	// Deleted: removed from Stream with its dead letter (with DryRun: would be). Otherwise
	// NotDeleted says why not.
	Deleted    bool   `json:"deleted"`
	NotDeleted string `json:"not_deleted,omitempty"`
}

// NoDeadLetterError is a selection of sequences some of which name no dead letter (of the
// reason asked): nothing was removed, since a sequence typed wrong would otherwise remove
// the wrong dead letters without a word.
type NoDeadLetterError struct {
	Reason string
	Seqs   []SeqRange // the sequences and ranges that named none
}

func (e *NoDeadLetterError) Error() string {
	names := make([]string, len(e.Seqs))
	for i, r := range e.Seqs {
		names[i] = r.String()
	}
	of := ""
	if e.Reason != "" {
		of = " of reason " + e.Reason
	}
	at := "sequences"
	if len(e.Seqs) == 1 && e.Seqs[0].First == e.Seqs[0].Last {
		at = "sequence"
	}
	return fmt.Sprintf("no dead letter%s at %s %s: nothing was deleted (dlq list shows them)", of, at, strings.Join(names, ", "))
}

// DeleteDeadLetters removes the dead letters o selects from cfg's dead-letter stream, and the
// body of each one sent by reference from the ingest stream, when that message is still its
// body: the same stream (its creation time is the one the dead letter's Nats-Msg-Id carries),
// stored before the dead letter, of the size the dead letter gives, and referred to by no
// dead letter that stays. A body is removed after its dead letter, so a failure between the two
// leaves a message no dead letter names, never a dead letter without its body.
func DeleteDeadLetters(ctx context.Context, js jetstream.JetStream, cfg Config, o DeleteOptions) (DeleteResult, error) {
	res := DeleteResult{DryRun: o.DryRun, DeadLetters: []DeadLetter{}}
	if err := cfg.withDefaults(); err != nil {
		return res, err
	}
	if len(o.Seqs) == 0 && o.Reason == "" && !o.All {
		return res, &SelectionError{Reason: "no dead letters selected: give sequences, a reason, or all"}
	}
	for _, r := range o.Seqs {
		if r.First == 0 || r.First > r.Last {
			return res, &SelectionError{Selection: r.String(), Reason: "goes backwards or starts at 0"}
		}
	}
	dls, err := DeadLetters(ctx, js, cfg, "")
	if err != nil {
		return res, err
	}
	matched := make([]bool, len(o.Seqs))
	var keep []DeadLetter
	for _, d := range dls {
		in := len(o.Seqs) == 0
		for i, r := range o.Seqs {
			if r.has(d.Seq) && (o.Reason == "" || d.Reason == o.Reason) {
				matched[i], in = true, true
			}
		}
		if in && (o.Reason == "" || d.Reason == o.Reason) {
			res.DeadLetters = append(res.DeadLetters, d)
		} else {
			keep = append(keep, d)
		}
	}
	var none []SeqRange
	for i, ok := range matched {
		if !ok {
			none = append(none, o.Seqs[i])
		}
	}
	if len(none) > 0 {
		return DeleteResult{DryRun: o.DryRun, DeadLetters: []DeadLetter{}}, &NoDeadLetterError{Reason: o.Reason, Seqs: none}
	}
	for _, d := range res.DeadLetters {
		if d.BodyOmitted <= 0 {
			continue
		}
		if slices.ContainsFunc(res.Bodies, func(b ReferencedBody) bool {
			return b.Stream == d.Header.Get(HeaderOrigStream) && b.Seq == d.OrigSeq
		}) {
			continue // two selected dead letters of one message: its body goes once
		}
		b, err := referencedBody(ctx, js, d, keep)
		if err != nil {
			return res, err
		}
		res.Bodies = append(res.Bodies, b)
	}
	if o.DryRun {
		res.Deleted = len(res.DeadLetters)
		return res, nil
	}
	s, err := GraphStream(ctx, js, cfg, cfg.DLQStream)
	if err != nil {
		return res, err
	}
	gone := map[uint64]bool{}
	for _, d := range res.DeadLetters {
		switch err := s.DeleteMsg(ctx, d.Seq); {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			gone[d.Seq] = true // removed meanwhile (a replay): its body is the replay's business
		case err != nil:
			return res, fmt.Errorf("delete dead letter %d (%d deleted before it): %w", d.Seq, res.Deleted, err)
		default:
			res.Deleted++
		}
	}
	for i := range res.Bodies {
		b := &res.Bodies[i]
		if !b.Deleted {
			continue
		}
		if gone[b.DeadLetter] {
			b.Deleted, b.NotDeleted = false, "its dead letter was removed by someone else meanwhile"
			continue
		}
		src, err := js.Stream(ctx, b.Stream)
		if err == nil {
			err = src.DeleteMsg(ctx, b.Seq)
		}
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			b.Deleted, b.NotDeleted = false, "already gone"
		case err != nil:
			return res, fmt.Errorf("delete the body of dead letter %d (%s sequence %d) after the dead letter: %w", b.DeadLetter, b.Stream, b.Seq, err)
		}
	}
	return res, nil
}

// referencedBody decides whether the original message of d, a dead letter sent by reference,
// is still d's body and d's alone (see DeleteDeadLetters); keep are the dead letters that
// stay.
func referencedBody(ctx context.Context, js jetstream.JetStream, d DeadLetter, keep []DeadLetter) (ReferencedBody, error) {
	stream := d.Header.Get(HeaderOrigStream)
	b := ReferencedBody{DeadLetter: d.Seq, Stream: stream, Seq: d.OrigSeq, Bytes: d.BodyOmitted}
	if stream == "" || d.OrigSeq == 0 {
		b.NotDeleted = "the dead letter names no original message"
		return b, nil
	}
	for _, k := range keep {
		if k.Header.Get(HeaderOrigStream) == stream && k.OrigSeq == d.OrigSeq && sameIncarnation(k, d) {
			b.NotDeleted = fmt.Sprintf("dead letter %d, which stays, refers to it too", k.Seq)
			return b, nil
		}
	}
	s, err := js.Stream(ctx, stream)
	if isNoStream(err) {
		b.NotDeleted = "stream " + stream + " is not there"
		return b, nil
	}
	if err != nil {
		return b, fmt.Errorf("the body of dead letter %d: stream %s: %w", d.Seq, stream, err)
	}
	if created, ok := deadLetterIncarnation(d); ok && s.CachedInfo().Created.UnixNano() != created {
		b.NotDeleted = fmt.Sprintf("stream %s was created again since the dead letter: its sequence %d is another message", stream, d.OrigSeq)
		return b, nil
	}
	m, err := transfer(ctx, func(ctx context.Context) (*jetstream.RawStreamMsg, error) { return s.GetMsg(ctx, d.OrigSeq) })
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		b.NotDeleted = "already gone from the stream"
		return b, nil
	case err != nil:
		return b, fmt.Errorf("the body of dead letter %d: %s sequence %d: %w", d.Seq, stream, d.OrigSeq, err)
	case len(m.Data) != d.BodyOmitted || m.Time.After(d.Time):
		b.NotDeleted = fmt.Sprintf("%s sequence %d holds another message (%d bytes, stored %s)", stream, d.OrigSeq, len(m.Data), m.Time.UTC().Format("2006-01-02T15:04:05Z"))
		return b, nil
	}
	b.Deleted = true
	return b, nil
}

// deadLetterIncarnation is the ingest stream's creation time (Unix ns) that d's Nats-Msg-Id
// carries (dlq:<stream>@<created>:<seq>, DeadLetterMsgID); false when it carries none.
func deadLetterIncarnation(d DeadLetter) (int64, bool) {
	id, ok := strings.CutPrefix(d.Header.Get(HeaderMsgID), "dlq:")
	if !ok {
		return 0, false
	}
	i := strings.LastIndexByte(id, ':')
	if i < 0 {
		return 0, false
	}
	j := strings.LastIndexByte(id[:i], '@')
	if j < 0 {
		return 0, false
	}
	created, err := strconv.ParseInt(id[j+1:i], 10, 64)
	return created, err == nil && created != 0
}

// sameIncarnation: a and b may name one message (neither says otherwise).
func sameIncarnation(a, b DeadLetter) bool {
	ca, oka := deadLetterIncarnation(a)
	cb, okb := deadLetterIncarnation(b)
	return !oka || !okb || ca == cb
}

package publisher

import "context"

// ReceiptFor looks up the receipt of the message msg describes (its key, stream position and
// incarnation; its commit fields are not read), exactly, as Receipt does.
//
// A message without a producer's id is keyed by its position in one incarnation of its stream,
// <stream>@<created>:<seq> (Receipt.ReceiptKey). Receipts written by older builds are keyed
// <stream>:<seq>, which says nothing of the incarnation. Such a legacy receipt is the
// message's own only if it was written for the stream as it is now, and a commit of a message
// of the stream as it is now was made after the stream was created: so the legacy receipt
// answers only when its commit's created_at is not older than the stream's creation time.
// That keeps both promises across an upgrade: a message committed just before the upgrade and
// redelivered after it is recognised (its commit is newer than its stream), and once the
// stream has been deleted and created again, the old stream's receipts at the same sequences
// are passed over (their commits are older than the new stream), so its new messages commit.
//
// The two clocks compared are the writer's (created_at, taken before the commit, raised past
// the parent's if the clock was behind) and the NATS server's (the stream's creation): they
// may disagree by the hosts' clock skew, which matters only for a commit made within that
// skew of a stream's creation (a message committed right after its stream was created, or a
// stream re-created right after a commit); hosts kept by NTP are milliseconds apart. A legacy
// receipt whose commit cannot be found (its commit row is written in the same publish, so only
// a damaged __manifest lacks it) keeps the older builds' meaning: recognised.
//
// A legacy receipt is also passed over when it records a producer's id or another position:
// a producer whose msg id was literally "S:9" did not write the receipt of stream S's message 9.
func (s *State) ReceiptFor(ctx context.Context, msg *Receipt) (Receipt, bool, error) {
	rc, ok, err := s.Receipt(ctx, msg.ReceiptKey())
	if err != nil || ok || msg.MsgID != "" || msg.StreamCreated == 0 {
		return rc, ok, err
	}
	rc, ok, err = s.Receipt(ctx, msg.LegacyKey())
	if err != nil || !ok {
		return Receipt{}, false, err
	}
	if rc.MsgID != "" || rc.StreamCreated != 0 || rc.Stream != msg.Stream || rc.Sequence != msg.Sequence {
		return Receipt{}, false, nil
	}
	c, found, err := s.Commit(ctx, rc.GraphCommitID, rc.ManifestVersion)
	if err != nil {
		return Receipt{}, false, err
	}
	if found && !committedSince(c.Meta.CreatedAt, msg.StreamCreated) {
		return Receipt{}, false, nil // a message of an older incarnation of the stream
	}
	return rc, true, nil
}

// committedSince reports whether a commit's created_at (Unix microseconds) is not older than
// a stream's creation (Unix nanoseconds). Within the same microsecond counts as since: the
// receipt is then taken as the message's own, the answer older builds gave.
func committedSince(createdAtMicros, streamCreatedNanos int64) bool {
	return createdAtMicros >= streamCreatedNanos/1000
}

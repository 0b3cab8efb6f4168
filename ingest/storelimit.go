package ingest

import (
	"errors"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream's file store keeps each message as one record of at most 32 MiB, and the record
// counts more than the body: 30 bytes of framing (length, sequence, time, subject length,
// hash), the subject, and, when there are headers, a 4-byte length and the header block
// (nats-server's filestore, rlBadThresh). So a body of exactly 32 MiB can never be queued,
// however high max_payload and the stream's MaxMsgSize are set, and a dead letter (the body
// plus the error headers) of a batch near that size does not fit either.
const (
	storeRecordMax      = 32 << 20
	storeRecordOverhead = 30
	storeHeaderOverhead = 4
)

// MaxBodyBytes is the largest body JetStream's file store can hold in one message on subject
// with headers hdr.
func MaxBodyBytes(subject string, hdr nats.Header) int {
	n := storeRecordMax - storeRecordOverhead - len(subject)
	if len(hdr) > 0 {
		n -= storeHeaderOverhead + headerBlockBytes(hdr)
	}
	return n
}

// headerBlockBytes is the size of hdr on the wire: "NATS/1.0\r\n", "Key: value\r\n" per
// value, and a closing "\r\n".
func headerBlockBytes(hdr nats.Header) int {
	n := len("NATS/1.0\r\n") + len("\r\n")
	for k, vs := range hdr {
		for _, v := range vs {
			n += len(k) + len(": ") + len(v) + len("\r\n")
		}
	}
	return n
}

// tooLarge reports a publish the stream refused for the message's size: over its MaxMsgSize
// (10054), or over what its store can hold (10077, "message too large").
func tooLarge(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum ||
		apiErr.ErrorCode == 10077 && strings.Contains(apiErr.Description, "too large")
}

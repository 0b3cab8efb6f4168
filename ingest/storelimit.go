package ingest

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"unicode/utf8"

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

// tooLarge reports a publish refused for the message's size: over the connection's
// max_payload (the client's nats.ErrMaxPayload), over the stream's MaxMsgSize (10054), or over
// what its store can hold (10077, "message too large").
func tooLarge(err error) bool {
	if errors.Is(err, nats.ErrMaxPayload) {
		return true
	}
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum ||
		apiErr.ErrorCode == 10077 && strings.Contains(apiErr.Description, "too large")
}

// maxHeaderValueBytes bounds each error header of a dead letter. NATS refuses a header block
// over 64 KiB, and a refused dead letter would hold up the stream, so the error's text and
// fields are cut to fit with room to spare for the rest.
const maxHeaderValueBytes = 16 << 10

// boundedText is s on one line and at most maxHeaderValueBytes long.
func boundedText(s string) string {
	s = strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
	if len(s) <= maxHeaderValueBytes {
		return s
	}
	const more = "…"
	cut := maxHeaderValueBytes - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}

// boundedDetail is the JSON of an error's fields within maxHeaderValueBytes: lists too long
// to fit (a merge's conflicts) keep their first entries, with "<field>_total" giving the full
// count and "truncated": true.
func boundedDetail(detail map[string]any) []byte {
	b, _ := json.Marshal(detail)
	if len(b) <= maxHeaderValueBytes {
		return b
	}
	for keep := 1024; keep > 0; keep /= 2 {
		cut := make(map[string]any, len(detail)+2)
		for k, v := range detail {
			if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice && rv.Len() > keep {
				cut[k], cut[k+"_total"], cut["truncated"] = rv.Slice(0, keep).Interface(), rv.Len(), true
			} else {
				cut[k] = v
			}
		}
		if b, _ := json.Marshal(cut); len(b) <= maxHeaderValueBytes {
			return b
		}
	}
	b, _ = json.Marshal(map[string]any{"truncated": true, "bytes": len(b)})
	return b
}

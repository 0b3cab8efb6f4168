package framing

// Resource strings of the *errs.ResourceLimitExceeded errors this package returns, exactly as
// the reference engine spells them (docs/omnigraph-format.md §2).
const (
	ResourceRequestBytes    = "graph_batch_request_bytes"
	ResourceLineBytes       = "graph_batch_line_bytes"
	ResourceStructuralSlots = "graph_batch_json_structural_slots"
)

// Default limits. Each is inclusive: a value equal to the limit is accepted.
const (
	// DefaultMaxBytes bounds the whole batch: 33,554,432 bytes (32 MiB), the reference's
	// INGEST_REQUEST_BODY_LIMIT_BYTES for /load/ndjson; over it → graph_batch_request_bytes.
	// The NATS body limit of the message contract is the same 32 MiB.
	DefaultMaxBytes int64 = 33554432

	// DefaultMaxLineBytes bounds one line, not counting its "\n" nor the "\r" of a CRLF:
	// 33,554,432 bytes, GRAPH_BATCH_MAX_LINE_BYTES = KEYED_WRITE_MAX_BYTES; over it →
	// graph_batch_line_bytes.
	DefaultMaxLineBytes = 33554432

	// DefaultMaxStructuralSlots bounds the JSON structure of one line before it is decoded:
	// 131,072 slots (= 64 MiB / 512). A line costs one slot plus one per '{' '}' '[' ']' ','
	// ':' outside strings; over it → graph_batch_json_structural_slots.
	DefaultMaxStructuralSlots = 131072

	// DefaultMaxDepth bounds array/object nesting in one line: 127 levels, the envelope object
	// counting as level 1. The docs name no depth limit; the reference decodes each line with
	// serde_json, whose recursion limit (128) refuses the 128th nested container as invalid
	// JSON, so a deeper line is refused here as *errs.InvalidInput.
	DefaultMaxDepth = 127
)

// Limits bounds one graph batch. A zero (or negative) field takes its default, so Limits{}
// behaves as DefaultLimits().
type Limits struct {
	// MaxBytes: whole batch size in bytes. Parse stops reading after MaxBytes+1 bytes.
	MaxBytes int64
	// MaxLineBytes: one line's bytes without its "\n" and the "\r" of a CRLF.
	MaxLineBytes int
	// MaxStructuralSlots: 1 + JSON delimiters ({ } [ ] , :) outside strings, per line.
	MaxStructuralSlots int
	// MaxDepth: maximum nesting of arrays and objects in one line (envelope = 1).
	MaxDepth int
	// MaxLines: maximum number of lines, blank lines included; 0 means no ceiling. The docs
	// name no line-count ceiling (the per-table 8,192-entity ceiling needs the schema and the
	// load mode, so the engine enforces it), hence no default and no resource string: a
	// batch over a configured MaxLines is refused as *errs.InvalidInput.
	MaxLines int

	// retain: the body is the caller's to keep unchanged while the records live (ParseRetained);
	// records point into it rather than into a copy.
	retain bool
}

// DefaultLimits returns the reference engine's limits for a strict graph batch.
func DefaultLimits() Limits {
	return Limits{
		MaxBytes:           DefaultMaxBytes,
		MaxLineBytes:       DefaultMaxLineBytes,
		MaxStructuralSlots: DefaultMaxStructuralSlots,
		MaxDepth:           DefaultMaxDepth,
	}
}

func (l Limits) normalized() Limits {
	d := DefaultLimits()
	if l.MaxBytes <= 0 {
		l.MaxBytes = d.MaxBytes
	}
	if l.MaxLineBytes <= 0 {
		l.MaxLineBytes = d.MaxLineBytes
	}
	if l.MaxStructuralSlots <= 0 {
		l.MaxStructuralSlots = d.MaxStructuralSlots
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = d.MaxDepth
	}
	if l.MaxLines < 0 {
		l.MaxLines = 0
	}
	return l
}

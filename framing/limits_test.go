package framing

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
)

// checkLimit asserts a *errs.ResourceLimitExceeded with the exact fields, located on line
// (0: not wrapped in a LineError).
func checkLimit(t *testing.T, recs []Record, err error, line int, resource string, limit, actual uint64) {
	t.Helper()
	if recs != nil {
		t.Fatalf("a refused batch must yield no records, got %d", len(recs))
	}
	var rle *errs.ResourceLimitExceeded
	if !errors.As(err, &rle) {
		t.Fatalf("want *errs.ResourceLimitExceeded, got %T %v", err, err)
	}
	if rle.Resource != resource || rle.Limit != limit || rle.Actual != actual {
		t.Fatalf("got %+v, want {%s %d %d}", *rle, resource, limit, actual)
	}
	var le *errs.LineError
	switch {
	case line == 0 && errors.As(err, &le):
		t.Fatalf("batch-level limit must not name a line: %v", err)
	case line > 0 && (!errors.As(err, &le) || le.Line != line):
		t.Fatalf("want line %d, got %v", line, err)
	}
	if errs.Kind(err) != errs.KindResourceLimit || !errs.Permanent(err) {
		t.Fatalf("kind %q", errs.Kind(err))
	}
}

// nodeLine returns a valid node line of exactly n bytes (n >= 12).
func nodeLine(n int) string {
	const base = `{"type":"P"}`
	return base + strings.Repeat(" ", n-len(base))
}

func TestDefaults(t *testing.T) {
	d := DefaultLimits()
	if d.MaxBytes != 33554432 || d.MaxLineBytes != 33554432 || d.MaxStructuralSlots != 131072 || d.MaxDepth != 127 || d.MaxLines != 0 {
		t.Fatalf("defaults %+v", d)
	}
	if (Limits{}).normalized() != d || (Limits{MaxBytes: -1, MaxLineBytes: -1, MaxStructuralSlots: -1, MaxDepth: -1, MaxLines: -1}).normalized() != d {
		t.Fatal("zero and negative fields must take the defaults")
	}
}

func TestMaxBytes(t *testing.T) {
	lim := Limits{MaxBytes: 40}
	body := nodeLine(39) + "\n" // 40 bytes
	if recs, err := ParseBytes([]byte(body), lim); err != nil || len(recs) != 1 {
		t.Fatalf("at the limit: %v", err)
	}
	if recs, err := Parse(strings.NewReader(body), lim); err != nil || len(recs) != 1 {
		t.Fatalf("Parse at the limit: %v", err)
	}
	if recs, err := Parse(iotest.OneByteReader(strings.NewReader(body)), lim); err != nil || len(recs) != 1 {
		t.Fatalf("Parse byte by byte at the limit: %v", err)
	}
	over := body + " "
	recs, err := ParseBytes([]byte(over), lim)
	checkLimit(t, recs, err, 0, "graph_batch_request_bytes", 40, 41)
	// Parse stops after MaxBytes+1 bytes: Actual is that lower bound.
	src := strings.NewReader(over + strings.Repeat(" ", 1000))
	recs, err = Parse(src, lim)
	checkLimit(t, recs, err, 0, "graph_batch_request_bytes", 40, 41)
	if src.Len() != 1000 {
		t.Fatalf("Parse read %d bytes past the limit", 1000-src.Len())
	}
	recs, err = Parse(iotest.OneByteReader(strings.NewReader(over+"xx")), lim)
	checkLimit(t, recs, err, 0, "graph_batch_request_bytes", 40, 41)
	if recs, err := Parse(strings.NewReader(body), Limits{MaxBytes: math.MaxInt64}); err != nil || len(recs) != 1 {
		t.Fatalf("unbounded MaxBytes: %v", err)
	}
}

func TestMaxBytesDefault32MiB(t *testing.T) {
	// Surface §8 #3: a 32 MiB body is accepted, 32 MiB + 1 refused with the exact ceiling.
	body := batch8192(t)
	if len(body) != 33554432 {
		t.Fatalf("generator made %d bytes", len(body))
	}
	recs, err := ParseBytes(body, DefaultLimits())
	if err != nil || len(recs) != 8192 {
		t.Fatalf("32 MiB batch: %d records, %v", len(recs), err)
	}
	big := append(body[:len(body):len(body)], ' ')
	recs, err = ParseBytes(big, DefaultLimits())
	checkLimit(t, recs, err, 0, "graph_batch_request_bytes", 33554432, 33554433)
	recs, err = Parse(bytes.NewReader(big), DefaultLimits())
	checkLimit(t, recs, err, 0, "graph_batch_request_bytes", 33554432, 33554433)
}

func TestMaxLineBytes(t *testing.T) {
	lim := Limits{MaxLineBytes: 20}
	ok := []string{
		nodeLine(20),
		nodeLine(20) + "\n",
		nodeLine(20) + "\r\n", // the CR of a CRLF is not counted
		nodeLine(12) + "\n" + nodeLine(20) + "\r\n", // each line on its own
	}
	for _, in := range ok {
		if _, err := ParseBytes([]byte(in), lim); err != nil {
			t.Fatalf("%q: %v", in, err)
		}
	}
	recs, err := ParseBytes([]byte(nodeLine(21)+"\n"), lim)
	checkLimit(t, recs, err, 1, "graph_batch_line_bytes", 20, 21)
	recs, err = ParseBytes([]byte(nodeLine(12)+"\n\n"+nodeLine(25)), lim)
	checkLimit(t, recs, err, 3, "graph_batch_line_bytes", 20, 25)
	// Without a "\n" there is no CRLF: a trailing CR at the end of the batch counts.
	recs, err = ParseBytes([]byte(nodeLine(20)+"\r"), lim)
	checkLimit(t, recs, err, 1, "graph_batch_line_bytes", 20, 21)
	// Blank lines are bounded too.
	recs, err = ParseBytes([]byte(strings.Repeat(" ", 21)), lim)
	checkLimit(t, recs, err, 1, "graph_batch_line_bytes", 20, 21)
}

func TestMaxStructuralSlots(t *testing.T) {
	line := `{"type":"P","data":{"l":[1,2]}}` // 1 + {:,:{:[,]}} = 12 slots
	if _, err := ParseBytes([]byte(line), Limits{MaxStructuralSlots: 12}); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	recs, err := ParseBytes([]byte("\n"+line), Limits{MaxStructuralSlots: 11})
	checkLimit(t, recs, err, 2, "graph_batch_json_structural_slots", 11, 12)
	// Delimiters inside strings (escaped quotes included) cost nothing.
	quoted := `{"type":"P","data":{"s":"{[,:]}\"{[,:]}\\"}}` // 1 + { : , : { : } } = 9
	if _, err := ParseBytes([]byte(quoted), Limits{MaxStructuralSlots: 9}); err != nil {
		t.Fatalf("delimiters in strings were charged: %v", err)
	}
	// The check runs before decoding: invalid JSON over the limit is a resource refusal.
	recs, err = ParseBytes([]byte("[[[[x"), Limits{MaxStructuralSlots: 4})
	checkLimit(t, recs, err, 1, "graph_batch_json_structural_slots", 4, 5)
	// Shortest lines at the boundary: "[]" costs 3.
	if _, err := ParseBytes([]byte("[]"), Limits{MaxStructuralSlots: 2}); err == nil {
		t.Fatal("[] must cost 3 slots")
	}
}

func TestMaxDepth(t *testing.T) {
	// The envelope is level 1 and data level 2, so 125 nested arrays reach level 127.
	nest := func(levels int) string {
		return `{"type":"P","data":{"v":` + strings.Repeat("[", levels) + strings.Repeat("]", levels) + `}}`
	}
	if _, err := ParseBytes([]byte(nest(125)), Limits{}); err != nil {
		t.Fatalf("127 levels: %v", err)
	}
	recs, err := ParseBytes([]byte(nest(126)), Limits{})
	field := truncate("data.v"+strings.Repeat("[0]", 125), maxField) // paths are bounded
	checkInvalid(t, recs, err, 1, field, "recursion limit exceeded: nesting deeper than 127 levels")
	// Objects count the same, and a smaller MaxDepth applies.
	if _, err := ParseBytes([]byte(`{"type":"P","data":{"o":{}}}`), Limits{MaxDepth: 3}); err != nil {
		t.Fatalf("3 levels: %v", err)
	}
	recs, err = ParseBytes([]byte(`{"type":"P","data":{"o":{"p":{}}}}`), Limits{MaxDepth: 3})
	checkInvalid(t, recs, err, 1, "data.o.p", "nesting deeper than 3 levels")
	// A deep non-object line is refused by depth before its shape.
	recs, err = ParseBytes([]byte(strings.Repeat("[", 200)), Limits{})
	checkInvalid(t, recs, err, 1, truncate(strings.Repeat("[0]", 127), maxField), "recursion limit exceeded")
}

func TestMaxLines(t *testing.T) {
	lim := Limits{MaxLines: 3}
	for _, in := range []string{
		"{\"type\":\"A\"}\n\n{\"type\":\"B\"}",
		"{\"type\":\"A\"}\n\n{\"type\":\"B\"}\n", // the final "\n" ends line 3, it starts none
	} {
		if recs, err := ParseBytes([]byte(in), lim); err != nil || len(recs) != 2 {
			t.Fatalf("%q: %v", in, err)
		}
	}
	recs, err := ParseBytes([]byte("{\"type\":\"A\"}\n\n{\"type\":\"B\"}\n\n"), lim)
	checkInvalid(t, recs, err, 4, "", "graph batch has more than 3 lines")
	if _, err := ParseBytes([]byte(strings.Repeat("\n", 100000)), Limits{}); err != nil {
		t.Fatalf("no line ceiling by default: %v", err)
	}
}

func TestReadError(t *testing.T) {
	boom := errors.New("connection reset")
	r := io.MultiReader(strings.NewReader(`{"type":"A"}`), iotest.ErrReader(boom))
	recs, err := Parse(r, Limits{})
	if recs != nil || !errors.Is(err, boom) || errs.Kind(err) != errs.KindUnknown || errs.Permanent(err) {
		t.Fatalf("read error must stay untyped and transient: %v (%s)", err, errs.Kind(err))
	}
}

// Reference loader unit tests (the reference loader's own strict-refusal cases, docs/omnigraph-format.md §1 and §5.1).
func TestReferenceStrictRefusalCases(t *testing.T) {
	// strict_graph_batch_rejects_ambiguous_or_noncanonical_json_before_effects: the eight
	// envelope cases are framing refusals with the reference's message fragment.
	framingCases := []refusal{
		{"recursive duplicate", `{"type":"Person","data":{"id":"Alice","name":"Alice","extra":{"x":1,"x":2}}}`, 1, "data.extra.x", "duplicate JSON member 'x'"},
		{"two objects on one line", `{"type":"Person","data":{"id":"Alice","name":"Alice"}} {"type":"Person","data":{"id":"Bob","name":"Bob"}}`, 1, "", "invalid strict JSON"},
		{"node and edge", `{"type":"Person","edge":"Knows","data":{"id":"Alice","name":"Alice"}}`, 1, "type", "exactly one of 'type' or 'edge'"},
		{"unknown top-level field", `{"type":"Person","data":{"id":"Alice","name":"Alice"},"branch":"main"}`, 1, "branch", "unknown top-level graph batch field 'branch'"},
		{"reserved top-level field", `{"type":"Person","data":{"id":"Alice","name":"Alice"},"_rowid":7}`, 1, "_rowid", "reserved physical state"},
		{"reserved data field", `{"type":"Person","data":{"id":"Alice","name":"Alice","_rowid":7}}`, 1, "data._rowid", "reserved physical state"},
		{"non-string supplied id", `{"type":"Person","data":{"id":7,"name":"Alice"}}`, 1, "data.id", "field 'id' must be a string"},
		{"edge structural field in data", `{"edge":"Knows","from":"Alice","to":"Bob","data":{"id":"knows-1","src":"Mallory"}}`, 1, "data.src", "reserved structural state"},
	}
	for _, c := range framingCases {
		t.Run(c.name, func(t *testing.T) {
			recs, err := ParseBytes([]byte(c.in), Limits{})
			checkInvalid(t, recs, err, c.line, c.field, c.reason)
		})
	}
	// The other three need the schema: framing passes them on for the engine to refuse.
	for _, in := range []string{
		`{"type":"Person","data":{"id":"Alice","name":"Alice","nickname":"Al"}}`, // unknown input field
		`{"type":"Person","data":{"id":"person-1","name":"Alice"}}`,              // noncanonical @key id
		`{"type":"Person","data":{"id":"Alice","name":"Alice","age":"old"}}`,     // expects Int32
	} {
		if recs := mustParse(t, in); len(recs) != 1 || recs[0].ID == nil {
			t.Fatalf("%s: %#v", in, recs)
		}
	}
}

func TestReferenceCRLFAndBlankLines(t *testing.T) {
	// strict_graph_batch_loads_graph_rows_with_crlf_and_blank_lines
	in := "\r\n" +
		"{\"type\":\"Person\",\"data\":{\"name\":\"Alice\",\"age\":30}}\r\n" +
		"{\"type\":\"Person\",\"data\":{\"name\":\"Bob\"}}\r\n" +
		"\r\n" +
		"{\"edge\":\"Knows\",\"from\":\"Alice\",\"to\":\"Bob\"}\r\n"
	recs := mustParse(t, in)
	if len(recs) != 3 || recs[0].Line != 2 || recs[1].Line != 3 || recs[2].Line != 5 ||
		recs[2].Kind != EdgeRecord || recs[2].From != "Alice" || recs[2].To != "Bob" ||
		func() string { v, _ := recs[0].Data.Get("age"); return string(v) }() != "30" {
		t.Fatalf("%#v", recs)
	}
}

func TestReferenceBoundedBeforeDOM(t *testing.T) {
	// strict_graph_batch_framing_and_structure_are_bounded_before_dom
	recs, err := ParseBytes([]byte("abcd\n{}\r\n"), Limits{MaxLineBytes: 3})
	checkLimit(t, recs, err, 1, "graph_batch_line_bytes", 3, 4)
	// ... and the oversized line does not corrupt the framing of the next CRLF line.
	recs, err = ParseBytes([]byte(nodeLine(12)+"\r\n"+nodeLine(12)+"\r\n"), Limits{MaxLineBytes: 12})
	if err != nil || len(recs) != 2 || recs[1].Line != 2 {
		t.Fatalf("%v %#v", err, recs)
	}
	amplified := "[" + strings.Repeat("0,", 131072) + "0]"
	recs, err = ParseBytes([]byte(amplified), Limits{})
	checkLimit(t, recs, err, 1, "graph_batch_json_structural_slots", 131072, 131073)
}

func TestReferenceOneBadLineRefusesTheBatch(t *testing.T) {
	// Surface §8 #2 invalid_raw_graph_batch_has_no_effect: nothing of the batch survives.
	in := "{\"type\":\"Person\",\"data\":{\"name\":\"Alice\"}}\n{\"type\":\"Person\",\"data\":{\"name\":\"Bob\"},\"x\":1}\n"
	recs, err := ParseBytes([]byte(in), Limits{})
	checkInvalid(t, recs, err, 2, "x", "unknown top-level graph batch field 'x'")
}

package framing

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
)

// fuzzSeeds are added in code as well as kept as files under testdata/fuzz/FuzzParse.
var fuzzSeeds = []string{
	"",
	"\n\r\n \t\f\n",
	`{"type":"Person","data":{"name":"Alice","age":30}}` + "\n" + `{"edge":"Knows","from":"Alice","to":"Bob","data":{"id":"k1"}}`,
	"\r\n{\"type\":\"A\",\"data\":{\"id\":\"x\",\"n\\u0061me\":\"\\ud83d\\ude00\",\"l\":[1,-0.5e-3,true,null,{}]}}\r\n",
	`{"type":"A","data":{"x":1,"x":2}}`,
	`{"type":"A"} {"type":"B"}`,
	`{"type":"A","edge":"E"}`,
	`{"edge":"E","from":"a","to":"b","data":{"src":"m"}}`,
	`{"type":"A","data":{"_rowid":1}}`,
	`{"type":"A","data":{"n":1e400}}`,
	`{"type":"\ud800"}`,
	"{\"type\":\"\xff\"}",
	"\xef\xbb\xbf{\"type\":\"A\"}",
	`[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]`,
	`{"type":"A","data":{"a0":0,"a1":1,"a2":2,"a3":3,"a4":4,"a5":5,"a6":6,"a7":7,"a8":8,"a9":9,"b0":0,"b1":1,"b2":2,"b3":3,"b4":4,"b5":5,"b6":6,"b7":7,"b8":8,"b9":9}}`,
	`{"type":"A","data":{"s":"{[,:]}\"\\"}}`,
}

// tinyLimits exercises every limit path on short inputs.
var tinyLimits = Limits{MaxBytes: 512, MaxLineBytes: 96, MaxStructuralSlots: 24, MaxDepth: 4, MaxLines: 6}

func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := ParseBytes(data, DefaultLimits())
		checkOutcome(t, data, recs, err)
		// The reader path agrees with the in-memory path.
		recs2, err2 := Parse(bytes.NewReader(data), DefaultLimits())
		if fmt.Sprint(err) != fmt.Sprint(err2) || !reflect.DeepEqual(recs, recs2) {
			t.Fatalf("Parse and ParseBytes disagree: %v / %v", err, err2)
		}
		// A retained body gives the same records and refusals, and is never written to.
		kept := bytes.Clone(data)
		recs3, err3 := ParseRetained(kept, DefaultLimits())
		if fmt.Sprint(err) != fmt.Sprint(err3) || !reflect.DeepEqual(recs, recs3) {
			t.Fatalf("ParseRetained and ParseBytes disagree: %v / %v", err3, err)
		}
		if !bytes.Equal(kept, data) {
			t.Fatalf("ParseRetained wrote to the body: %q became %q", data, kept)
		}
		// So does a frame, twice over memory given back (in parts too), and it gives its own
		// back after.
		for _, parts := range []int{1, 3} {
			for range 2 {
				fr := &Frame{}
				recs4, err4 := parseParts(kept, Limits{retain: true}.normalized(), parts, fr)
				if fmt.Sprint(err) != fmt.Sprint(err4) || !reflect.DeepEqual(recs, recs4) {
					t.Fatalf("a frame in %d parts and ParseBytes disagree: %v / %v", parts, err4, err)
				}
				fr.Release()
			}
		}
		// Parsing in parts (as large batches are) is exactly parsing line by line, refusals
		// included, whatever the number of parts.
		for _, lim := range []Limits{DefaultLimits(), tinyLimits.normalized()} {
			seq, serr := parseParts(data, lim, 1, nil)
			for _, parts := range []int{2, 3, 7} {
				par, perr := parseParts(data, lim, parts, nil)
				if fmt.Sprint(serr) != fmt.Sprint(perr) || !reflect.DeepEqual(seq, par) {
					t.Fatalf("%d parts disagree with one: %v / %v", parts, perr, serr)
				}
			}
		}
		if err == nil {
			// Every accepted line is JSON by encoding/json's (looser) standard too.
			for line := range bytes.SplitSeq(data, []byte("\n")) {
				if blank(line) {
					continue
				}
				if !json.Valid(line) {
					t.Fatalf("accepted a line encoding/json rejects: %q", line)
				}
				if err := strictOracle(line, DefaultMaxDepth); err != nil {
					t.Fatalf("accepted %q: %v", line, err)
				}
			}
			// Accepted records round-trip through their canonical encoding.
			for _, r := range recs {
				enc := r.AppendJSON(nil)
				if !json.Valid(enc) {
					t.Fatalf("invalid re-encoding %q", enc)
				}
				back, err := ParseBytes(enc, DefaultLimits())
				if err != nil || len(back) != 1 {
					t.Fatalf("re-encoding %q: %d records, %v", enc, len(back), err)
				}
				back[0].Line = r.Line
				back[0].Data = byName(back[0].Data) // the encoding sorts members by name
				r.Data = byName(slices.Clone(r.Data))
				if !reflect.DeepEqual(back[0], r) {
					t.Fatalf("round trip changed the record:\n%#v\n%#v", r, back[0])
				}
			}
		}
		recs, err = ParseBytes(data, tinyLimits)
		checkOutcome(t, data, recs, err)
	})
}

// checkOutcome: never both records and an error; every refusal typed, located and bounded;
// every record well formed.
func checkOutcome(t *testing.T, data []byte, recs []Record, err error) {
	t.Helper()
	if err != nil {
		if recs != nil {
			t.Fatalf("records returned with error %v", err)
		}
		lines := bytes.Count(data, []byte("\n")) + 1
		var inv *errs.InvalidInput
		var rle *errs.ResourceLimitExceeded
		var le *errs.LineError
		switch {
		case errors.As(err, &inv):
			if inv.Line < 1 || inv.Line > lines || inv.Reason == "" || len(inv.Field) > maxField+len("…") || len(err.Error()) > 2048 {
				t.Fatalf("badly located or unbounded InvalidInput: %+v", *inv)
			}
		case errors.As(err, &rle):
			if rle.Actual <= rle.Limit {
				t.Fatalf("limit error within its limit: %+v", *rle)
			}
			if rle.Resource != ResourceRequestBytes && (!errors.As(err, &le) || le.Line < 1 || le.Line > lines) {
				t.Fatalf("line-bound limit without its line: %v", err)
			}
		default:
			t.Fatalf("untyped error %T: %v", err, err)
		}
		if !errs.Permanent(err) || strings.ContainsAny(err.Error(), "\n\r") {
			t.Fatalf("refusal must be permanent and one line: %q", err)
		}
		return
	}
	prev := 0
	for _, r := range recs {
		if r.Line <= prev || (r.Kind != NodeRecord && r.Kind != EdgeRecord) {
			t.Fatalf("malformed record %#v", r)
		}
		prev = r.Line
		if _, ok := r.Data.Get("id"); ok {
			t.Fatal("data.id must move to Record.ID")
		}
		seen := map[string]bool{}
		for _, m := range r.Data {
			name, v := m.Name, m.Value
			if !json.Valid(v) || reservedPhysical(name) || (r.Kind == EdgeRecord && (name == "src" || name == "dst")) || seen[name] {
				t.Fatalf("bad data member %q: %s", name, v)
			}
			seen[name] = true
		}
	}
}

// strictOracle re-checks, with encoding/json's token stream, the strict rules encoding/json
// itself does not apply: no duplicate member (names compared decoded), nesting within
// maxDepth, finite numbers, one value per line.
func strictOracle(line []byte, maxDepth int) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	type frame struct {
		names map[string]bool
		isObj bool
		key   bool // the next string token of an object is a name
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() == "EOF" && len(stack) == 0 {
				return nil
			}
			return err
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.isObj && top.key {
			if d, ok := tok.(json.Delim); !ok || d != '}' {
				name := tok.(string)
				if top.names[name] {
					return fmt.Errorf("duplicate member %q", name)
				}
				top.names[name] = true
				top.key = false
				continue
			}
		}
		if top != nil && top.isObj {
			top.key = true
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				stack = append(stack, &frame{names: map[string]bool{}, isObj: v == '{', key: v == '{'})
				if len(stack) > maxDepth {
					return fmt.Errorf("depth %d", len(stack))
				}
			default:
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].isObj {
					stack[len(stack)-1].key = true
				}
			}
		case json.Number:
			if f, err := v.Float64(); err != nil && (f > 1 || f < -1) {
				return fmt.Errorf("number %s out of range", v)
			}
		}
		if len(stack) == 0 && dec.More() {
			return fmt.Errorf("more than one value")
		}
	}
}

// TestStrictOracle keeps the fuzz oracle honest.
func TestStrictOracle(t *testing.T) {
	for in, bad := range map[string]bool{
		`{"a":1,"b":{"a":[{"a":1}]}}`: false,
		`{"a":1,"\u0061":2}`:          true,
		`{"a":{"x":1,"x":1}}`:         true,
		`[{"k":1},{"k":1}]`:           false,
		`{"n":1e400}`:                 true,
		`{"n":1e-400}`:                false,
		`{} {}`:                       true,
		`[[[[]]]]`:                    false,
		`[[[[[]]]]]`:                  true,
	} {
		if got := strictOracle([]byte(in), 4) != nil; got != bad {
			t.Fatalf("%s: oracle says bad=%v", in, got)
		}
	}
}

// TestSpecial checks the word-at-a-time string scan against the byte table: every byte
// value at every position of an otherwise plain word.
func TestSpecial(t *testing.T) {
	for c := range 256 {
		for pos := range 8 {
			w := []byte("abcdefgh")
			w[pos] = byte(c)
			if got, want := special(binary.LittleEndian.Uint64(w)), !plain[c]; got != want {
				t.Fatalf("byte 0x%02x at %d: special %v, want %v", c, pos, got, want)
			}
		}
	}
	if special(binary.LittleEndian.Uint64([]byte("~ !#[]\x7f0"))) {
		t.Fatal("plain word flagged")
	}
}

// TestWideObjectLinear: the widest object the slot limit allows (about 65k members) is
// checked for duplicates in linear time; a duplicate at the end is still found.
func TestWideObjectLinear(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"type":"A","data":{`)
	const n = 65000
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":%d`, i, i)
	}
	recs, err := ParseBytes([]byte(b.String()+"}}"), Limits{})
	if err != nil || len(recs[0].Data) != n {
		t.Fatalf("wide object: %v", err)
	}
	_, err = ParseBytes([]byte(b.String()+`,"k64999":0}}`), Limits{})
	var inv *errs.InvalidInput
	if !errors.As(err, &inv) || inv.Field != "data.k64999" {
		t.Fatalf("late duplicate: %v", err)
	}
}

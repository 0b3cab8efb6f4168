package framing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
)

func strp(s string) *string { return &s }

// raw builds expected members, sorted by name (compare with byName).
func raw(m map[string]string) Members {
	var out Members
	for k, v := range m {
		out = append(out, Member{Name: k, Value: json.RawMessage(v)})
	}
	return byName(out)
}

// byName sorts members by name, so that records compare regardless of member order.
func byName(ms Members) Members {
	slices.SortFunc(ms, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return ms
}

func mustParse(t *testing.T, in string) []Record {
	t.Helper()
	recs, err := ParseBytes([]byte(in), Limits{})
	if err != nil {
		t.Fatalf("ParseBytes(%q): %v", in, err)
	}
	return recs
}

func TestParseAccepts(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want []Record
	}{
		{"node without data", `{"type":"Person"}`,
			[]Record{{Line: 1, Kind: NodeRecord, Type: "Person", Data: raw(nil)}}},
		{"member order free", `{"data":{"a":1},"type":"Person"}`,
			[]Record{{Line: 1, Kind: NodeRecord, Type: "Person", Data: raw(map[string]string{"a": "1"})}}},
		{"whitespace removed from values",
			"{ \"type\" : \"P\" ,\t\"data\" : { \"a\" : [ 1 , 2 ] , \"b\" : { \"c\" : null , \"d\" : \" x \" } } }",
			[]Record{{Line: 1, Kind: NodeRecord, Type: "P", Data: raw(map[string]string{"a": "[1,2]", "b": `{"c":null,"d":" x "}`})}}},
		{"edge with id", `{"edge":"Knows","from":"Alice","to":"Bob","data":{"id":"k1","since":19723}}`,
			[]Record{{Line: 1, Kind: EdgeRecord, Type: "Knows", From: "Alice", To: "Bob", ID: strp("k1"), Data: raw(map[string]string{"since": "19723"})}}},
		{"edge without data", `{"to":"Bob","from":"Alice","edge":"Knows"}`,
			[]Record{{Line: 1, Kind: EdgeRecord, Type: "Knows", From: "Alice", To: "Bob", Data: raw(nil)}}},
		{"node id", `{"type":"Person","data":{"id":"Alice","name":"Alice"}}`,
			[]Record{{Line: 1, Kind: NodeRecord, Type: "Person", ID: strp("Alice"), Data: raw(map[string]string{"name": `"Alice"`})}}},
		{"escapes decoded in names, kept in values",
			`{"t\u0079pe":"P\u0065rson","data":{"n\u0061me":"Ren\u00e9e","id":"a\"b"}}`,
			[]Record{{Line: 1, Kind: NodeRecord, Type: "Person", ID: strp(`a"b`), Data: raw(map[string]string{"name": `"Ren\u00e9e"`})}}},
		{"composite id and endpoints as written", `{"edge":"E","from":"[\"7\",\"acme\"]","to":"19723","data":{}}`,
			[]Record{{Line: 1, Kind: EdgeRecord, Type: "E", From: `["7","acme"]`, To: "19723", Data: raw(nil)}}},
		{"exact big integers and number spellings",
			`{"type":"N","data":{"u":18446744073709551615,"i":-9223372036854775808,"f":1.5E+3,"z":-0,"tiny":1e-400,"max":1.7976931348623157e308}}`,
			[]Record{{Line: 1, Kind: NodeRecord, Type: "N", Data: raw(map[string]string{
				"u": "18446744073709551615", "i": "-9223372036854775808", "f": "1.5E+3", "z": "-0",
				"tiny": "1e-400", "max": "1.7976931348623157e308"})}}},
		{"utf-8 and surrogate pairs", `{"type":"Émoji","data":{"s":"😀\ud83d\ude00"}}`,
			[]Record{{Line: 1, Kind: NodeRecord, Type: "Émoji", Data: raw(map[string]string{"s": `"😀\ud83d\ude00"`})}}},
		{"src and dst are only reserved on edges", `{"type":"Route","data":{"src":"a","dst":"b"}}`,
			[]Record{{Line: 1, Kind: NodeRecord, Type: "Route", Data: raw(map[string]string{"src": `"a"`, "dst": `"b"`})}}},
		{"nested duplicates in different objects are fine", `{"type":"P","data":{"a":{"k":1},"b":{"k":1},"l":[{"k":1},{"k":2}]}}`,
			[]Record{{Line: 1, Kind: NodeRecord, Type: "P", Data: raw(map[string]string{"a": `{"k":1}`, "b": `{"k":1}`, "l": `[{"k":1},{"k":2}]`})}}},
		{"blank lines counted, CRLF dropped, last line undelimited",
			"\r\n{\"type\":\"A\"}\r\n \t\f\r\n\n{\"type\":\"B\"}",
			[]Record{{Line: 2, Kind: NodeRecord, Type: "A", Data: raw(nil)}, {Line: 5, Kind: NodeRecord, Type: "B", Data: raw(nil)}}},
		{"CR inside a line and before EOF is JSON whitespace", "{\"type\":\"A\",\r\"data\":{}}\r",
			[]Record{{Line: 1, Kind: NodeRecord, Type: "A", Data: raw(nil)}}},
		{"empty batch", "", nil},
		{"only blank lines", "\n\n  \n", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := mustParse(t, c.in)
			for i := range got {
				got[i].Data = byName(slices.Clone(got[i].Data))
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got  %#v\nwant %#v", got, c.want)
			}
		})
	}
}

type refusal struct {
	name   string
	in     string
	line   int
	field  string
	reason string // fragment of the reason
}

// refusals are InvalidInput cases; each asserts type, line, field and a reason fragment.
var refusals = []refusal{
	// JSON-level (step 3)
	{"duplicate at top level", `{"type":"A","type":"B"}`, 1, "type", "duplicate JSON member 'type'"},
	{"duplicate after unescaping", `{"type":"A","t\u0079pe":"B"}`, 1, "type", "duplicate JSON member 'type'"},
	{"duplicate data", `{"type":"A","data":{},"data":{}}`, 1, "data", "duplicate JSON member 'data'"},
	{"duplicate in data", `{"type":"A","data":{"x":1,"y":2,"x":3}}`, 1, "data.x", "duplicate JSON member 'x'"},
	{"duplicate in array element", `{"type":"A","data":{"l":[{"k":1},{"k":1,"k":2}]}}`, 1, "data.l[1].k", "duplicate JSON member 'k'"},
	{"duplicate in a wide object", `{"type":"A","data":{"a0":0,"a1":1,"a2":2,"a3":3,"a4":4,"a5":5,"a6":6,"a7":7,"a8":8,"a9":9,"b0":0,"b1":1,"b2":2,"b3":3,"b4":4,"b5":5,"b6":6,"b7":7,"a3":0}}`, 1, "data.a3", "duplicate JSON member 'a3'"},
	{"duplicate in a non-object line", `[{"a":1,"a":1}]`, 1, "[0].a", "duplicate JSON member 'a'"},
	// After lines that set a shape of names, a repeat within the shape's prefix, a repeat of
	// a name the shape had earlier, and a repeat after a name left the shape are all caught.
	{"duplicate while following the data shape", "{\"type\":\"A\",\"data\":{\"x\":1,\"y\":2}}\n{\"type\":\"A\",\"data\":{\"x\":1,\"x\":2}}", 2, "data.x", "duplicate JSON member 'x'"},
	{"duplicate of an earlier shape name", "{\"type\":\"A\",\"data\":{\"x\":1,\"y\":2}}\n{\"type\":\"A\",\"data\":{\"x\":1,\"y\":2,\"x\":3}}", 2, "data.x", "duplicate JSON member 'x'"},
	{"duplicate after leaving the shape", "{\"type\":\"A\",\"data\":{\"x\":1,\"y\":2}}\n{\"type\":\"A\",\"data\":{\"x\":1,\"z\":2,\"x\":3}}", 2, "data.x", "duplicate JSON member 'x'"},
	{"duplicate while following the envelope shape", "{\"type\":\"A\",\"data\":{}}\n{\"type\":\"A\",\"type\":\"B\"}", 2, "type", "duplicate JSON member 'type'"},
	{"two values on a line", `{"type":"A"} {"type":"B"}`, 1, "", "invalid strict JSON: trailing characters"},
	{"trailing garbage", `{"type":"A"}x`, 1, "", "trailing characters after the JSON value: 'x'"},
	{"trailing comma in object", `{"type":"A",}`, 1, "", "expected a member name string"},
	{"trailing comma in array", `{"type":"A","data":{"l":[1,]}}`, 1, "data.l[1]", "expected a value"},
	{"missing colon", `{"type" "A"}`, 1, "type", "expected ':'"},
	{"unterminated object", `{"type":"A"`, 1, "", "expected ',' or '}'"},
	{"unterminated string", `{"type":"A`, 1, "type", "unterminated string"},
	{"single quotes", `{'type':'A'}`, 1, "", "expected a member name string"},
	{"bare word", `{"type":A}`, 1, "type", "expected a value, found 'A'"},
	{"bad literal", `{"type":"A","data":{"b":tru}}`, 1, "data.b", "expected a value"},
	{"capitalised literal", `{"type":"A","data":{"b":True}}`, 1, "data.b", "expected a value"},
	{"NaN", `{"type":"A","data":{"n":NaN}}`, 1, "data.n", "expected a value"},
	{"Infinity", `{"type":"A","data":{"n":-Infinity}}`, 1, "data.n", "invalid number"},
	{"leading zero", `{"type":"A","data":{"n":01}}`, 1, "data", "expected ',' or '}'"},
	{"leading plus", `{"type":"A","data":{"n":+1}}`, 1, "data.n", "expected a value"},
	{"bare minus", `{"type":"A","data":{"n":-}}`, 1, "data.n", "invalid number"},
	{"dot without digits", `{"type":"A","data":{"n":1.}}`, 1, "data.n", "after '.'"},
	{"leading dot", `{"type":"A","data":{"n":.5}}`, 1, "data.n", "expected a value"},
	{"exponent without digits", `{"type":"A","data":{"n":1e}}`, 1, "data.n", "exponent digit"},
	{"overflowing exponent", `{"type":"A","data":{"n":1e400}}`, 1, "data.n", "non-finite JSON number"},
	{"overflowing negative", `{"type":"A","data":{"n":-2e308}}`, 1, "data.n", "non-finite JSON number"},
	{"overflowing integer", `{"type":"A","data":{"n":1` + strings.Repeat("0", 400) + `}}`, 1, "data.n", "non-finite JSON number"},
	{"raw control character", "{\"type\":\"A\tB\"}", 1, "type", "control character 0x09"},
	{"invalid escape", `{"type":"A\x41"}`, 1, "type", "invalid escape 'x'"},
	{"short unicode escape", `{"type":"\u12"}`, 1, "type", "4 hex digits"},
	{"lone leading surrogate", `{"type":"\ud800"}`, 1, "type", "lone leading surrogate"},
	{"leading surrogate then non-surrogate", `{"type":"\ud800\u0041"}`, 1, "type", "lone leading surrogate"},
	{"lone trailing surrogate", `{"type":"\udc00"}`, 1, "type", "lone trailing surrogate"},
	{"invalid UTF-8 in a string", "{\"type\":\"A\xff\"}", 1, "type", "invalid UTF-8"},
	{"UTF-8 encoded surrogate", "{\"type\":\"\xed\xa0\x80\"}", 1, "type", "invalid UTF-8"},
	{"overlong UTF-8", "{\"type\":\"\xc0\xaf\"}", 1, "type", "invalid UTF-8"},
	{"invalid UTF-8 in a name", "{\"ty\xffpe\":\"A\"}", 1, "", "invalid UTF-8"},
	{"invalid UTF-8 outside strings", "{\"type\":\"A\"}\xff", 1, "", "trailing characters after the JSON value: byte 0xff"},
	{"byte order mark", "\xef\xbb\xbf{\"type\":\"A\"}", 1, "", "byte order mark"},
	{"form feed is not JSON whitespace", "{\f\"type\":\"A\"}", 1, "", "byte 0x0c"},
	// envelope (step 4)
	{"array line", `[{"type":"A"}]`, 1, "", "graph batch row must be one JSON object"},
	{"string line", `"type"`, 1, "", "graph batch row must be one JSON object"},
	{"null line", `null`, 1, "", "graph batch row must be one JSON object"},
	{"neither type nor edge", `{"data":{}}`, 1, "type", "exactly one of 'type' or 'edge'"},
	{"empty object", `{}`, 1, "type", "exactly one of 'type' or 'edge'"},
	{"node and edge", `{"type":"A","edge":"E","from":"a","to":"b"}`, 1, "type", "exactly one of 'type' or 'edge'"},
	{"unknown top-level field", `{"type":"A","branch":"main"}`, 1, "branch", "unknown top-level graph batch field 'branch'"},
	{"escaped name is compared decoded", `{"type":"A","edge\u0000":1}`, 1, "edge\x00", `unknown top-level graph batch field 'edge\x00'`},
	{"top-level id is unknown", `{"type":"A","id":"x"}`, 1, "id", "unknown top-level graph batch field 'id'"},
	{"from on a node", `{"type":"A","from":"x"}`, 1, "from", "unknown top-level graph batch field 'from'"},
	{"from_type is not in this surface", `{"edge":"E","from":"a","to":"b","from_type":"A"}`, 1, "from_type", "unknown top-level graph batch field 'from_type'"},
	{"smallest bad name first", `{"type":"A","zzz":1,"bbb":2}`, 1, "bbb", "unknown top-level graph batch field 'bbb'"},
	{"reserved top-level field", `{"type":"A","_rowid":7}`, 1, "_rowid", "top-level field '_rowid' is reserved physical state"},
	{"reserved sorts before unknown", `{"type":"A","zzz":1,"_tombstone":true}`, 1, "_tombstone", "is reserved physical state"},
	{"type not a string", `{"type":7}`, 1, "type", "graph batch field 'type' must be a string, got 7"},
	{"type null", `{"type":null}`, 1, "type", "must be a string, got null"},
	{"edge not a string", `{"edge":["E"],"from":"a","to":"b"}`, 1, "edge", `must be a string, got ["E"]`},
	{"edge without from", `{"edge":"E","to":"b"}`, 1, "from", "graph batch row requires field 'from'"},
	{"edge without to", `{"edge":"E","from":"a"}`, 1, "to", "graph batch row requires field 'to'"},
	{"from not a string", `{"edge":"E","from":1,"to":"b"}`, 1, "from", "graph batch field 'from' must be a string, got 1"},
	{"data array", `{"type":"A","data":[1]}`, 1, "data", "graph batch field 'data' must be an object, got [1]"},
	{"data null", `{"type":"A","data":null}`, 1, "data", "must be an object, got null"},
	{"data string", `{"type":"A","data":"x"}`, 1, "data", `must be an object, got "x"`},
	// data (step 5)
	{"edge data src", `{"edge":"E","from":"a","to":"b","data":{"src":"m"}}`, 1, "data.src", "edge data field 'src' is reserved structural state"},
	{"edge data dst", `{"edge":"E","from":"a","to":"b","data":{"dst":"m"}}`, 1, "data.dst", "edge data field 'dst' is reserved structural state"},
	{"edge data src before dst", `{"edge":"E","from":"a","to":"b","data":{"dst":"m","src":"n"}}`, 1, "data.src", "'src' is reserved structural state"},
	{"reserved data field", `{"type":"A","data":{"_rowid":7}}`, 1, "data._rowid", "input field '_rowid' is reserved physical state"},
	{"smallest reserved data field", `{"type":"A","data":{"_rowoffset":1,"_rowaddr":2}}`, 1, "data._rowaddr", "input field '_rowaddr'"},
	{"reserved before id type", `{"type":"A","data":{"id":1,"_tombstone":true}}`, 1, "data._tombstone", "reserved physical state"},
	{"non-string node id", `{"type":"A","data":{"id":7}}`, 1, "data.id", "field 'id' must be a string, got 7"},
	{"non-string edge id", `{"edge":"E","from":"a","to":"b","data":{"id":null}}`, 1, "data.id", "field 'id' must be a string, got null"},
	// line numbers
	{"line counts blank lines", "{\"type\":\"A\"}\n\r\n   \n{\"type\":\"A\",\"x\":1}\n{\"type\":7}", 4, "x", "unknown top-level graph batch field 'x'"},
	{"first violation wins", "{\"type\":\"A\"}\n{\"type\":1}\n{\"type\":\"A\",\"type\":1}", 2, "type", "must be a string"},
}

func TestParseRefusals(t *testing.T) {
	for _, c := range refusals {
		t.Run(c.name, func(t *testing.T) {
			recs, err := ParseBytes([]byte(c.in), Limits{})
			checkInvalid(t, recs, err, c.line, c.field, c.reason)
		})
	}
}

func TestReservedPhysicalFields(t *testing.T) {
	for _, name := range []string{"_tombstone", "_rowid", "_rowaddr", "_rowoffset", "_row_created_at_version", "_row_last_updated_at_version"} {
		recs, err := ParseBytes([]byte(`{"edge":"E","from":"a","to":"b","`+name+`":1}`), Limits{})
		checkInvalid(t, recs, err, 1, name, "top-level field '"+name+"' is reserved physical state")
		recs, err = ParseBytes([]byte(`{"type":"A","data":{"`+name+`":1}}`), Limits{})
		checkInvalid(t, recs, err, 1, "data."+name, "input field '"+name+"' is reserved physical state")
	}
	// Near misses are ordinary names (the schema decides on them).
	mustParse(t, `{"type":"A","data":{"_rowids":1,"rowid":2,"_row":3}}`)
}

func checkInvalid(t *testing.T, recs []Record, err error, line int, field, reason string) {
	t.Helper()
	if recs != nil {
		t.Fatalf("a refused batch must yield no records, got %d", len(recs))
	}
	var inv *errs.InvalidInput
	if !errors.As(err, &inv) {
		t.Fatalf("want *errs.InvalidInput, got %T %v", err, err)
	}
	if inv.Line != line || inv.Field != field || !strings.Contains(inv.Reason, reason) {
		t.Fatalf("got line %d field %q reason %q\nwant line %d field %q reason containing %q", inv.Line, inv.Field, inv.Reason, line, field, reason)
	}
	if errs.Kind(err) != errs.KindInvalid || !errs.Permanent(err) {
		t.Fatalf("kind %q", errs.Kind(err))
	}
}

func TestMessagesStayBounded(t *testing.T) {
	long := strings.Repeat("k", 10000)
	_, err := ParseBytes([]byte(`{"type":"A","`+long+`\n":1}`), Limits{})
	var inv *errs.InvalidInput
	if !errors.As(err, &inv) {
		t.Fatal(err)
	}
	if len(inv.Field) > maxShown+len("…") || len(inv.Reason) > 200 || !strings.HasSuffix(inv.Field, "…") {
		t.Fatalf("unbounded message: field %d bytes, reason %q", len(inv.Field), inv.Reason)
	}
	_, err = ParseBytes([]byte(`{"type":"A","data":{"id":{"v":"`+long+`"}}}`), Limits{})
	if !errors.As(err, &inv) || len(inv.Reason) > 200 {
		t.Fatalf("unbounded value in reason: %v", err)
	}
	// Names with control characters are escaped in reasons.
	_, err = ParseBytes([]byte(`{"type":"A","a\nb":1}`), Limits{})
	if !errors.As(err, &inv) || !strings.Contains(inv.Reason, `'a\nb'`) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("control character leaked: %q", err)
	}
	// Deep paths are bounded too.
	deep := `{"type":"A","data":{` + strings.Repeat(`"`+strings.Repeat("p", 60)+`":{`, 100) + `"x":1,"x":2` + strings.Repeat("}", 101) + "}"
	_, err = ParseBytes([]byte(deep), Limits{})
	if !errors.As(err, &inv) || len(inv.Field) > maxField+len("…") {
		t.Fatalf("unbounded path: %v", err)
	}
}

func TestRecordEncoding(t *testing.T) {
	r := Record{Kind: EdgeRecord, Type: "Kno\"ws", From: "a\x01", To: "b\xff", ID: strp("e\n1"),
		Data: raw(map[string]string{"z": "1", "a": `{"b":[true]}`, "id": `"ignored"`})}
	got := string(r.AppendJSON(nil))
	want := `{"edge":"Kno\"ws","from":"a\u0001","to":"b\ufffd","data":{"a":{"b":[true]},"id":"e\n1","z":1}}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	n := Record{Kind: NodeRecord, Type: "P", Data: raw(nil)}
	if b, _ := json.Marshal(n); string(b) != `{"type":"P","data":{}}` {
		t.Fatalf("node encoding %s", b)
	}
	if n.TableKey() != "node:P" || r.TableKey() != `edge:Kno"ws` {
		t.Fatal("TableKey")
	}
	if NodeRecord.String() != "node" || EdgeRecord.String() != "edge" || RecordKind(0).String() != "invalid" {
		t.Fatal("RecordKind.String")
	}
	// Every control character and the two escapes survive a round trip.
	var all strings.Builder
	for c := 0; c < 0x20; c++ {
		all.WriteByte(byte(c))
	}
	all.WriteString(`"\/é😀`)
	m := Record{Kind: NodeRecord, Type: all.String(), Data: raw(nil)}
	back := mustParse(t, string(m.AppendJSON(nil)))
	if len(back) != 1 || back[0].Type != all.String() {
		t.Fatalf("round trip of %q gave %#v", all.String(), back)
	}
}

func TestRoundTrip(t *testing.T) {
	in := "{\"type\":\"P\",\"data\":{\"n\\u0061me\":\"A\\u00e9\", \"id\":\"x\\/y\",\"l\":[1, {\"k\":null}]}}\n" +
		"\n{\"edge\":\"E\",\"to\":\"b\",\"from\":\"a\"}\r\n"
	recs := mustParse(t, in)
	var again []byte
	for i := range recs {
		again = recs[i].AppendJSON(again)
		again = append(again, '\n')
	}
	back := mustParse(t, string(again))
	for i := range back {
		back[i].Line = recs[i].Line
		recs[i].Data = byName(recs[i].Data) // the encoding sorts members by name
	}
	if !reflect.DeepEqual(recs, back) {
		t.Fatalf("round trip:\n%#v\n%#v", recs, back)
	}
}

// Data keeps the members in input order, and Get finds them by decoded name.
func TestDataKeepsInputOrder(t *testing.T) {
	recs := mustParse(t, `{"type":"P","data":{"b":1,"id":"x","a\u0041":[2],"c":null}}`)
	var names []string
	for _, m := range recs[0].Data {
		names = append(names, m.Name)
	}
	if !slices.Equal(names, []string{"b", "aA", "c"}) {
		t.Fatalf("member order %q", names)
	}
	if v, ok := recs[0].Data.Get("aA"); !ok || string(v) != "[2]" {
		t.Fatalf(`Get("aA") = %s, %v`, v, ok)
	}
	if _, ok := recs[0].Data.Get("id"); ok {
		t.Fatal("id is Record.ID, not a member")
	}
}

// A large batch is parsed in parts at once; line numbers, records and the first refusal are
// those of a line-by-line parse.
func TestLargeBatchParsesInParts(t *testing.T) {
	var b strings.Builder
	for i := range 3000 {
		if i%7 == 0 {
			b.WriteString("\r\n") // blank lines count
			continue
		}
		fmt.Fprintf(&b, `{"type":"P","data":{"id":"p%d","n":%d,"s":"%s"}}`+"\n", i, i, strings.Repeat("x", i%50))
	}
	body := []byte(b.String())
	if len(body) < 2*parallelMinBytes {
		t.Fatalf("batch of %d bytes is too small to be parsed in parts", len(body))
	}
	one, err := parseParts(body, DefaultLimits(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseBytes(body, DefaultLimits())
	if err != nil || !reflect.DeepEqual(got, one) {
		t.Fatalf("in parts: %d records, %v; line by line: %d", len(got), err, len(one))
	}
	if last := got[len(got)-1]; last.Line != 3000 || *last.ID != "p2999" {
		t.Fatalf("last record %+v", last)
	}
	// Two bad lines: the earlier one is reported, wherever the parts fall.
	lines := strings.SplitAfter(b.String(), "\n")
	lines[2400] = "{\"type\":\"P\",\"data\":{\"n\":1,\"n\":2}}\n"
	lines[2900] = "not json\n"
	_, err = ParseBytes([]byte(strings.Join(lines, "")), DefaultLimits())
	var in *errs.InvalidInput
	if !errors.As(err, &in) || in.Line != 2401 {
		t.Fatalf("want the refusal of line 2401, got %v", err)
	}
}

// Lines whose data names repeat, reorder, shorten and grow keep their own names in their own
// order, whatever shape the lines before them set.
func TestNamesAcrossShapes(t *testing.T) {
	lines := []string{
		`{"type":"A","data":{"a":1,"b":2}}`,
		`{"type":"A","data":{"a":3,"b":4}}`,
		`{"data":{"b":5,"a":6},"type":"A"}`,
		`{"type":"A","data":{"a":7}}`,
		`{"type":"A","data":{"a":8,"b":9,"c":10}}`,
		`{"type":"A","data":{"\u0061":11,"b":12}}`,
		`{"edge":"E","from":"x","to":"y","data":{"a":13}}`,
	}
	want := [][]string{{"a", "b"}, {"a", "b"}, {"b", "a"}, {"a"}, {"a", "b", "c"}, {"a", "b"}, {"a"}}
	recs, err := ParseBytes([]byte(strings.Join(lines, "\n")), DefaultLimits())
	if err != nil || len(recs) != len(want) {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	for i, r := range recs {
		var got []string
		for _, m := range r.Data {
			got = append(got, m.Name)
		}
		if strings.Join(got, ",") != strings.Join(want[i], ",") || r.Type != map[bool]string{true: "E", false: "A"}[i == 6] {
			t.Fatalf("line %d: names %v type %q, want %v", i+1, got, r.Type, want[i])
		}
	}
}

// ParseRetained points fast-path records into the body itself (no copy), and gives a line
// the general scanner compacts a copy of its own: the body stays as it was.
func TestParseRetainedUsesTheBody(t *testing.T) {
	body := []byte("{\"type\":\"A\",\"data\":{\"x\":\"fast\"}}\n{ \"type\" : \"A\" , \"data\" : { \"x\" : [ 1 , 2 ] } }\n")
	orig := bytes.Clone(body)
	recs, err := ParseRetained(body, DefaultLimits())
	if err != nil || len(recs) != 2 {
		t.Fatalf("%v %v", recs, err)
	}
	inBody := func(v []byte) bool {
		if len(v) == 0 {
			return false
		}
		p, lo := uintptr(unsafe.Pointer(&v[0])), uintptr(unsafe.Pointer(&body[0]))
		return p >= lo && p < lo+uintptr(len(body))
	}
	if v := recs[0].Data[0].Value; string(v) != `"fast"` || !inBody(v) {
		t.Errorf("fast-path value %q is not the body's own bytes", v)
	}
	if v := recs[1].Data[0].Value; string(v) != `[1,2]` || inBody(v) {
		t.Errorf("compacted value %q: want a copy of its own", v)
	}
	if !bytes.Equal(body, orig) {
		t.Errorf("the body was written to: %q", body)
	}
	copied, err := ParseBytes(body, DefaultLimits())
	if err != nil || inBody(copied[0].Data[0].Value) {
		t.Errorf("ParseBytes points into the caller's body: %v", err)
	}
}

// The records array is sized by what the body can hold, not by its line count: a body of
// newlines is a valid empty batch, and costs no more than a body of the shortest records
// would (before, it cost an array of one record per line: 3 GiB).
func TestBlankLinesSizeNoRecords(t *testing.T) {
	body := bytes.Repeat([]byte("\n"), 32<<20)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	recs, err := ParseRetained(body, DefaultLimits())
	runtime.ReadMemStats(&after)
	if err != nil || len(recs) != 0 {
		t.Fatalf("%d records, %v; want none", len(recs), err)
	}
	most := uint64((len(body)+1)/minRecordLine+1) * uint64(unsafe.Sizeof(Record{}))
	if got := after.TotalAlloc - before.TotalAlloc; got > most+16<<20 {
		t.Fatalf("framing 32 MiB of blank lines allocated %d MiB", got>>20)
	}
}

// The capacity bound is exact for the shortest record lines, whole or in parts, with and
// without a final newline and with CRLF: none outgrows its array.
func TestShortestRecordsFillTheirBound(t *testing.T) {
	for _, n := range []int{1, 2, 7, 20000} {
		for _, tail := range []string{"", "\n"} {
			for _, eol := range []string{"\n", "\r\n"} {
				body := []byte(strings.Repeat(`{"type":""}`+eol, n-1) + `{"type":""}` + tail)
				for parts := 1; parts <= 4; parts++ {
					recs, err := parseParts(body, DefaultLimits(), parts, nil)
					if err != nil || len(recs) != n {
						t.Fatalf("n=%d tail=%q eol=%q parts=%d: %d records, %v", n, tail, eol, parts, len(recs), err)
					}
					// A short line after a full array is framed into the spare slot, and refused.
					_, err = parseParts(append(slices.Clip(body), "\n{}"...), DefaultLimits(), parts, nil)
					var invalid *errs.InvalidInput
					if !errors.As(err, &invalid) {
						t.Fatalf("n=%d tail=%q eol=%q parts=%d: a trailing {} gave %v", n, tail, eol, parts, err)
					}
				}
			}
		}
	}
}

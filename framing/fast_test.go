package framing

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// fastLines are compact lines the fast path must frame itself, exactly as the general scanner
// does.
var fastLines = []string{
	`{"type":"Person","data":{"handle":"p0-1","name":"name-0-1","age":1,"score":0.5}}`,
	`{"edge":"Knows","from":"p0-1","to":"p0-2","data":{"id":"k0-1","since":1}}`,
	`{"type":"Person"}`,
	`{"type":"Person","data":{}}`,
	`{"type":"Person","data":{"id":"only"}}`,
	`{"data":{"a":1},"type":"Person"}`,
	`{"to":"b","data":{"x":null},"from":"a","edge":"E"}`,
	`{"type":"T\u00e9","data":{"id":"i\"d","s":"caf\u00e9 \ud83d\ude00 \\ \/ \b\f\n\r\t","u":"héllo 😀"}}`,
	`{"edge":"E\\","from":"\u0041","to":"line\nbreak","data":{}}`,
	`{"type":"Doc","data":{"tags":["a","b",[],{}],"owner":{"name":"t","since":19723,"deep":[{"k":1},{"k":1}]},"ok":true,"no":false,"nil":null}}`,
	`{"type":"Num","data":{"a":-0,"b":0.25,"c":1e308,"d":-1.5E-400,"e":12345678901234567890123,"f":2e+3}}`,
	`{"type":"Person","data":{"name":"x","_custom":1,"src":"a node may","dst":"say so"}}`,
	`{ "type":"Person"}`,
	`{"type": "Person"}`,
	`{"type":"Person","data":{"a": 1}}`,
	`{"type": "Person", "data": {"handle": "p1", "name": "n", "age": 3, "score": 0.5}}`,
	`{"edge": "Knows", "from": "a", "to": "b", "data": {"id": "k", "since": 1}}`,
	"{ \"type\":\t\"P\" ,\r\"data\": { \"a\" : 1 , \"b\" : \"x\" , \"id\" : \"i\" } }",
	`{"type":"P","data":{ }}`,
	`{"type":"P","data":{"o":{"x":1},"l":[1,2]} }`,
	`{"type":"Wide","data":{"a0":0,"a1":1,"a2":2,"a3":3,"a4":4,"a5":5,"a6":6,"a7":7,"a8":8,"a9":9,"b0":0,"b1":1,"b2":2,"b3":3,"b4":4,"b5":5,"b6":6,"b7":7,"b8":8,"b9":9}}`,
}

// slowLines are lines the fast path must leave to the general scanner: every refusal, and
// accepted lines outside its form (whitespace inside a value, or around the line's object).
var slowLines = []string{
	`{"type":"Person","data":{"a":[1, 2]}}`,
	`{"type":"Person","data":{"a":{"b": 1}}}`,
	`{"type":"Person","data":{"a":[ 1]}}`,
	` {"type":"Person"}`,
	"{\"type\":\"Person\"}\t",
	`{"type" "Person"}`,
	`{"type" :"Person"}`,
	`{"type":"Person" "data":{}}`,
	`{"type":"Person","data":{"a" 1}}`,
	`{"type":"Person","data":{"a":1 "b":2}}`,
	`{"type":"Person","data":{"a":1,}}`,
	`{"type":"Person","data":{"a":1, }}`,
	`{"type":"Person", }`,
	`{"type":"Person"} `,
	`{"t\u0079pe":"Person"}`,
	`{"type":"Person","data":{"n\u0061me":1}}`,
	`{"type":"Person","data":{"o":{"\u0061":1}}}`,
	`{"type":"A","type":"B"}`,
	`{"type":"A","data":{"x":1,"x":2}}`,
	`{"type":"A","data":{"o":{"x":1,"x":2}}}`,
	`{"type":"A","data":{"a0":0,"a1":1,"a2":2,"a3":3,"a4":4,"a5":5,"a6":6,"a7":7,"a8":8,"a9":9,"b0":0,"b1":1,"b2":2,"b3":3,"b4":4,"b5":5,"b6":6,"a0":7}}`,
	`{"type":"A","edge":"E","from":"a","to":"b"}`,
	`{"edge":"E","from":"a"}`,
	`{"type":"A","from":"a"}`,
	`{"type":"A","extra":1}`,
	`{"type":"A","_rowid":1}`,
	`{"type":1}`,
	`{"edge":"E","from":"a","to":2}`,
	`{"type":"A","data":[]}`,
	`{"type":"A","data":{"_rowid":1}}`,
	`{"type":"A","data":{"_tombstone":true}}`,
	`{"edge":"E","from":"a","to":"b","data":{"src":"x"}}`,
	`{"edge":"E","from":"a","to":"b","data":{"dst":"x"}}`,
	`{"type":"A","data":{"id":7}}`,
	`{"type":"A","data":{"n":1e400}}`,
	`{"type":"A","data":{"n":-1E+309}}`,
	`{"type":"A","data":{"n":01}}`,
	`{"type":"A","data":{"n":1.}}`,
	`{"type":"A","data":{"n":tru}}`,
	`{"type":"A","data":{"s":"\x"}}`,
	`{"type":"A","data":{"s":"\ud800"}}`,
	`{"type":"A","data":{"s":"\udc00"}}`,
	"{\"type\":\"A\",\"data\":{\"s\":\"\xff\"}}",
	"{\"type\":\"A\",\"data\":{\"s\":\"\xed\xa0\x80\"}}",
	"{\"type\":\"A\",\"data\":{\"s\":\"a\tb\"}}",
	"\xef\xbb\xbf{\"type\":\"A\"}",
	`{"type":"A"}{"type":"B"}`,
	`{"type":"A","data":{"d":` + strings.Repeat("[", 126) + strings.Repeat("]", 126) + `}}`,
	`{"type":"A",}`,
	`{"type":"A"`,
	`{}`,
	`[]`,
	`"x"`,
	`{"type":"A"}x`,
	"{\"type\":\"A\"}\r",
	"{\"type\":\"A\"}\r\r",
	"{\"type\":\"A\"}\rx",
	"{\"type\":\"A\"}\f",
}

// takes reports whether the fast path frames the whole of line in into rec.
func takes(f *fastScanner, in string, line int, rec *Record) bool {
	end, ok := f.record([]byte(in), line, rec)
	return ok && end == len(in)
}

func TestFastPathTakesCompactLines(t *testing.T) {
	for _, in := range fastLines {
		f := newFastScanner(DefaultMaxDepth)
		var got Record
		if !takes(f, in, 3, &got) {
			t.Errorf("fast path declined %s", in)
			continue
		}
		s := newScanner(DefaultMaxDepth, len(in))
		want, err := s.record([]byte(in), 3)
		if err != nil {
			t.Fatalf("general scanner refuses %s: %v", in, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\nfast    %#v\ngeneral %#v", in, got, want)
		}
	}
}

func TestFastPathLeavesTheRest(t *testing.T) {
	for _, in := range slowLines {
		f := newFastScanner(DefaultMaxDepth)
		var rec Record
		if takes(f, in, 1, &rec) {
			t.Errorf("fast path took %s", in)
		}
	}
	// The depth limit applies to "data" itself.
	if f := newFastScanner(1); takes(f, `{"type":"A","data":{}}`, 1, &Record{}) {
		t.Error("fast path took data beyond a depth limit of 1")
	}
}

// TestFastAgreesWithGeneral frames batches mixing both kinds of lines with the fast path and
// with the general scanner alone: the same records, or the same refusal.
func TestFastAgreesWithGeneral(t *testing.T) {
	all := append(append([]string{}, fastLines...), slowLines...)
	for i := range all {
		for j := range all {
			checkFastAgrees(t, []byte(all[i]+"\r\n\n"+all[j]+"\n"+all[i]))
			checkFastAgrees(t, []byte(all[i]+all[j]))
		}
		// Past tinyLimits' MaxLines.
		checkFastAgrees(t, []byte(strings.Repeat(all[i]+"\n", 8)))
	}
}

func checkFastAgrees(t *testing.T, body []byte) {
	t.Helper()
	for _, lim := range []Limits{DefaultLimits(), tinyLimits.normalized()} {
		lines := strings.Count(string(body), "\n") + 1
		fast, ferr := frameLines(body, 1, make([]Record, 0, recordCap(1, lines, len(body), lim)), lim, true, nil)
		slow, serr := frameLines(body, 1, make([]Record, 0, recordCap(1, lines, len(body), lim)), lim, false, nil)
		if fmt.Sprint(ferr) != fmt.Sprint(serr) || !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q: the fast path and the general scanner disagree:\n%v %#v\n%v %#v", body, ferr, fast, serr, slow)
		}
	}
}

func FuzzFastPath(f *testing.F) {
	for _, s := range append(append(append([]string{}, fastLines...), slowLines...), fuzzSeeds...) {
		f.Add([]byte(s))
	}
	for _, s := range append(append([]string{}, templateFits...), templateLeaves...) {
		f.Add([]byte(templateBase + "\n" + s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkFastAgrees(t, data) })
}

// TestFastScannerKeepsNothingOfABatch: a scanner reset for the next batch holds no
// reference into the batch it framed, and no more than small names of it.
func TestFastScannerKeepsNothingOfABatch(t *testing.T) {
	f := newFastScanner(DefaultMaxDepth)
	long := strings.Repeat("n", maxInterned+1)
	var wide strings.Builder
	wide.WriteString(`{"type":"Wide","data":{`)
	for i := range maxKeptShape + 1 {
		if i > 0 {
			wide.WriteByte(',')
		}
		fmt.Fprintf(&wide, `"k%d":{"a":[{"b":1,"c":2}]}`, i)
	}
	wide.WriteString(`}}`)
	for _, in := range []string{`{"type":"A","data":{"o":{"x":1,"y":{"z":2}},"` + long + `":1}}`, wide.String()} {
		if !takes(f, in, 1, &Record{}) {
			t.Fatalf("fast path declined %.80s", in)
		}
	}
	if _, ok := f.intern[long]; ok {
		t.Error("a long name was interned")
	}
	f.reset()
	for d, ks := range f.sets {
		for _, k := range ks.keys[:cap(ks.keys)] {
			if k != nil {
				t.Fatalf("the key set of depth %d still holds %q", d, k)
			}
		}
	}
	for _, sh := range f.shapes {
		if len(sh.names) > maxKeptShape {
			t.Fatalf("a shape of %d names (%s) was kept", len(sh.names), sh.typ)
		}
	}
	if f.members != nil || f.ids != nil {
		t.Fatal("slabs handed to records were kept")
	}
	// Nor are the buffers a wider line grew.
	var wider strings.Builder
	wider.WriteString(`{"type":"W","data":{"o":{`)
	for i := range maxKeptMembers + 1 {
		if i > 0 {
			wider.WriteByte(',')
		}
		fmt.Fprintf(&wider, `"k%d":%d`, i, i)
	}
	wider.WriteString(`},"p":1`)
	for i := range maxKeptMembers {
		fmt.Fprintf(&wider, `,"q%d":%d`, i, i)
	}
	wider.WriteString(`}}`)
	if !takes(f, wider.String(), 1, &Record{}) {
		t.Fatal("fast path declined the wider line")
	}
	f.reset()
	if cap(f.data) > maxKeptMembers {
		t.Fatalf("kept a member buffer of %d", cap(f.data))
	}
	for d, ks := range f.sets {
		if cap(ks.keys) > maxKeptMembers {
			t.Fatalf("kept a key set of %d at depth %d", cap(ks.keys), d)
		}
	}
}

// TestFastShapes: one scanner frames a sequence of lines of one table, so that names follow
// the remembered shape, a prefix of it, or differ; a line is taken exactly when the general
// scanner accepts it, with the same record.
func TestFastShapes(t *testing.T) {
	f := newFastScanner(DefaultMaxDepth)
	for i, in := range []string{
		`{"type":"S","data":{"id":"a","x":1,"y":2}}`,
		`{"type":"S","data":{"id":"b","x":1,"y":2}}`,
		`{"type":"S","data":{"id":"c","x":1}}`,
		`{"type":"S","data":{"id":"d"}}`,
		`{"type":"S","data":{"id":4}}`,
		`{"type":"S","data":{"id":"e","x":1,"y":2,"z":3}}`,
		`{"type":"S","data":{"x":1,"_rowid":2}}`,
		`{"type":"S","data":{"x":1,"_rowid":2}}`,
		`{"type":"S","data":{"x":1}}`,
		`{"type":"S","data":{"x":1,"x":2}}`,
		`{"edge":"S","from":"a","to":"b","data":{"x":1,"src":"a"}}`,
		`{"edge":"S","from":"a","to":"b","data":{"x":1}}`,
		`{"type":"S","data":{"x":1,"src":"a"}}`,
		// Lines of a known shape whose data object is framed by it before the line turns
		// out to be the general scanner's, or which leave the shape's form.
		`{"type":"S","data":{"x":1,"y":2}}`,
		`{"type":"S","data":{"x":1,"y":2},"edge":"E"}`,
		`{"type":"S","data":{"x":1,"y":2},"type":"T"}`,
		`{"type":"S","data":{"x":1,"y":2},"z":3}`,
		`{"type":"S","data":{"x":1,"y":2}`,
		`{"type":"S","data":{"x" :1,"y":2}}`,
		`{"type":"S","data":{"x": 1, "y": "2"}}`,
		`{"data":{"x":1,"y":2},"type":"S"}`,
		`{"type":"S","data":{"x":1,"y":2,"id":"q\u0041"}}`,
		`{"type":"S","data":{"x":1,"y":2,"id":"r\u0041"}}`,
		`{"type":"S","data":{"x":1,"y":2,"id":5}}`,
		`{"type":"S","data":{"x":1,"y":2,"id":"s","id":"t"}}`,
		`{"type":"S","data":{"x":1,"y":2,"id":"u"},"data":{}}`,
		`{"type":"S","data":{"x":1}}`,
		`{"type":"S","data":{"xx":1}}`,
		`{"type":"S","data":{"x":1,"y":2,"id":"v"}}`,
		`{"edge":"S","from":"a","to":"b","data":{"x":1,"_rowid":2}}`,
		`{"edge":"S","from":"a","to":"b","data":{"x":1}}`,
		`{"edge":"S","from":"a","to":"b","data":{"x":1,"_rowid":2}}`,
	} {
		recs := make([]Record, 1)
		took := takes(f, in, i+1, &recs[0])
		want, err := newScanner(DefaultMaxDepth, len(in)).record([]byte(in), i+1)
		if took != (err == nil) {
			t.Fatalf("%s: fast path took=%v, general scanner: %v", in, took, err)
		}
		if took && !reflect.DeepEqual(recs[0], want) {
			t.Fatalf("%s:\nfast    %#v\ngeneral %#v", in, recs[0], want)
		}
		// What a line given up wrote into the slab is dropped with it.
		for _, m := range f.members[len(f.members):cap(f.members)] {
			if m.Name != "" || m.Value != nil {
				t.Fatalf("%s: the member slab keeps %s past its end", in, m.Name)
			}
		}
	}
}

// TestSameName checks the one-load name comparison against string equality: every length
// around the word size, a difference at every position, and names near the end of the input.
func TestSameName(t *testing.T) {
	word := func(name string) uint64 {
		var w [8]byte
		copy(w[:], name)
		return binary.LittleEndian.Uint64(w[:])
	}
	for n := range 11 {
		name := "abcdefghijk"[:n]
		for _, pad := range []string{`":1,"x":2}`, ""} {
			in := []byte(`{"` + name + pad)
			m := fastMember{ks: 2, ke: 2 + n}
			if !sameName(in, m, name, word(name)) {
				t.Fatalf("%q: not the same as itself (pad %q)", name, pad)
			}
			for pos := range n {
				other := []byte(name)
				other[pos] ^= 0x20
				if sameName(in, m, string(other), word(string(other))) {
					t.Fatalf("%q the same as %q", name, other)
				}
			}
			if n > 0 && sameName(in, m, name[:n-1], word(name[:n-1])) {
				t.Fatalf("%q the same as %q", name, name[:n-1])
			}
		}
	}
}

// TestFastStringsAreOwned: an edge's endpoints and a record's id outlive the batch's copy
// (the engine keeps some in long-lived indexes), so they must not be views of it.
func TestFastStringsAreOwned(t *testing.T) {
	for _, in := range []string{
		`{"edge":"E","from":"a\u0062","to":"c","data":{"id":"d\"e","w":1}}`,
		`{"type":"N","data":{"id":"n1","x":"y"}}`,
	} {
		f := newFastScanner(DefaultMaxDepth)
		a := []byte(in)
		var rec Record
		if end, ok := f.record(a, 1, &rec); !ok || end != len(a) {
			t.Fatalf("fast path declined %s", in)
		}
		from, to, id := strings.Clone(rec.From), strings.Clone(rec.To), strings.Clone(*rec.ID)
		for i := range a {
			a[i] = 'X'
		}
		if rec.From != from || rec.To != to || *rec.ID != id {
			t.Fatalf("%s: strings changed with the batch: %q %q %q", in, rec.From, rec.To, *rec.ID)
		}
	}
}

// TestFastPathAllocatesPerSlab: a batch of edges with ids costs a few slab allocations per
// few hundred lines, not one (or more) per record: the worker frames every message, and each
// small allocation costs the collector as much as its bytes.
func TestFastPathAllocatesPerSlab(t *testing.T) {
	const lines = 2000
	var b strings.Builder
	for i := range lines {
		fmt.Fprintf(&b, `{"edge":"E","from":"a%d","to":"b%d","data":{"id":"e%d","w":%d}}`+"\n", i, i, i, i)
	}
	body := []byte(b.String())
	// AllocsPerRun counts the whole process's allocations: a goroutine another test left (a
	// timer, a pool's cleanup) can add a few to one measurement under a loaded machine, never
	// to all of them. The least of three is the framing's own.
	allocs := math.Inf(1)
	for range 3 {
		allocs = min(allocs, testing.AllocsPerRun(20, func() {
			if recs, err := ParseRetained(body, DefaultLimits()); err != nil || len(recs) != lines {
				t.Fatalf("%d records, %v", len(recs), err)
			}
		}))
	}
	// The records, and per slabLines lines a slab of members, ids and strings each.
	if most := 1 + 3*(lines/slabLines+1) + 3; allocs > float64(most) {
		t.Fatalf("%v allocations for %d lines, want at most %d", allocs, lines, most)
	}
}

// TestPartsShareOneSlice: parts fill ranges of one records slice; blank lines leave gaps that
// are closed, and a MaxLines ceiling bounds each part's range, whatever the number of parts.
func TestPartsShareOneSlice(t *testing.T) {
	var b strings.Builder
	for i := range 600 {
		switch {
		case i%5 == 0:
			b.WriteString("  \r\n")
		case i%11 == 0:
			fmt.Fprintf(&b, `{ "type":"Q","data":{"i":%d} }`+"\n", i) // the general scanner's
		default:
			fmt.Fprintf(&b, `{"edge":"E","from":"a%d","to":"b%d","data":{"id":"e%d"}}`+"\n", i, i, i)
		}
	}
	body := []byte(b.String())
	for _, lim := range []Limits{DefaultLimits(), Limits{MaxLines: 400}.normalized(), Limits{MaxLines: 600}.normalized()} {
		one, oneErr := parseParts(body, lim, 1, nil)
		for _, parts := range []int{2, 3, 8} {
			got, err := parseParts(body, lim, parts, nil)
			if fmt.Sprint(err) != fmt.Sprint(oneErr) || !reflect.DeepEqual(got, one) {
				t.Fatalf("MaxLines %d, %d parts: %d records, %v; in one: %d, %v", lim.MaxLines, parts, len(got), err, len(one), oneErr)
			}
		}
	}
}

// TestTemplates: a line of the skeleton of one framed before — the same bytes around its
// values — is framed by the template learnt from it, exactly as the general scanner frames
// it, when its values are valid compact values of the kinds the envelope requires; any other
// line is left to the usual path. Either way the fast path and the general scanner agree.
// templateBase is a line a template is learnt from; templateFits are lines it frames, and
// templateLeaves lines of about its skeleton it must leave to the usual path.
const templateBase = `{"edge":"E","from":"a","to":"b","data":{"id":"i","w":1,"s":"x","o":{"k":[1,2]}}}`

var templateFits = []string{
	`{"edge":"E","from":"a\u0041","to":"","data":{"id":"i\"","w":-1.5e3,"s":{"q":null},"o":[]}}`,
	`{"edge":"E","from":"ünï 😀","to":"b","data":{"id":"","w":"1","s":true,"o":{"k":{"k":1}}}}`,
	`{"edge":"E","from":"a","to":"b","data":{"id":"i","w":1,"s":"x","o":[[[[[[1]]]]]]}}`,
}
var templateLeaves = []string{
	`{"edge":"E","from":1,"to":"b","data":{"id":"i","w":1,"s":"x","o":{}}}`,
	`{"edge":"E","from":"a","to":null,"data":{"id":"i","w":1,"s":"x","o":{}}}`,
	`{"edge":"E","from":"a","to":"b","data":{"id":7,"w":1,"s":"x","o":{}}}`,
	`{"edge":"E","from":"a","to":"b","data":{"id":"i","w":01,"s":"x","o":{}}}`,
	`{"edge":"E","from":"a","to":"b","data":{"id":"i","w":1e400,"s":"x","o":{}}}`,
	`{"edge":"E","from":"a","to":"b","data":{"id":"i","w":1,"s":"x","o":{"k":1,"k":2}}}`,
	`{"edge":"E","from":"a","to":"b","data":{"id":"i","w":1,"s":"x","o":[1, 2]}}`,
	"{\"edge\":\"E\",\"from\":\"a\",\"to\":\"b\",\"data\":{\"id\":\"i\",\"w\":1,\"s\":\"x\ty\",\"o\":{}}}",
	"{\"edge\":\"E\",\"from\":\"a\",\"to\":\"b\",\"data\":{\"id\":\"\xff\",\"w\":1,\"s\":\"x\",\"o\":{}}}",
	`{"edge":"E","from":"a","to":"b","data":{"id":"i","w":1,"s":"x\ud800","o":{}}}`,
	`{"edge":"E","from":"a","to":"b","data":{"id":"i","w":1,"s":"x","o":{},"p":1}}`,
	`{"edge":"E","from":"a","to":"b","data":{"id":"i","w":1,"s":"x"}}`,
	`{"edge":"E","from":"a","to":"b","data":{"id":"i","w":1,"s":"x","o":{}}`,
	`{"edge":"F","from":"a","to":"b","data":{"id":"i","w":1,"s":"x","o":{}}}`,
	`{"edge":"E","from":"a","to":"b","data":{"id":"i","w":1,"s":"x","o":{} }}`,
	`{"edge":"E","from":"a","to":"b","data":{"id":"i","w":1,"s":"x","o":`,
}

func TestTemplates(t *testing.T) {
	for _, in := range append(append([]string{}, templateFits...), templateLeaves...) {
		f := newFastScanner(DefaultMaxDepth)
		if !takes(f, templateBase, 1, &Record{}) || f.ntmpl != 1 {
			t.Fatalf("no template learnt from %s", templateBase)
		}
		var rec Record
		end, ok, _ := f.templated([]byte(in), &rec)
		took := ok && end == len(in)
		if took != slices.Contains(templateFits, in) {
			t.Errorf("%s: framed by the template: %v", in, took)
		}
		if took {
			rec.Line = 2
			want, err := newScanner(DefaultMaxDepth, len(in)).record([]byte(in), 2)
			if err != nil || !reflect.DeepEqual(rec, want) {
				t.Errorf("%s:\ntemplate %#v\ngeneral  %#v (%v)", in, rec, want, err)
			}
		}
		for _, m := range f.members[len(f.members):cap(f.members)] {
			if m.Name != "" || m.Value != nil {
				t.Fatalf("%s: the member slab keeps %s past its end", in, m.Name)
			}
		}
		checkFastAgrees(t, []byte(templateBase+"\n"+in+"\n"+templateBase))
	}
}

package framing

import (
	"encoding/binary"
	"sync"
	"unsafe"
)

// The fast path frames the lines batches are made of in practice — compact JSON, as
// serde_json and JSON.stringify write it, or with spaces between the envelope's and the data
// object's tokens, as json.dumps writes it — in one pass over the line, reading it in place in
// the batch's arena copy: Data values are slices of that copy, with no per-line copy, no
// second walk over the members, and no allocation per record (members, ids, and an edge's
// endpoints with a supplied id are carved out of slabs; see own). A line of the skeleton of
// one framed before is framed by a template of it (see fasttmpl.go), comparing the bytes
// between its values and scanning the values alone. It accepts a line only when it is sure
// the general scanner (scanner.record) would accept it and build the same record; anything
// else — whitespace inside a value or around the line's object, an escaped member name, any
// refusal — makes it give up on the line, which the general scanner then frames or refuses
// with its exact message. So refusals are never decided here, and the fast path is an
// optimisation of accepted lines only; TestFastAgreesWithGeneral, TestTemplates, FuzzFastPath
// and FuzzParse hold the two to the same records.

// fastMember is one "data" member found by the fast path: its name and value as offsets into
// the line.
type fastMember struct {
	ks, ke int // name content, without the quotes
	vs, ve int // value
}

// fastShape is the data member names of the last record of one table whose names did not
// follow the shape before: consecutive records of a table repeat their names in the same
// order, so each name is recognised by one comparison and costs no allocation.
type fastShape struct {
	kind  RecordKind
	typ   string
	names []string // distinct
	words []uint64 // the first 8 bytes of each name, zero-padded (see sameName)
	// What names says of the data rules (see dataRules).
	id, refusedAt int
}

// fastShapes is how many tables' shapes are remembered: batches mix a few tables.
const fastShapes = 8

type fastScanner struct {
	maxDepth int
	data     []fastMember
	shapes   [fastShapes]fastShape
	next     int       // the shape slot replaced next
	sets     []*keySet // nested objects' duplicate checks, by depth
	members  []Member  // the slab records' Data slices are carved from
	ids      []string  // the slab records' ID pointers point into
	strs     []byte    // the slab records' From, To and ID strings are copied into
	// The last node's and edge's type, which the next one most likely repeats.
	lastTyp [2]knownName
	// data.id's content in the line (idS < 0 without one), for own.
	idS, idE int
	idEsc    bool
	// The last line's endpoints, for learn.
	from, to span
	// The batch's templates: tmpl[:ntmpl], the one last used, and the next one replaced.
	tmpl                    [tmpls]template
	ntmpl, lastTmpl, victim int
	// The templates' standing in the batch (see missed), and how many lines are framed
	// without them before they are tried again.
	credit, pause int
	spans         []valueSpan // learn's
	// Where the member slabs go when they come from the pool (a Frame's), else nil.
	slabs *[][]Member
	// To size slabs: the lines of the part not framed yet.
	left   int
	intern map[string]string
}

func newFastScanner(maxDepth int) *fastScanner {
	return &fastScanner{maxDepth: maxDepth, intern: make(map[string]string), credit: startCredit}
}

// fastScanners keeps scanners between batches, with their interned names, table shapes and
// key sets: a batch then starts with its tables' names known. What a scanner hands to records
// (the Member and ID slabs) is dropped before it is put back.
var fastScanners = sync.Pool{New: func() any { return newFastScanner(DefaultMaxDepth) }}

func getFastScanner(maxDepth int) *fastScanner {
	f := fastScanners.Get().(*fastScanner)
	f.maxDepth = maxDepth
	return f
}

func putFastScanner(f *fastScanner) {
	f.reset()
	fastScanners.Put(f)
}

// reset readies f for another batch.
func (f *fastScanner) reset() {
	// Templates are learnt anew in each batch, under its limits.
	f.forget()
	f.members, f.ids, f.strs, f.data, f.slabs = nil, nil, nil, f.data[:0], nil
	// Nothing kept may point into the batch, nor grow with what one batch held.
	if cap(f.data) > maxKeptMembers {
		f.data = nil
	}
	for d, ks := range f.sets {
		if cap(ks.keys) > maxKeptMembers {
			f.sets[d] = newKeySet()
		} else {
			ks.release()
		}
	}
	for k := range f.shapes {
		if len(f.shapes[k].names) > maxKeptShape {
			f.shapes[k] = fastShape{}
		}
	}
}

// maxKeptMembers bounds the member buffers kept between batches.
const maxKeptMembers = 1024

// maxKeptShape is the most names of a shape kept between batches.
const maxKeptShape = 256

// maxInterned is the longest name interned: longer ones are copied each time, so that the
// names kept between batches stay small.
const maxInterned = 128

// idSlab is how many ids one slab allocation holds.
const idSlab = 1024

// slabLines is how many lines' worth of members or strings one slab is sized for, at the
// current line's count: enough that slabs cost a few allocations per thousand lines, few
// enough that the last one of a table (whose size the next table's lines do not match, or
// which the batch's end cuts short) leaves little of it zeroed and unused.
const slabLines = 256

// strSlab bounds the bytes of one string slab (a longer string gets one of its own size).
const strSlab = 16 << 10

// newMembers starts a new member slab for a line that needs n members.
func (f *fastScanner) newMembers(n int) {
	size := f.slabFor(n, memberSlab)
	if f.slabs == nil {
		f.members = make([]Member, 0, size)
		return
	}
	f.members = memberPools.get(size)
	*f.slabs = append(*f.slabs, f.members)
}

// slabFor is the size of a new slab for a line that needs n of its elements.
func (f *fastScanner) slabFor(n, most int) int {
	return max(n, min(most, n*min(max(f.left, 1), slabLines)))
}

// Envelope members by bit: type, edge, from, to, data.
const (
	hasType = 1 << iota
	hasEdge
	hasFrom
	hasTo
	hasData
)

// record frames the line at the start of a (which runs on to the end of the part) into rec
// and returns the index after its closing brace, or reports false when the general scanner
// must decide about the line. Nothing valid in a compact line is a line break, so the scan
// never crosses into the next line; the caller checks what follows the brace. a must not
// change while the records live: their strings point into it.
func (f *fastScanner) record(a []byte, line int, rec *Record) (int, bool) {
	f.idS = -1
	templates := f.pause == 0
	if !templates {
		f.pause--
	} else if f.ntmpl > 0 {
		end, ok, costly := f.templated(a, rec)
		if ok {
			f.credit = min(f.credit+1, maxCredit)
			rec.Line = line
			return end, true
		}
		if costly {
			f.missed()
		}
	}
	end, ok := f.envelope(a, rec)
	if !ok {
		return 0, false
	}
	rec.Line = line
	if templates {
		f.learn(a, end, rec, f.from, f.to)
	}
	return end, true
}

// envelope frames the envelope object, and its "data" member, at the start of a.
func (f *fastScanner) envelope(a []byte, rec *Record) (int, bool) {
	n := len(a)
	if n < 2 || a[0] != '{' {
		return 0, false
	}
	var seen uint8
	var from, to span
	i, _ := next(a, 1)
	for {
		// A member name of the envelope, matched as written: an escaped or unknown one is
		// for the general scanner (which refuses the unknown ones). Each is matched with its
		// colon in one compare of a word (every member, with its value and what follows, is
		// at least 8 bytes).
		if i+8 > n {
			return 0, false
		}
		var bit uint8
		switch w := binary.LittleEndian.Uint64(a[i:]); {
		case w&(1<<56-1) == wordType:
			bit, i = hasType, i+7
		case w&(1<<56-1) == wordEdge:
			bit, i = hasEdge, i+7
		case w&(1<<56-1) == wordFrom:
			bit, i = hasFrom, i+7
		case w&(1<<40-1) == wordTo:
			bit, i = hasTo, i+5
		case w&(1<<56-1) == wordData:
			bit, i = hasData, i+7
		default:
			return 0, false
		}
		var c byte
		if i, c = next(a, i); seen&bit != 0 { // a duplicate
			return 0, false
		}
		seen |= bit
		var ok bool
		switch bit {
		case hasData:
			if c != '{' || f.maxDepth < 2 {
				return 0, false
			}
			end, ok := f.dataObject(a, i)
			if !ok {
				return 0, false
			}
			i = end
		case hasType, hasEdge:
			if c != '"' {
				return 0, false
			}
			if i, ok = f.typeName(a, i, bit, rec); !ok {
				return 0, false
			}
		default:
			if c != '"' {
				return 0, false
			}
			end, esc, ok := scanString(a, i)
			if !ok {
				return 0, false
			}
			if bit == hasFrom {
				from = span{i + 1, end - 1, esc}
			} else {
				to = span{i + 1, end - 1, esc}
			}
			i = end
		}
		if i, c = next(a, i); c == ',' {
			i, _ = next(a, i+1)
			continue
		}
		if c != '}' {
			return 0, false
		}
		break
	}
	switch seen &^ hasData {
	case hasType:
		rec.Kind = NodeRecord
	case hasEdge | hasFrom | hasTo:
		rec.Kind = EdgeRecord
	default:
		return 0, false
	}
	if seen&hasData != 0 && !f.fillData(a, rec) {
		return 0, false
	}
	if rec.Kind == EdgeRecord || f.idS >= 0 {
		f.own(a, rec, from, to)
	}
	f.from, f.to = from, to
	return i + 1, true
}

// typeName sets rec.Type to the string at a[i] == '"', the value of "type" (bit hasType) or
// "edge", and returns the index after it. The name of the last line of the same kind is
// most likely repeated, and is then recognised without a scan.
func (f *fastScanner) typeName(a []byte, i int, bit uint8, rec *Record) (int, bool) {
	last := &f.lastTyp[bit>>1]
	if end, ok := quoted(a, i, last.name, last.word); ok {
		rec.Type = last.name
		return end, true
	}
	end, esc, ok := scanString(a, i)
	if !ok {
		return 0, false
	}
	if esc {
		rec.Type = stringValue(a[i:end])
		return end, true
	}
	rec.Type = f.name(a[i+1 : end-1])
	if len(rec.Type) <= maxInterned {
		*last = knownName{rec.Type, wordOf(rec.Type)}
	}
	return end, true
}

// knownName is a name whose string values are recognised as written (see quoted).
type knownName struct {
	name string
	word uint64 // the first 8 bytes of name, zero-padded
}

// quoted reports whether the string at a[i] == '"' is name as written, and returns the
// index after its closing quote. name, a string value already scanned without escapes,
// holds no quote nor backslash nor anything a string refuses, so the same bytes followed by a
// quote are a valid string; word is its first 8 bytes zero-padded, which a name of up to 8
// bytes, as most are, is compared with in one load rather than a call.
func quoted(a []byte, i int, name string, word uint64) (int, bool) {
	e := i + 1 + len(name)
	if e >= len(a) || a[e] != '"' {
		return 0, false
	}
	if len(name) <= 8 && i+9 <= len(a) {
		return e + 1, binary.LittleEndian.Uint64(a[i+1:])&(^uint64(0)>>(64-8*len(name))) == word
	}
	return e + 1, name == unsafeString(a[i+1:e])
}

// The envelope's member names with their colon, as little-endian words.
var (
	wordType = wordOf(`"type":`)
	wordEdge = wordOf(`"edge":`)
	wordFrom = wordOf(`"from":`)
	wordTo   = wordOf(`"to":`)
	wordData = wordOf(`"data":`)
)

// skipSpace skips the whitespace a line may hold between the envelope's and the data
// object's tokens, as json.dumps writes it (", " and ": "): none of it is part of a value,
// so values stay compact slices of the line. A '\n' is never skipped: the scan stays in its
// line.
func skipSpace(a []byte, i int) int {
	// One compare for the byte that is not a space, as nearly all are.
	for i < len(a) && a[i] <= ' ' && (a[i] == ' ' || a[i] == '\t' || a[i] == '\r') {
		i++
	}
	return i
}

// next returns the index of the first byte from i on that is not a space (see skipSpace),
// and that byte: 0 at the end of a, which no token starts with.
func next(a []byte, i int) (int, byte) {
	if i < len(a) && a[i] > ' ' {
		return i, a[i]
	}
	if i = skipSpace(a, i); i < len(a) {
		return i, a[i]
	}
	return i, 0
}

// wordOf is the first 8 bytes of s, zero-padded, as a little-endian word.
func wordOf(s string) uint64 {
	var w [8]byte
	copy(w[:], s)
	return binary.LittleEndian.Uint64(w[:])
}

// unsafeString views b as a string without copying; b must never change afterwards.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

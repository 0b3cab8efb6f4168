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
// endpoints with a supplied id are carved out of slabs; see own). It accepts a line only
// when it is sure the general scanner (scanner.record) would accept it and build the same
// record; anything else —
// whitespace inside a value or around the line's object, an escaped member name, any
// refusal — makes it give up on the line, which the general scanner then frames or refuses
// with its exact message. So refusals are never decided here, and the fast path is an
// optimisation of accepted lines only; TestFastAgreesWithGeneral, FuzzFastPath and FuzzParse
// hold the two to the same records.

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
	id      int
	refused bool
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
	lastTyp  string    // the last record's type, which the next one most likely repeats
	// data.id's content in the line (idS < 0 without one), for own.
	idS, idE int
	idEsc    bool
	// To size slabs: the lines of the part not framed yet.
	left   int
	intern map[string]string
}

func newFastScanner(maxDepth int) *fastScanner {
	return &fastScanner{maxDepth: maxDepth, intern: make(map[string]string)}
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
	f.members, f.ids, f.strs, f.data = nil, nil, nil, f.data[:0]
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

// slabFor is the size of a new slab for a line that needs n of its elements.
func (f *fastScanner) slabFor(n, most int) int {
	return max(n, min(most, n*min(max(f.left, 1), slabLines)))
}

// record frames the line at the start of a (which runs on to the end of the part) into rec
// and returns the index after its closing brace, or reports false when the general scanner
// must decide about the line. Nothing valid in a compact line is a line break, so the scan
// never crosses into the next line; the caller checks what follows the brace. a must not
// change while the records live: their strings point into it.
func (f *fastScanner) record(a []byte, line int, rec *Record) (int, bool) {
	n := len(a)
	if n < 2 || a[0] != '{' {
		return 0, false
	}
	// Envelope members by bit: type, edge, from, to, data.
	const (
		hasType = 1 << iota
		hasEdge
		hasFrom
		hasTo
		hasData
	)
	var seen uint8
	var typS, typE, fromS, fromE, toS, toE int
	var typEsc, fromEsc, toEsc bool
	f.data = f.data[:0]
	i := skipSpace(a, 1)
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
		i = skipSpace(a, i)
		if seen&bit != 0 {
			return 0, false // a duplicate
		}
		seen |= bit
		if bit == hasData {
			if i >= n || a[i] != '{' || f.maxDepth < 2 {
				return 0, false
			}
			end, ok := f.dataObject(a, i)
			if !ok {
				return 0, false
			}
			i = end
		} else {
			if i >= n || a[i] != '"' {
				return 0, false
			}
			end, esc, ok := scanString(a, i)
			if !ok {
				return 0, false
			}
			switch bit {
			case hasType, hasEdge:
				typS, typE, typEsc = i+1, end-1, esc
			case hasFrom:
				fromS, fromE, fromEsc = i+1, end-1, esc
			default:
				toS, toE, toEsc = i+1, end-1, esc
			}
			i = end
		}
		if i = skipSpace(a, i); i >= n {
			return 0, false
		}
		if a[i] == ',' {
			i = skipSpace(a, i+1)
			continue
		}
		if a[i] != '}' {
			return 0, false
		}
		break
	}
	end := i + 1
	switch seen &^ hasData {
	case hasType:
		rec.Kind = NodeRecord
	case hasEdge | hasFrom | hasTo:
		rec.Kind = EdgeRecord
	default:
		return 0, false
	}
	switch {
	case typEsc:
		rec.Type = stringValue(a[typS-1 : typE+1])
	case f.lastTyp == unsafeString(a[typS:typE]):
		rec.Type = f.lastTyp
	default:
		rec.Type = f.name(a[typS:typE])
		f.lastTyp = rec.Type
	}
	rec.Line = line
	f.idS = -1
	if !f.fillData(a, rec) {
		return 0, false
	}
	if rec.Kind == EdgeRecord || f.idS >= 0 {
		f.own(a, rec, [3]span{{fromS, fromE, fromEsc}, {toS, toE, toEsc}, {f.idS, f.idE, f.idEsc}})
	}
	return end, true
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
	for i < len(a) && (a[i] == ' ' || a[i] == '\t' || a[i] == '\r') {
		i++
	}
	return i
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

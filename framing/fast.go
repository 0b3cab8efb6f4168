package framing

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"sync"
	"unicode/utf8"
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

// span is a string value's content in the line.
type span struct {
	s, e    int
	escaped bool
}

// own gives an edge its From and To, and a record with data.id its ID, decoded into the
// batch's string slabs: not views of the batch (or its copy), which a long-lived index keyed
// by ids or endpoints (the engine keeps some) would otherwise keep whole, but copies that
// share a slab of a few hundred lines' strings, so that they cost no allocation each.
func (f *fastScanner) own(a []byte, rec *Record, sp [3]span) {
	if rec.Kind != EdgeRecord {
		sp[0], sp[1] = span{}, span{}
	}
	if sp[2].s < 0 {
		sp[2] = span{}
	}
	// Decoding never lengthens a string, so the slab never reallocates under the strings
	// already handed out.
	need := (sp[0].e - sp[0].s) + (sp[1].e - sp[1].s) + (sp[2].e - sp[2].s)
	if cap(f.strs)-len(f.strs) < need {
		f.strs = make([]byte, 0, f.slabFor(need, strSlab))
	}
	start := len(f.strs)
	buf := f.strs[start:start]
	var ends [3]int
	for k, p := range sp {
		if p.escaped {
			buf = appendUnescaped(buf, a[p.s:p.e])
		} else {
			buf = append(buf, a[p.s:p.e]...)
		}
		ends[k] = len(buf)
	}
	if rec.Kind == EdgeRecord {
		rec.From = unsafeString(buf[:ends[0]])
		rec.To = unsafeString(buf[ends[0]:ends[1]])
	}
	if f.idS >= 0 {
		if len(f.ids) == cap(f.ids) {
			f.ids = make([]string, 0, max(1, min(idSlab, f.left)))
		}
		f.ids = f.ids[:len(f.ids)+1]
		id := &f.ids[len(f.ids)-1]
		*id = unsafeString(buf[ends[1]:ends[2]])
		rec.ID = id
	}
	f.strs = f.strs[:start+len(buf)]
}

// fillData applies the data rules to the members f.dataObject found and fills rec.Data and
// rec.ID; it reports false for a record the general scanner must refuse.
func (f *fastScanner) fillData(a []byte, rec *Record) bool {
	ms := f.data
	if len(ms) == 0 {
		return true
	}
	sh := f.shape(rec.Kind, rec.Type)
	follows := len(ms) <= len(sh.names)
	for j := 0; follows && j < len(ms); j++ {
		follows = sameName(a, ms[j], sh.names[j], sh.words[j])
	}
	if !follows {
		if !distinct(a, ms) {
			return false
		}
		// The names the next record of this table is likely to repeat; those of the old
		// shape are reused.
		names := make([]string, len(ms))
		for j, m := range ms {
			names[j] = f.name(a[m.ks:m.ke])
		}
		sh.names = names
		sh.words = make([]uint64, len(names))
		for j, name := range names {
			sh.words[j] = wordOf(name)
		}
		sh.id, sh.refused = dataRules(names, rec.Kind)
	}
	id, refused := sh.id, sh.refused
	if len(ms) < len(sh.names) {
		id, refused = dataRules(sh.names[:len(ms)], rec.Kind)
	}
	if refused || (id >= 0 && a[ms[id].vs] != '"') {
		return false
	}
	n := len(ms)
	if id >= 0 {
		n--
	}
	if id >= 0 {
		v := ms[id]
		f.idS, f.idE, f.idEsc = v.vs+1, v.ve-1, bytes.IndexByte(a[v.vs+1:v.ve-1], '\\') >= 0
	}
	if n == 0 { // only "id"
		return true
	}
	if cap(f.members)-len(f.members) < n {
		f.members = make([]Member, 0, f.slabFor(n, memberSlab))
	}
	// Fields are set one by one into the slab's zeroed memory: appending whole Members would
	// cost a bulk write barrier for each while the GC runs, as it often does during a batch.
	start := len(f.members)
	f.members = f.members[:start+n]
	k := start
	for j, m := range ms {
		if j == id {
			continue
		}
		dst := &f.members[k]
		dst.Name = sh.names[j]
		dst.Value = a[m.vs:m.ve:m.ve]
		k++
	}
	rec.Data = f.members[start:k:k]
	return true
}

// sameName reports whether member m is called name, whose first 8 bytes zero-padded are
// word: a name of up to 8 bytes, as most are, is compared in one load rather than a call.
func sameName(a []byte, m fastMember, name string, word uint64) bool {
	n := m.ke - m.ks
	if n != len(name) {
		return false
	}
	if n <= 8 && m.ks+8 <= len(a) {
		return binary.LittleEndian.Uint64(a[m.ks:])&(^uint64(0)>>(64-8*n)) == word
	}
	return name == unsafeString(a[m.ks:m.ke])
}

// dataRules returns the index of "id" among a record's data member names (-1 without one),
// and whether a name is refused: a reserved physical one, or "src" or "dst" in an edge.
func dataRules(names []string, kind RecordKind) (id int, refused bool) {
	id = -1
	for j, name := range names {
		switch {
		case name == "id":
			id = j
		case len(name) > 0 && name[0] == '_' && reservedPhysical(name):
			refused = true
		case kind == EdgeRecord && (name == "src" || name == "dst"):
			refused = true
		}
	}
	return id, refused
}

// shape returns the remembered shape of a table, claiming a slot for one not seen yet.
func (f *fastScanner) shape(kind RecordKind, typ string) *fastShape {
	for k := range f.shapes {
		if sh := &f.shapes[k]; sh.kind == kind && sh.typ == typ {
			return sh
		}
	}
	sh := &f.shapes[f.next]
	f.next = (f.next + 1) % fastShapes
	*sh = fastShape{kind: kind, typ: typ, id: -1}
	return sh
}

// distinct reports whether the data member names are pairwise different (as written: the
// fast path takes no escaped name).
func distinct(a []byte, ms []fastMember) bool {
	if len(ms) <= keySetListMax {
		for j := 1; j < len(ms); j++ {
			kj := a[ms[j].ks:ms[j].ke]
			for _, m := range ms[:j] {
				if bytes.Equal(a[m.ks:m.ke], kj) {
					return false
				}
			}
		}
		return true
	}
	ks := newKeySet()
	for _, m := range ms {
		if !ks.add(a[m.ks:m.ke]) {
			return false
		}
	}
	return true
}

// name returns b as a string shared between records: names and types repeat line after line,
// and a shared copy does not keep the batch's arena alive.
func (f *fastScanner) name(b []byte) string {
	if len(b) > maxInterned {
		return string(b)
	}
	if n, ok := f.intern[string(b)]; ok {
		return n
	}
	n := string(b)
	if len(f.intern) < internMax {
		f.intern[n] = n
	}
	return n
}

// dataObject scans the "data" object at a[i] == '{', collecting its members in f.data; it
// returns the index after it.
func (f *fastScanner) dataObject(a []byte, i int) (int, bool) {
	i = skipSpace(a, i+1)
	if i < len(a) && a[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(a) || a[i] != '"' {
			return 0, false
		}
		end, esc, ok := scanString(a, i)
		if !ok || esc {
			return 0, false
		}
		colon := skipSpace(a, end)
		if colon >= len(a) || a[colon] != ':' {
			return 0, false
		}
		vs := skipSpace(a, colon+1)
		ve, ok := f.value(a, vs, 2)
		if !ok {
			return 0, false
		}
		f.data = append(f.data, fastMember{ks: i + 1, ke: end - 1, vs: vs, ve: ve})
		next := skipSpace(a, ve)
		if next >= len(a) {
			return 0, false
		}
		switch a[next] {
		case ',':
			i = skipSpace(a, next+1)
		case '}':
			return next + 1, true
		default:
			return 0, false
		}
	}
}

// value scans one compact JSON value at a[i], inside depth containers, and returns the index
// after it.
func (f *fastScanner) value(a []byte, i, depth int) (int, bool) {
	if i >= len(a) {
		return 0, false
	}
	switch c := a[i]; {
	case c == '"':
		end, _, ok := scanString(a, i)
		return end, ok
	case c == '-' || (c >= '0' && c <= '9'):
		return scanNumber(a, i)
	case c == 't':
		return literalEnd(a, i, "true")
	case c == 'f':
		return literalEnd(a, i, "false")
	case c == 'n':
		return literalEnd(a, i, "null")
	case c == '{':
		return f.object(a, i, depth+1)
	case c == '[':
		return f.array(a, i, depth+1)
	}
	return 0, false
}

func (f *fastScanner) object(a []byte, i, depth int) (int, bool) {
	if depth > f.maxDepth {
		return 0, false
	}
	i++
	if i < len(a) && a[i] == '}' {
		return i + 1, true
	}
	for len(f.sets) <= depth {
		f.sets = append(f.sets, newKeySet())
	}
	keys := f.sets[depth]
	keys.reset()
	for {
		if i >= len(a) || a[i] != '"' {
			return 0, false
		}
		end, esc, ok := scanString(a, i)
		if !ok || esc || end >= len(a) || a[end] != ':' || !keys.add(a[i+1:end-1]) {
			return 0, false
		}
		if i, ok = f.value(a, end+1, depth); !ok || i >= len(a) {
			return 0, false
		}
		switch a[i] {
		case ',':
			i++
		case '}':
			return i + 1, true
		default:
			return 0, false
		}
	}
}

func (f *fastScanner) array(a []byte, i, depth int) (int, bool) {
	if depth > f.maxDepth {
		return 0, false
	}
	i++
	if i < len(a) && a[i] == ']' {
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = f.value(a, i, depth); !ok || i >= len(a) {
			return 0, false
		}
		switch a[i] {
		case ',':
			i++
		case ']':
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// scanString scans the string whose opening quote is a[i] and returns the index after its
// closing quote and whether it holds escapes, checking what scanner.str checks.
func scanString(a []byte, i int) (int, bool, bool) {
	i++
	escaped := false
	for {
		// Eight bytes at a time to the first one that is not plain; byte by byte near the end.
		if i+8 <= len(a) {
			m := stringStop(binary.LittleEndian.Uint64(a[i:]))
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) >> 3
		} else {
			for i < len(a) && plain[a[i]] {
				i++
			}
			if i >= len(a) {
				return 0, false, false
			}
		}
		switch c := a[i]; {
		case c == '"':
			return i + 1, escaped, true
		case c == '\\':
			n, msg := escapeLen(a[i:])
			if msg != "" {
				return 0, false, false
			}
			escaped = true
			i += n
		case c < 0x20:
			return 0, false, false
		default:
			r, size := utf8.DecodeRune(a[i:])
			if r == utf8.RuneError && size == 1 {
				return 0, false, false
			}
			i += size
		}
	}
}

// stringStop has the top bit set in the lowest byte of w that is not plain (and maybe in some
// above it): the same test as special, per byte.
func stringStop(w uint64) uint64 {
	q := w ^ (lsb * '"')
	b := w ^ (lsb * '\\')
	return ((w-lsb*0x20)&^w | (q-lsb)&^q | (b-lsb)&^b | w) & msb
}

// scanNumber scans a number at a[i] with scanner.number's grammar and range check.
func scanNumber(a []byte, i int) (int, bool) {
	start := i
	if a[i] == '-' {
		i++
	}
	digits := i
	switch {
	case i < len(a) && a[i] == '0':
		i++
	case i < len(a) && isDigit(a[i]):
		for i < len(a) && isDigit(a[i]) {
			i++
		}
	default:
		return 0, false
	}
	intDigits := i - digits
	exponent := false
	if i < len(a) && a[i] == '.' {
		i++
		if i >= len(a) || !isDigit(a[i]) {
			return 0, false
		}
		for i < len(a) && isDigit(a[i]) {
			i++
		}
	}
	if i < len(a) && (a[i] == 'e' || a[i] == 'E') {
		exponent = true
		i++
		if i < len(a) && (a[i] == '+' || a[i] == '-') {
			i++
		}
		if i >= len(a) || !isDigit(a[i]) {
			return 0, false
		}
		for i < len(a) && isDigit(a[i]) {
			i++
		}
	}
	if exponent || intDigits > 308 {
		v, _ := strconv.ParseFloat(unsafeString(a[start:i]), 64)
		if math.IsInf(v, 0) {
			return 0, false
		}
	}
	return i, true
}

func literalEnd(a []byte, i int, word string) (int, bool) {
	if !hasPrefix(a[i:], word) {
		return 0, false
	}
	return i + len(word), true
}

func hasPrefix(b []byte, p string) bool { return len(b) >= len(p) && string(b[:len(p)]) == p }

// unsafeString views b as a string without copying; b must never change afterwards.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

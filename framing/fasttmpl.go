package framing

import (
	"encoding/binary"
	"unsafe"
)

// A batch repeats a few line skeletons thousands of times: the lines of a table differ in
// their values only, and what lies between the values — the envelope's names, the type's
// value, the data member names, the punctuation and the spaces — is the same bytes line
// after line. A template is that skeleton, learnt from a line the fast path framed: a
// line that holds the same bytes around valid compact values is the same record's structure
// (the same table, the same member names in the same order, so the same data rules), and is
// framed by comparing those bytes a word at a time and scanning the values alone: no
// member name, envelope token or space is looked at one by one.

// template is the skeleton of a line the fast path framed: its first segment, then each
// value with the segment after it.
type template struct {
	kind  RecordKind
	typ   string
	lit   []byte // the segments, one after the other
	first tmplSeg
	steps []tmplStep
	// The data members among the values (not counting the id).
	members int
}

// tmplSeg is the bytes of one segment: lit[off:off+n], whose first min(n, 8) bytes are word
// under mask.
type tmplSeg struct {
	off, n     int
	word, mask uint64
}

// tmplStep is one value of a line — what it is, and for a data member, its name — and the
// segment after it.
type tmplStep struct {
	role slotRole
	name string
	seg  tmplSeg
}

type slotRole uint8

const (
	slotMember slotRole = iota
	slotFrom
	slotTo
	slotID
)

// tmpls is how many templates a scanner keeps: a batch mixes a few tables, each of a few
// skeletons at most.
const tmpls = 4

// Bounds of what is learnt: a line of more values or longer skeleton is framed the usual way.
const (
	maxTmplSlots = 64
	maxTmplLit   = 1024
)

// A line no template fits after some began to (see templated) costs the tries and a template
// learnt, which a batch of many skeletons of one table in turn (more than tmpls of them, each
// line of another) would pay on every line: each line a template frames earns a credit (up to
// maxCredit), each such miss costs missCost, and when the credit runs out, the next
// pauseLines lines are framed the usual way before templates are tried again.
const (
	startCredit = 8
	maxCredit   = 32
	missCost    = 4
	pauseLines  = 64
)

// missed counts a line no template fits.
func (f *fastScanner) missed() {
	if f.credit -= missCost; f.credit <= 0 {
		f.credit, f.pause = startCredit, pauseLines
	}
}

// templated frames the line at the start of a by one of the templates, the last one used
// first, and returns the index after its closing brace; it reports false, with nothing kept,
// when none fits, and whether any got past its first segment (which tells most lines of
// another skeleton at once) before it failed: what is worth counting as a miss.
func (f *fastScanner) templated(a []byte, rec *Record) (end int, ok, costly bool) {
	for k := -1; k < f.ntmpl; k++ {
		t := f.lastTmpl
		if k >= 0 {
			if k == f.lastTmpl {
				continue
			}
			t = k
		}
		if end, ok, began := f.byTemplate(a, &f.tmpl[t], rec); ok {
			f.lastTmpl = t
			return end, true, false
		} else if began {
			costly = true
		}
	}
	return 0, false, costly
}

// byTemplate frames the line at the start of a by template t, or reports false, and whether
// the line began with its first segment.
func (f *fastScanner) byTemplate(a []byte, t *template, rec *Record) (int, bool, bool) {
	if !t.segAt(a, 0, &t.first) {
		return 0, false, false
	}
	if len(t.steps) == 0 { // a node without data members nor id
		rec.Kind, rec.Type = t.kind, t.typ
		return t.first.n, true, true
	}
	if cap(f.members)-len(f.members) < t.members {
		f.newMembers(t.members)
	}
	start := len(f.members)
	ms := f.members[start : start+t.members]
	var from, to span
	n := len(a)
	i, k := t.first.n, 0
	for s := range t.steps {
		st := &t.steps[s]
		if i >= n {
			break
		}
		c := a[i]
		var ve int
		ok := true
		if st.role == slotMember {
			switch {
			case c == '"':
				ve, _, ok = scanString(a, i)
			case c-'0' < 10:
				ve, ok = scanNumber(a, i)
			default:
				ve, ok = f.value(a, i, 2)
			}
			if !ok {
				break
			}
			// Fields are set one by one into the slab's zeroed memory: assigning whole
			// Members would cost a bulk write barrier for each while the GC runs.
			ms[k].Name = st.name
			ms[k].Value = a[i:ve:ve]
			k++
		} else {
			// From, to and the id are strings (the general scanner refuses any other).
			var esc bool
			if c != '"' {
				break
			}
			if ve, esc, ok = scanString(a, i); !ok {
				break
			}
			switch st.role {
			case slotFrom:
				from = span{i + 1, ve - 1, esc}
			case slotTo:
				to = span{i + 1, ve - 1, esc}
			default:
				f.idS, f.idE, f.idEsc = i+1, ve-1, esc
			}
		}
		// Most segments after a value are a word at most: compared here, without a call.
		if seg := &st.seg; seg.n <= 8 && ve+8 <= n {
			if binary.LittleEndian.Uint64(a[ve:])&seg.mask != seg.word {
				break
			}
		} else if !t.segAt(a, ve, seg) {
			break
		}
		i = ve + st.seg.n
		if s+1 < len(t.steps) {
			continue
		}
		// The line is framed.
		f.members = f.members[:start+k]
		if k > 0 {
			rec.Data = f.members[start : start+k : start+k]
		}
		rec.Kind, rec.Type = t.kind, t.typ
		if rec.Kind == EdgeRecord || f.idS >= 0 {
			f.own(a, rec, from, to)
		}
		return i, true, true
	}
	clear(ms[:k])
	f.idS = -1
	return 0, false, true
}

// segAt reports whether a holds segment s at i: a word at a time, the last one overlapping
// the one before (or masked, for a segment shorter than a word).
func (t *template) segAt(a []byte, i int, s *tmplSeg) bool {
	if i+max(s.n, 8) > len(a) {
		return i+s.n <= len(a) && string(a[i:i+s.n]) == string(t.lit[s.off:s.off+s.n])
	}
	if binary.LittleEndian.Uint64(a[i:])&s.mask != s.word {
		return false
	}
	if s.n <= 8 {
		return true
	}
	lit := t.lit[s.off : s.off+s.n]
	b := a[i : i+s.n]
	for k := 8; k < s.n-8; k += 8 {
		if binary.LittleEndian.Uint64(b[k:]) != binary.LittleEndian.Uint64(lit[k:]) {
			return false
		}
	}
	return binary.LittleEndian.Uint64(b[s.n-8:]) == binary.LittleEndian.Uint64(lit[s.n-8:])
}

// valueSpan is where one value of a framed line lies in it, and what it is.
type valueSpan struct {
	s, e int
	role slotRole
	name string
}

// learn makes a template of the line a[:end], which the fast path framed into rec (an edge's
// endpoints at from and to, its id at f.idS), unless one fits it already or it is too large.
func (f *fastScanner) learn(a []byte, end int, rec *Record, from, to span) {
	if len(rec.Data) > maxTmplSlots-3 {
		return
	}
	vs := f.spans[:0]
	if rec.Kind == EdgeRecord {
		vs = append(vs, valueSpan{from.s - 1, from.e + 1, slotFrom, ""}, valueSpan{to.s - 1, to.e + 1, slotTo, ""})
	}
	if f.idS >= 0 {
		vs = append(vs, valueSpan{f.idS - 1, f.idE + 1, slotID, ""})
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(a)))
	for _, m := range rec.Data {
		s := int(uintptr(unsafe.Pointer(unsafe.SliceData(m.Value))) - base)
		vs = append(vs, valueSpan{s, s + len(m.Value), slotMember, m.Name})
	}
	f.spans = vs
	if end-valueBytes(vs) > maxTmplLit {
		return
	}
	// In line order (a few values: insertion sort).
	for j := 1; j < len(vs); j++ {
		for k := j; k > 0 && vs[k].s < vs[k-1].s; k-- {
			vs[k], vs[k-1] = vs[k-1], vs[k]
		}
	}
	// A free template, or the next one in turn but the one last used.
	if f.ntmpl < tmpls {
		f.lastTmpl = f.ntmpl
		f.ntmpl++
	} else {
		if f.victim == f.lastTmpl {
			f.victim = (f.victim + 1) % tmpls
		}
		f.lastTmpl = f.victim
		f.victim = (f.victim + 1) % tmpls
	}
	t := &f.tmpl[f.lastTmpl]
	t.kind, t.typ, t.members = rec.Kind, rec.Type, len(rec.Data)
	t.lit, t.steps = t.lit[:0], t.steps[:0]
	first := end
	if len(vs) > 0 {
		first = vs[0].s
	}
	t.first = t.addSeg(a[:first])
	for j, v := range vs {
		next := end
		if j+1 < len(vs) {
			next = vs[j+1].s
		}
		t.steps = append(t.steps, tmplStep{role: v.role, name: v.name, seg: t.addSeg(a[v.e:next])})
	}
}

func valueBytes(vs []valueSpan) int {
	n := 0
	for _, v := range vs {
		n += v.e - v.s
	}
	return n
}

// addSeg appends the segment b to the template's bytes.
func (t *template) addSeg(b []byte) tmplSeg {
	n := min(len(b), 8)
	s := tmplSeg{off: len(t.lit), n: len(b), word: wordOf(unsafeString(b[:n])), mask: ^uint64(0) >> (64 - 8*n)}
	t.lit = append(t.lit, b...)
	return s
}

// forget drops the templates' names and any large buffer, for the scanner to be kept.
func (f *fastScanner) forget() {
	for k := range f.tmpl {
		t := &f.tmpl[k]
		t.typ = ""
		clear(t.steps[:cap(t.steps)])
	}
	clear(f.spans[:cap(f.spans)])
	f.ntmpl, f.lastTmpl, f.victim = 0, 0, 0
	f.credit, f.pause = startCredit, 0
}

package framing

import (
	"bytes"
	"encoding/binary"
)

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

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
func (f *fastScanner) own(a []byte, rec *Record, from, to span) {
	id := span{f.idS, f.idE, f.idEsc}
	if rec.Kind != EdgeRecord {
		from, to = span{}, span{}
	}
	if id.s < 0 {
		id = span{}
	}
	// Decoding never lengthens a string, so the slab never reallocates under the strings
	// already handed out.
	need := (from.e - from.s) + (to.e - to.s) + (id.e - id.s)
	if cap(f.strs)-len(f.strs) < need {
		f.strs = make([]byte, 0, f.slabFor(need, strSlab))
	}
	if rec.Kind == EdgeRecord {
		rec.From = f.put(a, from)
		rec.To = f.put(a, to)
	}
	if f.idS >= 0 {
		if len(f.ids) == cap(f.ids) {
			f.ids = make([]string, 0, max(1, min(idSlab, f.left)))
		}
		f.ids = f.ids[:len(f.ids)+1]
		p := &f.ids[len(f.ids)-1]
		*p = f.put(a, id)
		rec.ID = p
	}
}

// put decodes the string sp of a into the string slab, which has room for it.
func (f *fastScanner) put(a []byte, sp span) string {
	start := len(f.strs)
	if sp.escaped {
		f.strs = appendUnescaped(f.strs, a[sp.s:sp.e])
	} else {
		f.strs = append(f.strs, a[sp.s:sp.e]...)
	}
	return unsafeString(f.strs[start:])
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
		// Only the names are handed to records: the slices are reused.
		sh.names, sh.words = sh.names[:0], sh.words[:0]
		for _, m := range ms {
			name := f.name(a[m.ks:m.ke])
			sh.names = append(sh.names, name)
			sh.words = append(sh.words, wordOf(name))
		}
		sh.id, sh.refusedAt = dataRules(sh.names, rec.Kind)
	}
	// The rules for these names, a prefix of the shape's.
	id := sh.id
	if id >= len(ms) {
		id = -1
	}
	if sh.refusedAt < len(ms) || (id >= 0 && a[ms[id].vs] != '"') {
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
		f.newMembers(n)
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
// and that of the first name refused (len(names) without one): a reserved physical one, or
// "src" or "dst" in an edge. A record with a prefix of names is refused when the prefix
// holds that index.
func dataRules(names []string, kind RecordKind) (id, refusedAt int) {
	id, refusedAt = -1, len(names)
	for j, name := range names {
		switch {
		case name == "id":
			id = j
		case len(name) > 0 && name[0] == '_' && reservedPhysical(name),
			kind == EdgeRecord && (name == "src" || name == "dst"):
			refusedAt = min(refusedAt, j)
		}
	}
	return id, refusedAt
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
	f.data = f.data[:0]
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

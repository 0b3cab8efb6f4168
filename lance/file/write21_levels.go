package file

import (
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
)

// Recording: each top-level row becomes, for every leaf, one level per leaf value (plus one per
// null or empty list on the way down), and each visible value is queued as a reference into
// the retained Arrow array. Levels follow the engines' conventions:
//   - rep: maxRep at the first level of a row; the list's own rep (0 for the innermost list)
//     at an item continuing a list;
//   - def: 0 for a valid value, else the raw code of the outermost null (or empty list) on the
//     way down; values under a null struct are kept (visible, null), items under a null or
//     empty list do not exist (the level is invisible).

// valueBits is the size of one leaf value in bits (fixed width leaves).
func (l *leaf21) valueBits() int64 { return int64(l.lay.bits) * int64(max(l.lay.dim, 1)) }

// recordFlat records rows [from, n) of a leaf with no list above it, as many as fit the
// pending page (at least one); it returns how many. arrs are the arrays along the path, all
// aligned with the top-level rows.
func (w *writer21) recordFlat(l *leaf21, arrs []arrow.Array, from, n int) int {
	leaf := arrs[len(arrs)-1]
	k := n - from
	if w.opts.MaxPageRows > 0 {
		k = min(k, w.opts.MaxPageRows-l.rows)
	}
	room := int64(w.opts.MaxPageBytes) - l.sizeBits()/8
	var bytes int64
	if l.lay.kind == kindBinary {
		off := offsetsOf(leaf)
		base := off.at(from)
		k = min(k, sort.Search(k, func(j int) bool { return 4*int64(j+1)+off.at(from+j+1)-base >= room })+1)
		k = max(k, 1)
		bytes = off.at(from+k) - base
		if off.o32 != nil {
			l.maxLen = longestValue(off.o32, from, from+k, l.maxLen)
		} else {
			l.maxLen = longestValue(off.o64, from, from+k, l.maxLen)
		}
	} else {
		per := l.valueBits() + 32 // and 4 bytes of levels, as full() counts them
		roomBits := 8*int64(w.opts.MaxPageBytes) - l.sizeBits()
		k = max(1, int(min(int64(k), (roomBits+per-1)/per)))
		l.vbits += l.valueBits() * int64(k)
		bytes = (l.vbits+7)/8 - l.bytes
	}
	nulls := false
	for _, a := range arrs {
		if nullsIn(a, from, from+k) > 0 {
			nulls = true
			break
		}
	}
	if nulls {
		for i := from; i < from+k; i++ {
			code := uint16(0)
			for d, a := range arrs {
				if a.IsNull(i) {
					code = l.steps[d].null
					break
				}
			}
			l.setDef(code)
			l.levels++
		}
	} else {
		if l.def != nil {
			l.def = append(l.def, make([]uint16, k)...)
		}
		l.levels += k
	}
	leaf.Retain()
	l.segs = append(l.segs, chunk{arr: leaf, from: from, to: from + k})
	l.values += k
	l.rows += k
	l.bytes += bytes
	w.pending += bytes + 4*int64(k)
	return k
}

// longestValue is the longest of values [from, to) of offsets o, or m if none is longer.
func longestValue[T int32 | int64](o []T, from, to int, m int64) int64 {
	for i := from; i < to; i++ {
		m = max(m, int64(o[i+1]-o[i]))
	}
	return m
}

// setDef appends one def level (the caller counts the level).
func (l *leaf21) setDef(code uint16) {
	if code != 0 {
		l.used[code] = true
		if l.def == nil {
			l.startDef()
		}
	}
	if l.def != nil {
		l.def = append(l.def, code)
	}
}

// startDef starts the page's def levels: 0 for every level so far.
func (l *leaf21) startDef() {
	d := l.spare[:0]
	if d == nil {
		d = make([]uint16, 0, max(2*l.levels, 1024))
	}
	l.def = append(d, make([]uint16, l.levels)...)
	l.spare = nil
}

// nestCtx carries what recording a nested leaf needs per batch.
type nestCtx struct {
	l       *leaf21
	arrs    []arrow.Array
	offs    []offsets // at list steps
	leafOff offsets   // binary leaves
	bytes   int64
}

// recordNested records rows [from, n) of a leaf below a list until the pending page is full;
// it returns how many rows it took (at least one).
func (w *writer21) recordNested(l *leaf21, arrs []arrow.Array, offs []offsets, from, n int) int {
	c := nestCtx{l: l, arrs: arrs, offs: offs}
	if l.lay.kind == kindBinary {
		c.leafOff = offsetsOf(arrs[len(arrs)-1])
	}
	i := from
	for i < n {
		levels := l.levels
		c.visit(0, i, l.maxRep, 0)
		l.rows++
		i++
		w.pending += c.bytes + 4*int64(l.levels-levels)
		l.bytes += c.bytes
		c.bytes = 0
		if l.full(w.opts) {
			break
		}
	}
	return i - from
}

func (c *nestCtx) visit(d, i int, rep, null uint16) {
	l := c.l
	s := &l.steps[d]
	a := c.arrs[d]
	if null == 0 && a.IsNull(i) {
		null = s.null
	}
	switch s.kind {
	case stepStruct:
		c.visit(d+1, i, rep, null)
	case stepList:
		if null != 0 {
			c.level(rep, null)
			return
		}
		lo, hi := c.offs[d].at(i), c.offs[d].at(i+1)
		if lo == hi {
			c.level(rep, s.empty)
			return
		}
		for j := lo; j < hi; j++ {
			c.visit(d+1, int(j), rep, 0)
			rep = s.rep
		}
	default:
		c.level(rep, null)
		c.value(a, i)
	}
}

func (c *nestCtx) level(rep, def uint16) {
	l := c.l
	l.rep = append(l.rep, rep)
	l.setDef(def)
	l.levels++
}

func (c *nestCtx) value(a arrow.Array, i int) {
	l := c.l
	if n := len(l.segs); n > 0 && l.segs[n-1].arr == a && l.segs[n-1].to == i {
		l.segs[n-1].to++
	} else {
		a.Retain()
		l.segs = append(l.segs, chunk{arr: a, from: i, to: i + 1})
	}
	l.values++
	if l.lay.kind == kindBinary {
		n := c.leafOff.at(i+1) - c.leafOff.at(i)
		l.maxLen = max(l.maxLen, n)
		c.bytes += n + 4
	} else {
		old := (l.vbits + 7) / 8
		l.vbits += l.valueBits()
		c.bytes += (l.vbits+7)/8 - old
	}
}

// pageLayers returns the RepDefLayer of every layer of the pending page, innermost first, the
// table renumbering raw def codes into the codes of those layers (nil when no level is
// non-zero, so the page has no def levels), and the highest renumbered code of a level that
// has a value (codes above it are null or empty lists, or nulls above a list).
//
// A leaf without a list above it gets the layers its page needs (as the engines write them).
// A leaf under a list gets the same layers on every page, declared from the fields'
// nullability (a list may always be empty): the engines misread a column whose full-zip pages
// under a list disagree on their layers ("Structural validity has N entries for an array with
// M values"), and the levels such a leaf stores anyway make the def levels cheap.
func (l *leaf21) pageLayers() ([]repDefLayer, []uint16, uint16) {
	if l.lists {
		declared := false
		for _, s := range l.steps {
			if s.nullable {
				l.used[s.null], declared = true, true
			}
			if s.kind == stepList {
				l.used[s.empty], declared = true, true
			}
		}
		if declared && l.def == nil {
			l.startDef()
		}
	}
	layers := make([]repDefLayer, 0, len(l.steps))
	var remap []uint16
	if l.def != nil {
		remap = make([]uint16, len(l.used))
	}
	next := uint16(0)
	use := func(code uint16) bool {
		if !l.used[code] {
			return false
		}
		next++
		if remap != nil {
			remap[code] = next
		}
		return true
	}
	maxVis := uint16(0xffff)
	for i := len(l.steps) - 1; i >= 0; i-- {
		s := l.steps[i]
		if s.kind == stepList && maxVis == 0xffff {
			maxVis = next
		}
		if s.kind != stepList {
			if use(s.null) {
				layers = append(layers, rdNullableItem)
			} else {
				layers = append(layers, rdAllValidItem)
			}
			continue
		}
		switch null, empty := use(s.null), use(s.empty); {
		case null && empty:
			layers = append(layers, rdNullAndEmptyList)
		case null:
			layers = append(layers, rdNullableList)
		case empty:
			layers = append(layers, rdEmptyableList)
		default:
			layers = append(layers, rdAllValidList)
		}
	}
	return layers, remap, maxVis
}

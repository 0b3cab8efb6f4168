package lance

import (
	"cmp"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// A BTREE over strings is sorted by a radix sort of each key's 8-byte prefix, then by a
// comparison sort within each run of equal prefixes only. A comparison sort of the whole
// column spent most of its time fetching keys and prefixes at random positions; the radix
// passes stream over one slice, and with the prefix after the keys' shared part most runs are
// of one key. The keys stay in their Arrow arrays: a slice of them (a pointer each) was as
// much work again, to fill and for the collector to scan, as the sort itself.

// stringColumn is an Arrow array of strings: *array.String or *array.LargeString.
type stringColumn interface {
	arrow.Array
	Value(int) string
}

// sortStringEntries is sortBTreeEntries for string chunks: nulls first by row id, then by
// key, ties by row id. The entries are sorted in place, each holding its key's prefix in
// its id field until the keys are in order: 32 bytes a key at most (the entries and the
// radix passes' scratch), where a slice of prefixed positions beside the entries was 56, and
// every fresh page a sort touches costs a page fault.
func sortStringEntries(strs []stringColumn, ids []uint64) []btreeEntry {
	start := make([]int, len(strs)) // the position in ids of each chunk's first row
	n, nulls := 0, 0
	for c, a := range strs {
		start[c] = n
		n += a.Len()
		nulls += a.NullN()
	}
	shared := sharedPrefix(strs)
	out := make([]btreeEntry, n)
	i, j := 0, nulls // the next null, the next value
	for c, a := range strs {
		hasNulls := a.NullN() > 0
		for r := range a.Len() {
			if hasNulls && a.IsNull(r) {
				out[i] = newEntry(c, r, ids[start[c]+r], true)
				i++
				continue
			}
			out[j] = btreeEntry{chunk: int32(c), row: int32(r), id: prefixOf(a.Value(r), shared)}
			j++
		}
	}
	slices.SortFunc(out[:nulls], func(a, b btreeEntry) int { return cmp.Compare(a.id, b.id) })
	vals := out[nulls:]
	if sorted := radixSortByID(vals); len(vals) > 0 && &sorted[0] != &vals[0] {
		copy(vals, sorted)
	}
	idOf := func(e *btreeEntry) uint64 { return ids[start[e.chunk]+int(e.row)] }
	for lo := 0; lo < len(vals); {
		hi := lo + 1
		for hi < len(vals) && vals[hi].id == vals[lo].id {
			hi++
		}
		if run := vals[lo:hi]; len(run) > 1 {
			slices.SortFunc(run, func(a, b btreeEntry) int {
				if c := strings.Compare(strs[a.chunk].Value(int(a.row)), strs[b.chunk].Value(int(b.row))); c != 0 {
					return c
				}
				return cmp.Compare(idOf(&a), idOf(&b))
			})
		}
		lo = hi
	}
	for k := range vals {
		vals[k].id = idOf(&vals[k])
	}
	return out
}

// sharedPrefix is the length of the prefix every non-null key of strs shares. Skipping it
// matters: keys are often one namespace ("user:…", "p1000005-…") whose first 8 bytes are all
// alike.
func sharedPrefix(strs []stringColumn) int {
	shared, ref := -1, ""
	for _, a := range strs {
		hasNulls := a.NullN() > 0
		for r := range a.Len() {
			if hasNulls && a.IsNull(r) {
				continue
			}
			k := a.Value(r)
			if shared < 0 {
				shared, ref = len(k), k
				continue
			}
			m := min(shared, len(k))
			j := 0
			for j < m && k[j] == ref[j] {
				j++
			}
			if shared = j; shared == 0 {
				return 0
			}
		}
	}
	return max(shared, 0)
}

// prefixOf is the 8 bytes of k after its shared prefix, as a big-endian number, zero-padded:
// where two prefixes differ they order the keys as their bytes do (a shorter key that is a
// prefix of a longer one gets a number no greater), so most comparisons end on them.
func prefixOf(k string, shared int) uint64 {
	if k = k[shared:]; len(k) >= 8 {
		_ = k[7]
		return uint64(k[0])<<56 | uint64(k[1])<<48 | uint64(k[2])<<40 | uint64(k[3])<<32 |
			uint64(k[4])<<24 | uint64(k[5])<<16 | uint64(k[6])<<8 | uint64(k[7])
	}
	var p uint64
	for i := range len(k) {
		p |= uint64(k[i]) << (56 - 8*i)
	}
	return p
}

// radixSortByID sorts es by id (here a key's prefix), least significant byte first, skipping
// the bytes that are the same in every id (the zero padding of short keys, a shared leading
// byte). It may return the scratch slice rather than es.
func radixSortByID(es []btreeEntry) []btreeEntry {
	if len(es) < 2 {
		return es
	}
	var counts [8][256]int
	for _, e := range es {
		for b := range 8 {
			counts[b][byte(e.id>>(8*b))]++
		}
	}
	var scratch []btreeEntry
	for b := range 8 {
		c := &counts[b]
		if c[byte(es[0].id>>(8*b))] == len(es) {
			continue // every id has this byte
		}
		if scratch == nil {
			scratch = make([]btreeEntry, len(es))
		}
		sum := 0
		for d := range c {
			c[d], sum = sum, sum+c[d]
		}
		for _, e := range es {
			d := byte(e.id >> (8 * b))
			scratch[c[d]] = e
			c[d]++
		}
		es, scratch = scratch, es
	}
	return es
}

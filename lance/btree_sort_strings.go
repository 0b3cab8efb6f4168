package lance

import (
	"cmp"
	"slices"
	"strings"
)

// A BTREE over strings is sorted by a radix sort of each key's 8-byte prefix (stringPrefixes),
// then by a comparison sort within each run of equal prefixes only. A comparison sort of the
// whole column spent most of its time fetching keys and prefixes at random positions; the
// radix passes stream over one slice, and with the prefix after the keys' shared part most
// runs are of one key.

// prefixed is an entry's position with its prefix, as the radix passes move them.
type prefixed struct {
	pre uint64
	at  int32
}

// sortStrings is the BTREE order of entries es with string keys: nulls first by row id, then
// by key, ties by row id, as positions into es.
func sortStrings(keys []string, es []btreeEntry) []int32 {
	pre := stringPrefixes(keys, es)
	order := make([]int32, 0, len(es))
	vals := make([]prefixed, 0, len(es))
	for i := range es {
		if es[i].null {
			order = append(order, int32(i))
		} else {
			vals = append(vals, prefixed{pre[i], int32(i)})
		}
	}
	slices.SortFunc(order, func(a, b int32) int { return cmp.Compare(es[a].id, es[b].id) })
	vals = radixSortPrefixed(vals)
	for lo := 0; lo < len(vals); {
		hi := lo + 1
		for hi < len(vals) && vals[hi].pre == vals[lo].pre {
			hi++
		}
		if run := vals[lo:hi]; len(run) > 1 {
			slices.SortFunc(run, func(a, b prefixed) int {
				if c := strings.Compare(keys[a.at], keys[b.at]); c != 0 {
					return c
				}
				return cmp.Compare(es[a.at].id, es[b.at].id)
			})
		}
		lo = hi
	}
	for _, v := range vals {
		order = append(order, v.at)
	}
	return order
}

// radixSortPrefixed sorts vs by prefix, least significant byte first, skipping the bytes that
// are the same in every prefix (the zero padding of short keys, a shared leading byte). It
// may return the scratch slice rather than vs.
func radixSortPrefixed(vs []prefixed) []prefixed {
	if len(vs) < 2 {
		return vs
	}
	var counts [8][256]int
	for _, v := range vs {
		for b := range 8 {
			counts[b][byte(v.pre>>(8*b))]++
		}
	}
	scratch := make([]prefixed, len(vs))
	for b := range 8 {
		c := &counts[b]
		if c[byte(vs[0].pre>>(8*b))] == len(vs) {
			continue // every prefix has this byte
		}
		sum := 0
		for d := range c {
			c[d], sum = sum, sum+c[d]
		}
		for _, v := range vs {
			d := byte(v.pre >> (8 * b))
			scratch[c[d]] = v
			c[d]++
		}
		vs, scratch = scratch, vs
	}
	return vs
}

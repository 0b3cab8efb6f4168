package fleet

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
)

// Assign gives each graph to one member, deterministically from the two sets alone (their
// order and duplicates do not matter), so that every process that sees the same live members
// computes the same owners without talking to the others.
//
// Each member gets its fair share, ⌊G/M⌋ or ⌈G/M⌉ graphs, never more: the graphs are taken in
// sorted order and each goes to the member that ranks highest for it (rendezvous hashing of
// graph and member) among those with room, where a member has room below ⌊G/M⌋, or at ⌊G/M⌋
// while fewer than G mod M members have gone above it. Rendezvous ranks keep most graphs where
// they were when a member joins or leaves: a graph moves when its owner left, or when a member
// that ranks higher for it joined, or to make room under the new share.
func Assign(graphs, members []string) map[string]string {
	gs, ms := sortedSet(graphs), sortedSet(members)
	if len(ms) == 0 || len(gs) == 0 {
		return map[string]string{}
	}
	floor, extra := len(gs)/len(ms), len(gs)%len(ms)
	load := make(map[string]int, len(ms))
	out := make(map[string]string, len(gs))
	ranked := make([]string, len(ms))
	for _, g := range gs {
		copy(ranked, ms)
		score := make(map[string]uint64, len(ms))
		for _, m := range ms {
			score[m] = rank(g, m)
		}
		slices.SortFunc(ranked, func(a, b string) int {
			switch {
			case score[a] > score[b]:
				return -1
			case score[a] < score[b]:
				return 1
			}
			return compare(a, b)
		})
		for _, m := range ranked {
			if load[m] < floor || (load[m] == floor && extra > 0) {
				if load[m] == floor {
					extra--
				}
				load[m]++
				out[g] = m
				break
			}
		}
	}
	return out
}

// rank is member's rendezvous weight for graph: the first 8 bytes of a SHA-256 of both, the
// same on every platform and in every process.
func rank(graph, member string) uint64 {
	h := sha256.New()
	h.Write([]byte(graph))
	h.Write([]byte{0})
	h.Write([]byte(member))
	return binary.BigEndian.Uint64(h.Sum(nil))
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// sortedSet is s sorted with duplicates and empty strings removed.
func sortedSet(s []string) []string {
	out := slices.DeleteFunc(slices.Clone(s), func(v string) bool { return v == "" })
	slices.Sort(out)
	return slices.Compact(out)
}

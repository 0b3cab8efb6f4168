package main

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// goalRounds is how many rounds a goal's median is taken over: a goal read from fewer is not met.
const goalRounds = 3

// goal is one performance goal: the median over the rounds of a field of one bench line
// compared with a threshold. With over set, each round's value is the field of line divided
// by the same field of line over in the same round (a ratio the bench prints on no one line).
type goal struct {
	name      string
	line      string // the line's identity (benchLine.id): its name and identifying keys
	field     string
	over      string // "" or the identity of the line whose field divides, round by round
	cmp       string // ">=" or "<="
	threshold float64
}

// goals are the goals `make bench` reports as met or not (issue #31), each the median of
// goalRounds paired rounds at equal durability, except where durability is in the name: the
// official engine's local writes do not fsync, so a durability=none line is the equal one.
var goals = []goal{
	{name: "sustained-8192-none", line: "e2e-sustained-8192 durability=none indices=on", field: "vs_writes_only", cmp: ">=", threshold: 1.0},
	{name: "sustained-8192-fsync", line: "e2e-sustained-8192 durability=fsync indices=on", field: "vs_writes_only", cmp: ">=", threshold: 0.8},
	// What the reference's index set, built and kept fresh by the worker's maintenance, costs
	// the sustained stream (issue #28): at most 15%.
	{name: "sustained-8192-indices-cost", line: "e2e-index-cost durability=none", field: "vs_indices_off", cmp: ">=", threshold: 0.85},
	// What the automatic compaction costs the stream (issue #31: the sustained rate at the
	// default compaction within 5% of the rate without it): a worker that compacts at the
	// default fanout against one that never does, neither keeping indices, worker against
	// worker in alternating rounds as the indices' cost is (pairedcost.go).
	{name: "sustained-8192-compaction-cost", line: "e2e-compaction-cost durability=none", field: "vs_fanout_0", cmp: ">=", threshold: 0.95},
	{name: "e2e-1k+1k-none", line: "e2e-1k+1k durability=none", field: "vs_floor", cmp: "<=", threshold: 1.0},
	// Issue #31's round trips: at most 4 from a message's first write to its visibility, each
	// commit's own chain (the longest in the round). The maintenance commits the worker makes
	// in its turn are commits of their own here, not links of a message's chain; what they add
	// to the stream is in round_trips_per_commit, which the bound below divides by.
	{name: "store-20ms-round-trips", line: "e2e-latency-store latency_ms=20", field: "commit_chain_max", cmp: "<=", threshold: 4},
	{name: "store-20ms-bound", line: "e2e-latency-store latency_ms=20", field: "vs_round_trip_bound", cmp: ">=", threshold: 0.9},
	// What fsync costs a load: the fsync line's ratio over the none line's in the same round,
	// each Go p50 divided by the official append timed beside it, so that the machine's drift
	// between the two lines cancels. (The fsync line's own ratio is in the summaries.)
	{name: "engine-load-fsync-over-none", line: "engine-load-1k+1k durability=fsync", field: "ratio", over: "engine-load-1k+1k durability=none", cmp: "<=", threshold: 1.25},
	{name: "engine-load-none", line: "engine-load-1k+1k durability=none", field: "ratio", cmp: "<=", threshold: 0.8},
	{name: "index-btree-10k", line: "index-build kind=btree rows=10000", field: "ratio", cmp: "<=", threshold: 1.0},
	{name: "index-btree-100k", line: "index-build kind=btree rows=100000", field: "ratio", cmp: "<=", threshold: 1.0},
	{name: "index-inverted-10k", line: "index-build kind=inverted rows=10000", field: "ratio", cmp: "<=", threshold: 1.0},
	{name: "index-inverted-100k", line: "index-build kind=inverted rows=100000", field: "ratio", cmp: "<=", threshold: 1.0},
	{name: "index-ivf_flat-10k", line: "index-build kind=ivf_flat rows=10000", field: "ratio", cmp: "<=", threshold: 1.0},
	{name: "index-ivf_flat-100k", line: "index-build kind=ivf_flat rows=100000", field: "ratio", cmp: "<=", threshold: 1.0},
}

// idKeys are the keys that tell apart lines of one name (the rest are measurements).
var idKeys = map[string]bool{
	"durability": true, "kind": true, "rows": true, "latency_ms": true, "compaction_fanout": true,
	"sync": true, "indices": true, "bytes": true, "inflight": true, "batch": true, "messages": true, "route": true,
}

// benchLine is one parsed `bench: <name> key=value ...` line.
type benchLine struct {
	id     string   // name and identifying keys in printed order: "e2e-1k+1k durability=none"
	keys   []string // every key, in printed order
	fields map[string]string
}

// parseBenchLine parses a `bench: <name> key=value ...` line; ok is false for any other line.
// Words without "=" after the name are ignored.
func parseBenchLine(s string) (benchLine, bool) {
	rest, ok := strings.CutPrefix(s, "bench: ")
	if !ok {
		return benchLine{}, false
	}
	words := strings.Fields(rest)
	if len(words) == 0 || strings.Contains(words[0], "=") {
		return benchLine{}, false
	}
	l := benchLine{id: words[0], fields: map[string]string{}}
	for _, w := range words[1:] {
		k, v, ok := strings.Cut(w, "=")
		if !ok || k == "" {
			continue
		}
		if _, dup := l.fields[k]; dup {
			continue
		}
		l.keys = append(l.keys, k)
		l.fields[k] = v
		if idKeys[k] {
			l.id += " " + w
		}
	}
	return l, true
}

// ratioField reports whether a line's key is one of the ratios the rounds are summarised by.
func ratioField(k string) bool {
	return (strings.Contains(k, "ratio") && !strings.Contains(k, "ratios")) || strings.HasPrefix(k, "vs_") || k == "round_trips_per_commit" || k == "commit_chain_max"
}

// medianSpread is the median of xs (the mean of the two middle values for an even count), its
// minimum and maximum; NaN for all three when xs is empty.
func medianSpread(xs []float64) (med, lo, hi float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return med, s[0], s[n-1]
}

// num formats x for a bench line: at most four decimals, no trailing zeros.
func num(x float64) string {
	if math.IsNaN(x) {
		return "NaN"
	}
	return strconv.FormatFloat(math.Round(x*1e4)/1e4, 'f', -1, 64)
}

// roundValue is one round's value of a field of the line id: ok is false, with why, when the
// round has no such line or field or its value is not a number.
func roundValue(round []benchLine, id, field string) (v float64, why string) {
	for _, l := range round {
		if l.id != id {
			continue
		}
		s, ok := l.fields[field]
		if !ok {
			return math.NaN(), "missing"
		}
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return math.NaN(), "NaN"
		}
		return x, ""
	}
	return math.NaN(), "missing"
}

// summaries are the per-line summary lines of rounds (each round's parsed lines): for every
// line identity and ratio field seen, in first-seen order,
//
//	bench: <id> field=F median=… min=… max=… rounds=N values=a,b,c
//
// where values are the rounds' own (NaN where a round has none) and rounds counts the numeric
// ones the median is over. A field no round gave a number for (vs_round_trip_bound=n/a) is left
// out.
func summaries(rounds [][]benchLine) []string {
	type key struct{ id, field string }
	var order []key
	seen := map[key]bool{}
	for _, round := range rounds {
		for _, l := range round {
			for _, k := range l.keys {
				if kk := (key{l.id, k}); ratioField(k) && !seen[kk] {
					seen[kk] = true
					order = append(order, kk)
				}
			}
		}
	}
	var out []string
	for _, k := range order {
		var good []float64
		vals := make([]string, len(rounds))
		for r, round := range rounds {
			v, why := roundValue(round, k.id, k.field)
			vals[r] = num(v)
			if why == "" {
				good = append(good, v)
			}
		}
		if len(good) == 0 {
			continue
		}
		med, lo, hi := medianSpread(good)
		out = append(out, fmt.Sprintf("bench: %s field=%s median=%s min=%s max=%s rounds=%d values=%s",
			k.id, k.field, num(med), num(lo), num(hi), len(good), strings.Join(vals, ",")))
	}
	return out
}

// goalResult is a goal read from the rounds.
type goalResult struct {
	met          bool
	med, lo, hi  float64
	values       []float64
	reason       string
	roundsWithIt int
}

// evaluate reads g from rounds. It is met only when every one of at least goalRounds rounds
// has a number for it and their median meets the threshold; reason says why not (or, when
// met, the comparison that holds), as one word: rounds_1_of_3, round_2_missing, round_3_NaN,
// 0.95<1.
func (g goal) evaluate(rounds [][]benchLine) goalResult {
	res := goalResult{values: make([]float64, len(rounds))}
	for r, round := range rounds {
		v, why := roundValue(round, g.line, g.field)
		if why == "" && g.over != "" {
			var d float64
			if d, why = roundValue(round, g.over, g.field); why == "" {
				if d == 0 {
					why = "NaN"
				}
				v /= d
			}
		}
		if why != "" {
			v = math.NaN()
			if res.reason == "" {
				res.reason = fmt.Sprintf("round_%d_%s", r+1, why)
			}
		} else {
			res.roundsWithIt++
		}
		res.values[r] = v
	}
	var good []float64
	for _, v := range res.values {
		if !math.IsNaN(v) {
			good = append(good, v)
		}
	}
	res.med, res.lo, res.hi = medianSpread(good)
	switch {
	case len(rounds) < goalRounds:
		res.reason = fmt.Sprintf("rounds_%d_of_%d", len(rounds), goalRounds)
	case res.reason != "":
	default:
		holds := res.med >= g.threshold
		if g.cmp == "<=" {
			holds = res.med <= g.threshold
		}
		res.met = holds
		rel := map[bool]string{true: ">=", false: "<"}[res.med >= g.threshold]
		if g.cmp == "<=" {
			rel = map[bool]string{true: "<=", false: ">"}[res.med <= g.threshold]
		}
		res.reason = num(res.med) + rel + num(g.threshold)
	}
	return res
}

// goalLines are one line per goal and, last, the tally:
//
//	bench: goal name=N line=L field=F [over=L2] cmp=>= threshold=T median=… min=… max=… rounds=N values=a,b,c met=yes|no reason=…
//	bench: goals met=M total=T rounds=R not_met=a,b|none
//
// A line identity's spaces are printed as commas.
func goalLines(gs []goal, rounds [][]benchLine) []string {
	var out, notMet []string
	met := 0
	for _, g := range gs {
		res := g.evaluate(rounds)
		vals := make([]string, len(res.values))
		for i, v := range res.values {
			vals[i] = num(v)
		}
		over := ""
		if g.over != "" {
			over = " over=" + strings.ReplaceAll(g.over, " ", ",")
		}
		verdict := "no"
		if res.met {
			verdict = "yes"
			met++
		} else {
			notMet = append(notMet, g.name)
		}
		out = append(out, fmt.Sprintf("bench: goal name=%s line=%s field=%s%s cmp=%s threshold=%s median=%s min=%s max=%s rounds=%d values=%s met=%s reason=%s",
			g.name, strings.ReplaceAll(g.line, " ", ","), g.field, over, g.cmp, num(g.threshold), num(res.med), num(res.lo), num(res.hi),
			res.roundsWithIt, strings.Join(vals, ","), verdict, res.reason))
	}
	nm := "none"
	if len(notMet) > 0 {
		nm = strings.Join(notMet, ",")
	}
	out = append(out, fmt.Sprintf("bench: goals met=%d total=%d rounds=%d not_met=%s", met, len(gs), len(rounds), nm))
	return out
}

package main

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestMedianSpread(t *testing.T) {
	for _, c := range []struct {
		xs          []float64
		med, lo, hi float64
		wantNaNtrio bool
		name        string
	}{
		{name: "three", xs: []float64{1.3, 0.7, 0.9}, med: 0.9, lo: 0.7, hi: 1.3},
		{name: "even: the mean of the two middle values", xs: []float64{4, 1, 3, 2}, med: 2.5, lo: 1, hi: 4},
		{name: "two", xs: []float64{0.8, 1.0}, med: 0.9, lo: 0.8, hi: 1.0},
		{name: "one", xs: []float64{1.26}, med: 1.26, lo: 1.26, hi: 1.26},
		{name: "empty", wantNaNtrio: true},
	} {
		med, lo, hi := medianSpread(c.xs)
		if c.wantNaNtrio {
			if !math.IsNaN(med) || !math.IsNaN(lo) || !math.IsNaN(hi) {
				t.Errorf("%s: got %v %v %v, want NaN", c.name, med, lo, hi)
			}
			continue
		}
		if math.Abs(med-c.med) > 1e-12 || lo != c.lo || hi != c.hi {
			t.Errorf("%s: got median %v min %v max %v, want %v %v %v", c.name, med, lo, hi, c.med, c.lo, c.hi)
		}
	}
	xs := []float64{3, 1, 2}
	medianSpread(xs)
	if xs[0] != 3 || xs[1] != 1 {
		t.Errorf("medianSpread sorted its argument: %v", xs)
	}
}

// rounds parses one round per string of newline-separated bench lines.
func rounds(t *testing.T, texts ...string) [][]benchLine {
	t.Helper()
	var out [][]benchLine
	for _, text := range texts {
		var round []benchLine
		for _, s := range strings.Split(strings.TrimSpace(text), "\n") {
			if l, ok := parseBenchLine(strings.TrimSpace(s)); ok {
				round = append(round, l)
			}
		}
		out = append(out, round)
	}
	return out
}

func TestParseBenchLine(t *testing.T) {
	l, ok := parseBenchLine("bench: e2e-sustained-8192 durability=none pipeline_depth=16 compaction_fanout=0 rows_per_s=100 vs_writes_only=1.04 rounds=2x30 round_ratios=1.00,1.08")
	if !ok || l.id != "e2e-sustained-8192 durability=none compaction_fanout=0" {
		t.Fatalf("id %q ok %v", l.id, ok)
	}
	if l.fields["vs_writes_only"] != "1.04" || l.fields["rows_per_s"] != "100" {
		t.Errorf("fields %v", l.fields)
	}
	// indices= tells the two sustained lines of one durability apart.
	for _, v := range []string{"on", "off"} {
		l, _ := parseBenchLine("bench: e2e-sustained-8192 durability=none pipeline_depth=16 indices=" + v + " rows_per_s=1 vs_writes_only=0.9")
		if want := "e2e-sustained-8192 durability=none indices=" + v; l.id != want {
			t.Errorf("id %q, want %q", l.id, want)
		}
	}
	for _, s := range []string{"bench: official engine lance12, data file version 2.1 on both sides", "ok  \tpkg", "bench: ", "bench: a=b"} {
		if l, ok := parseBenchLine(s); ok && len(l.fields) > 0 {
			t.Errorf("%q parsed as %+v", s, l)
		}
	}
}

func TestGoalMetAndNotMet(t *testing.T) {
	sustained := func(v string) string {
		return "bench: e2e-sustained-8192 durability=none pipeline_depth=16 vs_writes_only=" + v + "\n" +
			"bench: e2e-sustained-8192 durability=none pipeline_depth=16 compaction_fanout=0 vs_writes_only=9.9"
	}
	ge := goal{name: "s", line: "e2e-sustained-8192 durability=none", field: "vs_writes_only", cmp: ">=", threshold: 1.0}
	le := goal{name: "f", line: "e2e-sustained-8192 durability=none", field: "vs_writes_only", cmp: "<=", threshold: 1.0}
	for _, c := range []struct {
		name   string
		g      goal
		rounds [][]benchLine
		met    bool
		reason string
		med    float64
	}{
		{"median of three meets >=", ge, rounds(t, sustained("0.7"), sustained("1.2"), sustained("1.0")), true, "1>=1", 1.0},
		{"one good round of three is not enough", ge, rounds(t, sustained("0.7"), sustained("1.2"), sustained("0.9")), false, "0.9<1", 0.9},
		{"<= met at the threshold", le, rounds(t, sustained("1.0"), sustained("1.1"), sustained("0.5")), true, "1<=1", 1.0},
		{"<= not met", le, rounds(t, sustained("1.3"), sustained("1.1"), sustained("0.5")), false, "1.1>1", 1.1},
		{"four rounds: the mean of the middle two", ge, rounds(t, sustained("0.9"), sustained("1.2"), sustained("1.0"), sustained("0.8")), false, "0.95<1", 0.95},
		{"a NaN round", ge, rounds(t, sustained("1.2"), sustained("NaN"), sustained("1.3")), false, "round_2_NaN", 1.25},
		{"a non-numeric round", ge, rounds(t, sustained("1.2"), sustained("n/a"), sustained("1.3")), false, "round_2_NaN", 1.25},
		{"a round without the line (the other line of the name does not stand in)", ge,
			rounds(t, sustained("1.2"), sustained("1.3"), "bench: e2e-sustained-8192 durability=none compaction_fanout=0 vs_writes_only=9.9"), false, "round_3_missing", 1.25},
		{"a round without the field", ge, rounds(t, sustained("1.2"), "bench: e2e-sustained-8192 durability=none ratio=1", sustained("1.3")), false, "round_2_missing", 1.25},
		{"fewer rounds than a goal is the median of", ge, rounds(t, sustained("1.5")), false, "rounds_1_of_3", 1.5},
		{"no rounds", ge, nil, false, "rounds_0_of_3", math.NaN()},
	} {
		res := c.g.evaluate(c.rounds)
		if res.met != c.met || res.reason != c.reason || !(math.Abs(res.med-c.med) < 1e-12 || math.IsNaN(res.med) && math.IsNaN(c.med)) {
			t.Errorf("%s: met %v reason %q median %v, want %v %q %v", c.name, res.met, res.reason, res.med, c.met, c.reason, c.med)
		}
	}
}

func TestGoalOver(t *testing.T) {
	g := goal{name: "load", line: "engine-load-1k+1k durability=fsync", field: "go_p50_ms", over: "engine-load-1k+1k durability=none", cmp: "<=", threshold: 1.25}
	round := func(fsync, none string) string {
		return "bench: engine-load-1k+1k durability=fsync go_p50_ms=" + fsync + " ratio=2\n" +
			"bench: engine-load-1k+1k durability=none go_p50_ms=" + none + " ratio=1"
	}
	res := g.evaluate(rounds(t, round("12", "10"), round("15", "10"), round("11", "10")))
	if !res.met || math.Abs(res.med-1.2) > 1e-12 || res.reason != "1.2<=1.25" {
		t.Errorf("got %+v, want met at a median of 1.2", res)
	}
	res = g.evaluate(rounds(t, round("12", "10"), round("15", "0"), round("11", "10")))
	if res.met || res.reason != "round_2_NaN" {
		t.Errorf("division by zero: got %+v", res)
	}
	res = g.evaluate(rounds(t, round("12", "10"), "bench: engine-load-1k+1k durability=fsync go_p50_ms=12", round("11", "10")))
	if res.met || res.reason != "round_2_missing" {
		t.Errorf("no durability=none line: got %+v", res)
	}
}

// The compaction-cost goal reads the paired line as pairedCost prints it (pipeline_depth
// between the identifying keys is a measurement, not part of a line's identity), and not the
// sustained lines it was once the quotient of.
func TestCompactionCostGoalReadsThePrintedLine(t *testing.T) {
	var g goal
	for _, c := range goals {
		if c.name == "sustained-8192-compaction-cost" {
			g = c
		}
	}
	round := func(vs string) string {
		return "bench: e2e-sustained-8192 durability=none pipeline_depth=4 indices=off rows_per_s=1 vs_writes_only=2 rounds=2x30\n" +
			"bench: e2e-compaction-cost durability=none pipeline_depth=4 on_rows_per_s=1 off_rows_per_s=1 vs_fanout_0=" + vs + " cpu_vs_fanout_0=1 rounds=4x30"
	}
	res := g.evaluate(rounds(t, round("0.99"), round("0.8"), round("0.9")))
	if res.met || math.Abs(res.med-0.9) > 1e-12 || res.reason != "0.9<0.95" {
		t.Errorf("got %+v, want not met at a median of 0.9", res)
	}
	res = g.evaluate(rounds(t, round("1"), round("0.96"), round("0.99")))
	if !res.met || math.Abs(res.med-0.99) > 1e-12 {
		t.Errorf("got %+v, want met at a median of 0.99", res)
	}
}

func TestSummariesAndGoalLines(t *testing.T) {
	rs := rounds(t,
		"bench: index-build kind=btree rows=10000 go_ms=5 official_ms=10 ratio=0.50\nbench: e2e-latency-store latency_ms=0 round_trips_per_commit=7.7 vs_round_trip_bound=n/a",
		"bench: index-build kind=btree rows=10000 go_ms=5 official_ms=5 ratio=1.00\nbench: e2e-latency-store latency_ms=0 round_trips_per_commit=7.5 vs_round_trip_bound=n/a",
		"bench: index-build kind=btree rows=10000 go_ms=5 official_ms=8 ratio=0.62",
	)
	got := summaries(rs)
	want := []string{
		"bench: index-build kind=btree rows=10000 field=ratio median=0.62 min=0.5 max=1 rounds=3 values=0.5,1,0.62",
		"bench: e2e-latency-store latency_ms=0 field=round_trips_per_commit median=7.6 min=7.5 max=7.7 rounds=2 values=7.7,7.5,NaN",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("summaries:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	lines := goalLines(goals, rs)
	if len(lines) != len(goals)+1 {
		t.Fatalf("%d goal lines for %d goals", len(lines), len(goals))
	}
	var idx string
	for _, l := range lines {
		if strings.Contains(l, "name=index-btree-10k ") {
			idx = l
		}
	}
	if want := "bench: goal name=index-btree-10k line=index-build,kind=btree,rows=10000 field=ratio cmp=<= threshold=1 median=0.62 min=0.5 max=1 rounds=3 values=0.5,1,0.62 met=yes reason=0.62<=1"; idx != want {
		t.Errorf("index goal line:\n%s\nwant\n%s", idx, want)
	}
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, fmt.Sprintf("bench: goals met=1 total=%d rounds=3 not_met=sustained-8192-none,", len(goals))) {
		t.Errorf("tally: %s", last)
	}
	// Every goal line parses as a bench line; its goal is unique by name.
	names := map[string]bool{}
	for _, g := range goals {
		if names[g.name] {
			t.Errorf("goal %s twice", g.name)
		}
		names[g.name] = true
		if g.cmp != ">=" && g.cmp != "<=" {
			t.Errorf("goal %s: cmp %q", g.name, g.cmp)
		}
	}
	for _, l := range lines {
		if _, ok := parseBenchLine(l); !ok {
			t.Errorf("not a bench line: %s", l)
		}
	}
}

func TestParseSections(t *testing.T) {
	set, err := parseSections("e2e, graph")
	if err != nil || !set["e2e"] || !set["graph"] || !set["aged"] || set["lance"] {
		t.Errorf("got %v %v", set, err)
	}
	if set, _ := parseSections(""); len(set) != len(sections) {
		t.Errorf("all: %v", set)
	}
	if _, err := parseSections("e2e,nope"); err == nil {
		t.Error("an unknown section was accepted")
	}
}

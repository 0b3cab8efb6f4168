package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// sections are the parts of the bench -only names, in the order a run measures them.
var sections = []string{"framing", "jetstream", "latency", "lance", "index", "e2e", "index-cost", "compaction-cost", "merge", "graph", "history", "pipeline", "aged"}

// roundSections are the sections a run repeats -rounds times, each round a process of its own:
// the ones whose lines the goals read, and the Lance append and scan lines beside them (seconds
// each). The others (framing and jetstream, which take their own medians; merge, history,
// pipeline and the aged graph, which take minutes and have no goal here) run once.
var roundSections = map[string]bool{"latency": true, "lance": true, "index": true, "e2e": true, "index-cost": true, "compaction-cost": true, "graph": true}

// parseSections is the set -only names: every section for "", else a comma-separated list.
// "graph" takes "aged" with it, as it always has (-aged-commits 0 leaves the aging out).
func parseSections(only string) (map[string]bool, error) {
	set := map[string]bool{}
	if only == "" {
		for _, s := range sections {
			set[s] = true
		}
		return set, nil
	}
	known := map[string]bool{}
	for _, s := range sections {
		known[s] = true
	}
	for _, s := range strings.Split(only, ",") {
		s = strings.TrimSpace(s)
		if !known[s] {
			return nil, fmt.Errorf("-only %q: %q is not one of %s", only, s, strings.Join(sections, ", "))
		}
		set[s] = true
		if s == "graph" {
			set["aged"] = true
		}
	}
	return set, nil
}

// pick lists the sections of set that want says, in run order.
func pick(set map[string]bool, want func(string) bool) []string {
	var out []string
	for _, s := range sections {
		if set[s] && want(s) {
			out = append(out, s)
		}
	}
	return out
}

// orchestrate runs the selected sections as child processes of this program: framing and
// jetstream once, then the round sections rounds times (each round a fresh process, the Go
// side and the official engine paired within it as before), then merge, history, pipeline and
// the aged graph once. Every child's output is passed through, a round's `bench:` lines with
// round=R appended; then the rounds' medians (summaries) and the goals (goalLines). It returns
// the exit code: 1 when any child failed (the rounds after a failed one still run).
func orchestrate(set map[string]bool, rounds int, args []string) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	start := time.Now()
	failed := false
	// child runs this program on the sections named, with extra flags after the caller's (the
	// flag package keeps the last of a repeated flag), as round round (-1: a section run once),
	// and returns the parsed bench lines of a round.
	child := func(names []string, round int, extra ...string) []benchLine {
		if len(names) == 0 {
			return nil
		}
		a := append(append([]string(nil), args...), "-only="+strings.Join(names, ","), fmt.Sprintf("-round-child=%d", round))
		cmd := exec.Command(self, append(a, extra...)...)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			failed = true
			return nil
		}
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			failed = true
			return nil
		}
		var lines []benchLine
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			s := sc.Text()
			if l, ok := parseBenchLine(s); ok && round > 0 {
				lines = append(lines, l)
				s += fmt.Sprintf(" round=%d", round)
			}
			fmt.Println(s)
		}
		if err := cmd.Wait(); err != nil {
			fmt.Fprintf(os.Stderr, "bench: sections %s: %v\n", strings.Join(names, ","), err)
			failed = true
		}
		return lines
	}
	once := func(names []string) {
		if len(names) > 0 {
			t0 := time.Now()
			child(names, -1)
			fmt.Printf("bench: once sections=%s took_s=%.0f\n", strings.Join(names, ","), time.Since(t0).Seconds())
		}
	}
	once(pick(set, func(s string) bool { return s == "framing" || s == "jetstream" }))
	var got [][]benchLine
	if repeated := pick(set, func(s string) bool { return roundSections[s] }); len(repeated) > 0 {
		for r := 1; r <= rounds; r++ {
			t0 := time.Now()
			got = append(got, child(repeated, r, "-aged-commits=0"))
			fmt.Printf("bench: round round=%d of=%d sections=%s took_s=%.0f\n", r, rounds, strings.Join(repeated, ","), time.Since(t0).Seconds())
		}
	}
	once(pick(set, func(s string) bool { return !roundSections[s] && s != "framing" && s != "jetstream" }))
	fmt.Printf("bench: run rounds=%d took_s=%.0f\n", len(got), time.Since(start).Seconds())
	if len(got) > 0 {
		fmt.Printf("bench: medians of %d rounds (each line's ratios: median, min, max, the rounds' values in order)\n", len(got))
		for _, s := range summaries(got) {
			fmt.Println(s)
		}
		for _, s := range goalLines(goals, got) {
			fmt.Println(s)
		}
	}
	if failed {
		return 1
	}
	return 0
}

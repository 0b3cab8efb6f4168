// Command driver runs the Lance interop suite: the Go lance package and the official Lance engine
// (through integration/lancecompat/compat.mjs under Node) each write tables the other must read
// row for row, and each mutates tables the other wrote. Its last line is exactly
// "lance-compat: N passed, M failed"; it exits non-zero when M > 0.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/omnigraph/omnigraph-worker/integration/lancecompat/canon"
	"github.com/omnigraph/omnigraph-worker/internal/proctest"
	"github.com/omnigraph/omnigraph-worker/lance/file"
)

type result struct {
	Case  string `json:"case"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

type suite struct {
	node    string
	script  string
	results []result
	verbose bool
	// engine and version are the official engine (engine.mjs's LANCE_ENGINE) and the data file
	// version of every table this round creates, on both sides; prefix names the round.
	engine  string
	version file.Version
	prefix  string
}

func (s *suite) add(name string, err error) {
	r := result{Case: s.prefix + name, OK: err == nil}
	if err != nil {
		r.Error = err.Error()
	}
	s.record(r)
}

func (s *suite) record(r result) {
	s.results = append(s.results, r)
	if !r.OK {
		fmt.Printf("FAIL %s: %s\n", r.Case, r.Error)
	} else if s.verbose {
		fmt.Printf("ok   %s\n", r.Case)
	}
}

// runNode runs one compat.mjs subcommand and records each JSON result line it prints.
func (s *suite) runNode(ctx context.Context, prefix string, args ...string) error {
	cmd := exec.CommandContext(ctx, s.node, append([]string{s.script}, args...)...)
	cmd.Env = append(os.Environ(), "LANCE_ENGINE="+s.engine, "LANCE_DATA_VERSION="+s.version.String())
	if os.Getenv("RUST_LOG") == "" {
		// The engine warns about every small k-means it trains for the index cases.
		cmd.Env = append(cmd.Env, "RUST_LOG=error", "LANCEDB_LOG=error")
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		s.add(prefix+"node "+args[0], fmt.Errorf("node compat.mjs %s: %v", strings.Join(args, " "), err))
		return err
	}
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			s.add(prefix+"node-output", fmt.Errorf("unparseable line %q", sc.Text()))
			continue
		}
		r.Case = s.prefix + prefix + r.Case
		s.record(r)
	}
	return nil
}

func main() {
	work := flag.String("work", "", "working directory (default: a fresh temp dir, removed afterwards)")
	script := flag.String("script", "integration/lancecompat/compat.mjs", "path of compat.mjs")
	verbose := flag.Bool("v", false, "print every case")
	engines := flag.String("engines", "lance8,lance10,lance12", "official engines to run against (engine.mjs names)")
	only := flag.String("only", "", "run only this part: \"indices\" (the index interop, INVERTED included), \"fts\" (the INVERTED interop alone) or \"refgraph\" (the graph the reference makes, served by worker run), else everything")
	flag.Parse()
	dir := *work
	if dir == "" {
		d, err := os.MkdirTemp("", "lance-compat-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	if err := proctest.PrivateTempDir(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	s := &suite{node: "node", script: *script, verbose: *verbose}
	ctx := context.Background()

	// Every engine, at every data file version this build reads or writes: each round runs in
	// a directory of its own, the official engine reading what Go wrote where Go writes the
	// version, Go reading what the engine wrote where Go reads it, and the mutations and the
	// graph (which need both) where it does both.
	var rounds []string
	for _, engine := range strings.Split(*engines, ",") {
		for _, v := range file.Known {
			ways := directions(v)
			if ways == "" {
				continue
			}
			s.engine, s.version, s.prefix = engine, v, fmt.Sprintf("%s/%s/", engine, v)
			rounds = append(rounds, fmt.Sprintf("%s/%s (%s)", engine, v, ways))
			if *only == "refgraph" {
				continue
			}
			if *only == "fts" {
				if file.Readable(v) && file.Writable(v) {
					invertedCompat(ctx, s, filepath.Join(dir, engine+"-"+v.String(), "fts"))
				}
				continue
			}
			if *only == "indices" {
				if file.Readable(v) && file.Writable(v) {
					indexCompat(ctx, s, filepath.Join(dir, engine+"-"+v.String(), "indices"))
				}
				continue
			}
			round(ctx, s, filepath.Join(dir, engine+"-"+v.String()))
		}
	}
	s.prefix = ""
	if *only == "" || *only == "refgraph" {
		refGraphCompat(ctx, s, dir)
	}
	if *only == "" {
		write21Check(ctx, s)
	}

	failed := 0
	for _, r := range s.results {
		if !r.OK {
			failed++
		}
	}
	fmt.Printf("lance-compat: engines and data file versions proven: %s\n", strings.Join(rounds, ", "))
	fmt.Printf("lance-compat: %d passed, %d failed\n", len(s.results)-failed, failed)
	if failed > 0 {
		os.Exit(1)
	}
}

// round runs every case against one engine at one data file version, under dir.
func round(ctx context.Context, s *suite, dir string) {
	canWrite, canRead := file.Writable(s.version), file.Readable(s.version)
	goDir, nodeDir := filepath.Join(dir, "go"), filepath.Join(dir, "node")
	if canWrite {
		model, err := writeGoTables(ctx, s, goDir)
		if err == nil {
			if err := s.runNode(ctx, "node-reads-go/", "verify", goDir); err == nil && canRead {
				mutateAndCheck(ctx, s, goDir, model)
			}
		}
	}
	if canRead {
		if err := s.runNode(ctx, "node-writes/", "write", nodeDir); err == nil {
			readNodeTables(ctx, s, nodeDir)
			if canWrite {
				goCompactsNode(ctx, s, nodeDir)
				goCleansNode(ctx, s, nodeDir)
			}
		}
	}
	if canRead && s.version != file.V2_0 {
		bigCompat(ctx, s, dir)
	}
	if canRead && canWrite {
		graphCompat(ctx, s, dir)
		indexCompat(ctx, s, filepath.Join(dir, "indices"))
	}
}

// directions says which ways a version can be proven: "both ways", "Go writes", "Go reads",
// or "" when this build neither reads nor writes it.
func directions(v file.Version) string {
	switch r, w := file.Readable(v), file.Writable(v); {
	case r && w:
		return "both ways"
	case w:
		return "Go writes"
	case r:
		return "Go reads"
	}
	return ""
}

// verifyCase is one entry of cases.json in the verify format compat.mjs reads.
type verifyCase struct {
	Name    string       `json:"name"`
	Table   string       `json:"table"`
	Version *uint64      `json:"version"`
	Branch  *string      `json:"branch"`
	Count   int          `json:"count"`
	Rows    []canon.Row  `json:"rows,omitempty"`
	Columns []string     `json:"columns,omitempty"`
	Filters []caseFilter `json:"filters,omitempty"`
	// Meta names each live row's stable row id and versions ({id, _rowid,
	// _row_created_at_version, _row_last_updated_at_version}); Ordered: a scan returns the
	// rows in Meta's order.
	Meta    []canon.Row `json:"meta,omitempty"`
	Ordered bool        `json:"ordered,omitempty"`
}

type caseFilter struct {
	Where string `json:"where"`
	IDs   []any  `json:"ids"`
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

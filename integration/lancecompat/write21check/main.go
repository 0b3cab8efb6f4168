// Command write21check proves the Go writer's Lance 2.1 and 2.2 data files against the official
// engines. For each version it writes tables with Go (every Arrow type the writer takes, nullable
// or not, nested, all-null, values over 64 KiB, multi-page, multi-fragment, a table of over a
// million rows), appends Go rows to tables the engines created at that version, and saves what
// every table should hold as an Arrow IPC file beside it. Then write21check.mjs has Lance 8, 10
// and 12 (@lancedb/lancedb 0.31.0, 0.37.1, 0.39.0) open every table at every version and
// compare its scan row for row with the IPC file.
//
//	go run ./integration/lancecompat/write21check [-dir DIR] [-big N]
//
// It prints one line per check and "write21check: N passed, M failed"; it exits 1 when a check failed. Run it
// from the repository root: the node side lives in integration/lancecompat (-compat).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
	"github.com/omnigraph/omnigraph-worker/storage"
)

var versions = []file.Version{file.V2_1, file.V2_2}

var only string

func main() {
	dir := flag.String("dir", "", "work directory (default: a new temporary directory, removed after a clean run)")
	compat := flag.String("compat", "integration/lancecompat", "directory holding write21check.mjs and node_modules")
	bigRows := flag.Int("big", 1_100_000, "rows of the big table")
	flag.StringVar(&only, "only", "", "write only the cases whose name contains this (and skip the engine-made tables)")
	flag.Parse()
	if err := run(*dir, *compat, *bigRows); err != nil {
		fmt.Fprintln(os.Stderr, "write21check:", err)
		os.Exit(1)
	}
}

func run(dir, compat string, bigRows int) error {
	ctx := context.Background()
	keep := dir != ""
	if dir == "" {
		d, err := os.MkdirTemp("", "write21check-")
		if err != nil {
			return err
		}
		dir = d
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	script, err := filepath.Abs(filepath.Join(compat, "write21check.mjs"))
	if err != nil {
		return err
	}
	for _, v := range versions {
		vdir := filepath.Join(dir, v.String())
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			return err
		}
		for _, c := range cases(bigRows) {
			if !strings.Contains(c.name, only) {
				continue
			}
			if err := writeCase(ctx, vdir, v, c); err != nil {
				return fmt.Errorf("%s %s: %w", v, c.name, err)
			}
		}
		// seeds for the engines to create tables from, and the node tables they size against
		seed := &tcase{name: "seed", cols: nodeCols(), rows: 1000, batch: 1000}
		if err := writeIPC(filepath.Join(vdir, "seed.arrow"), seed.schema(), seed.records(0, 1000)); err != nil {
			return err
		}
	}
	for _, v := range versions {
		if only != "" {
			break
		}
		if v == versions[0] {
			if err := node(script, "seed", dir, nil); err != nil {
				return err
			}
		}
		vdir := filepath.Join(dir, v.String())
		for _, eng := range []string{"l8", "l10", "l12"} {
			if err := appendToEngineTable(ctx, vdir, eng); err != nil {
				return fmt.Errorf("%s append to %s's table: %w", v, eng, err)
			}
		}
		// the Go tables the engines appended seed.arrow to hold its rows twice
		seed := &tcase{cols: nodeCols(), batch: 1000}
		for _, eng := range []string{"l8", "l12"} {
			recs := append(seed.records(0, 1000), seed.records(0, 1000)...)
			if err := writeIPC(filepath.Join(vdir, "grown_by_"+eng+".arrow"), seed.schema(), recs); err != nil {
				return err
			}
		}
	}
	var results []result
	if err := node(script, "verify", dir, func(line string) {
		var r result
		if json.Unmarshal([]byte(line), &r) == nil && r.Engine != "" {
			results = append(results, r)
			status := "ok  "
			if !r.OK {
				status = "FAIL"
			}
			fmt.Printf("%s %-4s %s %-24s %8d rows %s\n", status, r.Engine, r.Version, r.Table, r.Rows, r.Error)
		} else {
			fmt.Println(line)
		}
	}); err != nil {
		return err
	}
	passed, failed := 0, 0
	for _, r := range results {
		if r.OK {
			passed++
		} else {
			failed++
		}
	}
	if only == "" {
		if err := printSizes(dir); err != nil {
			return err
		}
	}
	fmt.Printf("write21check: %d passed, %d failed\n", passed, failed)
	if failed > 0 || passed == 0 {
		fmt.Println("work directory kept:", dir)
		os.Exit(1)
	}
	if !keep {
		return os.RemoveAll(dir)
	}
	return nil
}

type result struct {
	Engine, Version, Table, Error string
	OK                            bool
	Rows                          int
}

// writeCase creates the case's table at version v with Go and saves its rows as <name>.arrow.
func writeCase(ctx context.Context, vdir string, v file.Version, c *tcase) error {
	st, err := storage.Open(ctx, filepath.Join(vdir, c.name+".lance"))
	if err != nil {
		return err
	}
	defer st.Close()
	as := c.schema()
	ls, err := schema.FromArrow(as)
	if err != nil {
		return err
	}
	per := (c.rows + c.commits - 1) / c.commits
	var all []arrow.Record
	var d *lance.Dataset
	for k := 0; k < c.commits; k++ {
		lo, hi := min(k*per, c.rows), min((k+1)*per, c.rows)
		recs := c.records(lo, hi)
		all = append(all, recs...)
		stage := lance.StageOptions{FileOptions: c.fo}
		if k == 0 {
			d, err = lance.Create(ctx, st, ls, recs, lance.CreateOptions{FileVersion: v, Stage: stage})
		} else {
			var s *lance.Staged
			if s, err = d.StageAppend(ctx, recs, stage); err == nil {
				d, err = d.Commit(ctx, s)
			}
		}
		if err != nil {
			return err
		}
	}
	return writeIPC(filepath.Join(vdir, c.name+".arrow"), as, all)
}

// appendToEngineTable appends 1000 Go rows to the table engine eng created from seed.arrow
// and saves seed + appended rows as the table's expected content.
func appendToEngineTable(ctx context.Context, vdir, eng string) error {
	name := "made_by_" + eng
	st, err := storage.Open(ctx, filepath.Join(vdir, name+".lance"))
	if err != nil {
		return err
	}
	defer st.Close()
	d, err := lance.Open(ctx, st)
	if err != nil {
		return err
	}
	c := &tcase{name: name, cols: nodeCols(), rows: 2000, batch: 1000}
	recs := c.records(1000, 2000)
	s, err := d.StageAppend(ctx, recs, lance.StageOptions{})
	if err != nil {
		return err
	}
	if _, err := d.Commit(ctx, s); err != nil {
		return err
	}
	return writeIPC(filepath.Join(vdir, name+".arrow"), c.schema(), c.records(0, 2000))
}

// writeIPC saves recs as an Arrow IPC file. Apache Arrow JS cannot read LargeList, so such
// columns are saved as List, and <name>.json tells the node side to read them through
// arrow_cast to List as well.
func writeIPC(path string, as *arrow.Schema, recs []arrow.Record) error {
	fields := as.Fields()
	casts := map[string]string{}
	for i, f := range fields {
		if lt, ok := f.Type.(*arrow.LargeListType); ok {
			fields[i].Type = arrow.ListOfField(lt.ElemField())
			casts[f.Name] = fmt.Sprintf("arrow_cast(%s, 'List(%s)')", f.Name, dfName(lt.Elem()))
		}
	}
	if len(casts) > 0 {
		b, err := json.Marshal(map[string]any{"casts": casts})
		if err != nil {
			return err
		}
		if err := os.WriteFile(strings.TrimSuffix(path, ".arrow")+".json", b, 0o644); err != nil {
			return err
		}
	}
	as = arrow.NewSchema(fields, nil)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(as))
	if err != nil {
		f.Close()
		return err
	}
	for _, r := range recs {
		if r.NumRows() == 0 {
			continue
		}
		cols := r.Columns()
		conv := make([]arrow.Array, len(cols))
		for i, c := range cols {
			conv[i] = c
			if _, ok := c.DataType().(*arrow.LargeListType); ok {
				conv[i] = largeToList(c, fields[i].Type)
			}
		}
		if err := w.Write(array.NewRecord(as, conv, r.NumRows())); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// largeToList rewrites a LargeList array's 64-bit offsets as 32-bit ones.
func largeToList(a arrow.Array, to arrow.DataType) arrow.Array {
	d := a.Data()
	o64 := arrow.Int64Traits.CastFromBytes(d.Buffers()[1].Bytes())
	o32 := make([]int32, len(o64))
	for i, v := range o64 {
		o32[i] = int32(v)
	}
	bufs := []*memory.Buffer{d.Buffers()[0], memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(o32))}
	return array.MakeFromData(array.NewData(to, d.Len(), bufs, d.Children(), d.NullN(), d.Offset()))
}

// dfName is how arrow_cast spells an item type.
func dfName(t arrow.DataType) string {
	switch t.ID() {
	case arrow.STRING:
		return "Utf8"
	case arrow.INT32:
		return "Int32"
	case arrow.INT64:
		return "Int64"
	}
	panic("write21check: no arrow_cast name for " + t.String())
}

// node runs write21check.mjs cmd dir, passing each stdout line to line (or to stdout).
func node(script, cmd, dir string, line func(string)) error {
	c := exec.Command("node", script, cmd, dir)
	c.Dir = filepath.Dir(script)
	c.Stderr = os.Stderr
	out, err := c.StdoutPipe()
	if err != nil {
		return err
	}
	if err := c.Start(); err != nil {
		return err
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if line != nil {
			line(sc.Text())
		} else {
			fmt.Println(sc.Text())
		}
	}
	if err := c.Wait(); err != nil {
		return fmt.Errorf("node %s %s: %w", filepath.Base(script), cmd, err)
	}
	return nil
}

// printSizes compares the data file bytes of the node tables Go wrote with the same rows the
// engines wrote (official_node1000 and official_node8192, from the seed step).
func printSizes(dir string) error {
	for _, v := range versions {
		for _, n := range []string{"node1000", "node8192"} {
			var parts []string
			tables := []string{n, "l12_" + n, "l8_" + n}
			if n == "node8192" {
				tables = append(tables, n+"_lz4")
			}
			for _, t := range tables {
				sz, err := dataBytes(filepath.Join(dir, v.String(), t+".lance"))
				if err != nil {
					return err
				}
				who := "go"
				switch {
				case t == n+"_lz4":
					who = "go-lz4"
				case t != n:
					who = strings.SplitN(t, "_", 2)[0]
				}
				parts = append(parts, fmt.Sprintf("%s %d", who, sz))
			}
			fmt.Printf("size %s %s: %s bytes\n", v, n, strings.Join(parts, ", "))
		}
	}
	return nil
}

func dataBytes(table string) (int64, error) {
	ents, err := os.ReadDir(filepath.Join(table, "data"))
	if err != nil {
		return 0, err
	}
	total := int64(0)
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			return 0, err
		}
		total += fi.Size()
	}
	return total, nil
}

package engine

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/omnigraph/omnigraph-worker/engine/rows"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// Export writes every row of a branch (at a manifest version, 0 = latest) as NDJSON in the load
// envelope: nodes first, then edges, each table in table-key order, so that export, init with
// the same schema, and load reproduce the graph exactly.
func (g *Graph) Export(ctx context.Context, branch string, version uint64, w io.Writer) error {
	pub := g.publisher(branch)
	var st *publisher.State
	var err error
	if version == 0 {
		st, err = pub.Snapshot(ctx)
	} else {
		st, err = pub.SnapshotAt(ctx, version)
	}
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	tables := st.Tables()
	sort.SliceStable(tables, func(i, j int) bool { return tables[i].TableKey < tables[j].TableKey }) // "edge:" < "node:"
	order := append(filterTables(tables, "node:"), filterTables(tables, "edge:")...)
	for _, e := range order {
		ds, err := lance.Open(ctx, g.root.Sub(e.Path), lance.WithBranch(derefOr(e.Branch)), lance.AtVersion(e.Version))
		if err != nil {
			return fmt.Errorf("export %s: %w", e.TableKey, err)
		}
		err = ds.Each(ctx, lance.ScanOptions{}, func(rec arrow.Record) error {
			return rows.Export(g.Catalog(), e.TableKey, rec, bw)
		})
		if err != nil {
			return err
		}
	}
	return bw.Flush()
}

func filterTables(ts []publisher.TableEntry, prefix string) []publisher.TableEntry {
	var out []publisher.TableEntry
	for _, t := range ts {
		if len(t.TableKey) > len(prefix) && t.TableKey[:len(prefix)] == prefix {
			out = append(out, t)
		}
	}
	return out
}

func derefOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Commits lists a branch's visible graph commits, newest first.
func (g *Graph) Commits(ctx context.Context, branch string) ([]CommitInfo, error) {
	st, err := g.publisher(branch).Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	cs, err := st.AllCommits(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]CommitInfo, 0, len(cs))
	for _, c := range cs {
		out = append(out, commitInfo(c))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].GraphManifestVersion != out[j].GraphManifestVersion {
			return out[i].GraphManifestVersion > out[j].GraphManifestVersion
		}
		return out[i].GraphCommitID > out[j].GraphCommitID
	})
	return out, nil
}

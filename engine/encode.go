package engine

import (
	"context"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/omnigraph/omnigraph-worker/engine/rows"
	"github.com/omnigraph/omnigraph-worker/internal/parallel"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/lance/file"
)

// A serving worker builds each batch's rows ahead of its load (Build), while earlier batches
// commit. An append's data files are encoded there too, for the table versions this writer's
// last loads committed (the encode plans): a data file depends only on the table's schema and
// data file version (lance.EncodeAhead), so the load's turn at the write gate stages the files
// as they are, unless the table it meets has another schema (a schema apply, a table read
// again) and it encodes the rows itself. Encoding is the larger part of a load's preparation,
// and the commit loop, which applies the batches one at a time, is the stream's critical path.
// The worker's stager also writes the files ahead (Built.WriteAhead), so that the load's turn
// writes none; a batch that does not commit them removes them (Built.Discard).

// encodePlan is the key of a table's encode plan: its branch ("main" is "") and table key.
func encodePlan(branch, table string) string { return normBranch(branch) + "\x00" + table }

// notePlans records the tables a published load committed as the plans later batches encode
// for.
func (g *Graph) notePlans(req *LoadRequest, p *prepared) {
	for _, t := range p.tables {
		g.encodePlans.Store(encodePlan(req.Branch, t.key), t.committed)
	}
}

// forgetPlans drops the encode plans of a branch (deleted, or forgotten for a later branch of
// its name), so that a writer serving many short-lived branches does not keep a table version
// of each.
func (g *Graph) forgetPlans(branch string) {
	prefix := encodePlan(branch, "")
	g.encodePlans.Range(func(k, _ any) bool {
		if strings.HasPrefix(k.(string), prefix) {
			g.encodePlans.Delete(k)
		}
		return true
	})
}

// encodeAhead encodes the tables of an append's or a merge's built rows for their encode
// plans, side by side; a table with no plan, or whose encoding fails (its load encodes it
// again and reports what fails), is left out. Both stage the rows as new fragments (a merge
// masks the rows it replaces with deletion files its load makes), so their files do not
// depend on what the table holds; an overwrite's replace the table and are left to its load.
func (g *Graph) encodeAhead(req LoadRequest, batches map[string]*rows.TableBatch) map[string]*lance.Encoded {
	if req.Mode != ModeAppend && req.Mode != ModeMerge {
		return nil
	}
	keys := make([]string, 0, len(batches))
	for k := range batches {
		keys = append(keys, k)
	}
	enc := make([]*lance.Encoded, len(keys))
	at := parallel.Indices(len(keys))
	_ = parallel.Each(at, TableConcurrency, func(i int) error {
		plan, ok := g.encodePlans.Load(encodePlan(req.Branch, keys[i]))
		if !ok {
			return nil
		}
		e, err := plan.(*lance.Dataset).EncodeAhead([]arrow.Record{batches[keys[i]].Record}, file.Options{})
		if err == nil {
			enc[i] = e
		}
		return nil
	})
	out := map[string]*lance.Encoded{}
	for i, e := range enc {
		if e != nil {
			out[keys[i]] = e
		}
	}
	return out
}

// writtenAheadMaxAge bounds how long files written ahead may wait for their load: after
// OrphanGrace a cleanup may take them for leftovers, so well before that the load encodes
// and writes its rows again. A variable for the tests.
var writtenAheadMaxAge = OrphanGrace / 2

// WriteAhead writes the data files encoded ahead into their tables' directories now
// (lance.Encoded.WriteAhead), so that the load stages them without writing: in a stream, the
// stager writes a batch's files while earlier batches commit, and the writer's turn, the
// stream's critical path, no longer writes (or, with fsync, flushes) them. A table whose
// files fail to write is left to the load, which writes them in its turn as before; the first
// error is returned for the caller to log. The files are unreferenced until the load commits:
// Discard removes them when it does not.
func (b *Built) WriteAhead(ctx context.Context) error {
	if b == nil || len(b.encoded) == 0 {
		return nil
	}
	encs := make([]*lance.Encoded, 0, len(b.encoded))
	for _, e := range b.encoded {
		encs = append(encs, e)
	}
	return parallel.Each(encs, TableConcurrency, func(e *lance.Encoded) error { return e.WriteAhead(ctx) })
}

// Discard removes the files WriteAhead wrote that no table commit came to name (the batch was
// refused, before or after its tables staged them, already applied, or its table changed
// schema and its rows were encoded again), so that a batch that is not applied leaves nothing
// behind. Call it once no load of b will run again.
func (b *Built) Discard(ctx context.Context) {
	if b == nil {
		return
	}
	for _, e := range b.encoded {
		e.Discard(ctx)
	}
}

package ingest

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/omnigraph/omnigraph-worker/engine"
)

// compactionRounds bounds the compactions run after one poke: a merge of one tier can
// complete a run of the next, so a few rounds settle a cascade; the rest waits for the next
// commit.
const compactionRounds = 4

// inlineCompactionShare: a compaction counted to hold more than 1/inlineCompactionShare of
// pipeline_bytes is done in the writer's turn (compactDue).
const inlineCompactionShare = 4

// compactionPause is how long the worker stops trying to compact after a compaction failed, so
// that a fault which keeps failing it (storage trouble, say) does not cost a failed attempt
// after every message; the messages themselves go on.
const compactionPause = time.Minute

// compactor compacts the graph's main tables beside the message loop while one has a run due
// (engine.Graph.CompactionDue), until ctx ends. Every load adds a fragment per table it
// touches; without this a long-running worker's tables would grow without bound in
// fragments, and with them the cost of every commit and scan. The rows are read and rewritten
// off the write gate (engine.Graph.StageCompaction) while messages commit; only the publish
// (CommitCompaction: a sidecar, a manifest per table, one graph commit) takes the writer's
// turn between two messages. A failed compaction never fails a message: a RecoveryRequired
// one is finished by the next write's heal, anything else is tried again after
// compactionPause. It is poked after every commit (pokeCompactor) and once at the start.
func (w *Worker) compactor(ctx context.Context) {
	if w.cfg.CompactionFanout == 0 {
		return
	}
	var pause time.Time
	for {
		if time.Now().After(pause) && !w.compactDue(ctx) {
			pause = time.Now().Add(compactionPause)
		}
		select {
		case <-ctx.Done():
			return
		case <-w.compactPoke:
		}
	}
}

// pokeCompactor tells the compactor the graph changed; it never blocks.
func (w *Worker) pokeCompactor() {
	select {
	case w.compactPoke <- struct{}{}:
	default:
	}
}

// compactDue runs up to compactionRounds compactions while one is due; false when one failed.
// Two kinds are done in the writer's turn (inline) instead of beside the messages:
//   - one that holds more than inlineCompactionShare of the pipeline's bound: beside the
//     messages its memory would stack on a full pipeline's, and a rewrite of large fragments
//     is rare (a few per thousand batches) while the memory bound holds always;
//   - the next after a staged one went stale: there nothing changes under it, and a stream
//     that keeps upserting rows of the newest fragments would otherwise leave every staged one
//     stale and the fragments growing.
func (w *Worker) compactDue(ctx context.Context) bool {
	stale := false
	for round := 0; round < compactionRounds && ctx.Err() == nil && (w.g.CompactionDue(w.cfg.CompactionFanout) || (w.cfg.BuildIndices && w.g.IndicesDue(w.cfg.CompactionFanout))); round++ {
		start := time.Now()
		bytes := w.g.CompactionBytes(w.optimizeOptions())
		res, err := w.compactOnce(ctx, bytes, stale || bytes > w.cfg.PipelineBytes/inlineCompactionShare)
		took := time.Since(start)
		if err != nil {
			if ctx.Err() != nil {
				return true // stopping: not a failure of the compaction
			}
			w.metrics.compaction(resultFailed, took)
			w.log.Warn("compaction failed; the next try waits", zap.Duration("took", took), zap.Duration("pause", compactionPause), zap.Error(err))
			return false
		}
		if len(res.Stale) > 0 {
			w.metrics.compaction(resultStale, took)
			w.log.Info("compaction staged on tables that changed meanwhile; dropped, the next is done in the writer's turn",
				zap.Strings("tables", res.Stale), zap.Duration("took", took))
			stale = true
			if res.Commit == nil {
				continue
			}
		}
		if res.Commit == nil {
			return true // due by the cached state, but nothing was left to merge
		}
		w.metrics.compaction(resultOK, took)
		w.reportIndexWork()
		for _, t := range res.Tables {
			w.log.Info("compacted", zap.String("table", t.TableKey), zap.String("commit", res.Commit.GraphCommitID),
				zap.Uint64("version", t.ToVersion), zap.Int("fragments_before", t.FragmentsBefore),
				zap.Int("fragments_removed", t.FragmentsRemoved), zap.Int("fragments_added", t.FragmentsAdded),
				zap.Uint64("rows_rewritten", t.RowsRewritten), zap.Strings("indices_built", t.IndicesBuilt), zap.Duration("took", took))
		}
	}
	return true
}

// compactOnce stages one compaction on ctx and commits it on a context stop does not cancel:
// once it has the writer's turn, a publish is short and is finished rather than left to
// recovery. inline does it all in the writer's turn (engine.Graph.Optimize). bytes is what it is
// counted to hold (engine.Graph.CompactionBytes).
func (w *Worker) compactOnce(ctx context.Context, bytes int64, inline bool) (*engine.OptimizeResult, error) {
	o := w.optimizeOptions()
	defer w.countCompaction(bytes)()
	if inline {
		return w.g.Optimize(context.WithoutCancel(ctx), o)
	}
	sc, err := w.g.StageCompaction(ctx, o)
	if err != nil || sc == nil {
		return &engine.OptimizeResult{}, err
	}
	return w.g.CommitCompaction(context.WithoutCancel(ctx), sc)
}

// optimizeOptions are the options of the worker's automatic compaction.
func (w *Worker) optimizeOptions() engine.OptimizeOptions {
	return engine.OptimizeOptions{Fanout: w.cfg.CompactionFanout, Indices: w.cfg.BuildIndices, Actor: CompactionActor}
}

// countCompaction counts bytes in the pipeline's bound until the returned release, so that it
// prefetches less while a compaction holds its rows and files. Not in the process's footprint:
// the estimate is an upper bound (twice the files), and the default memory limit, which follows
// the footprint, would let the heap grow into all of it; the pipeline making room keeps the
// heap under the limit it already had.
func (w *Worker) countCompaction(bytes int64) (release func()) {
	w.compacting.Add(bytes)
	return func() { w.compacting.Add(-bytes) }
}

// reportIndexWork sets the index gauges (setIndexWork) from the graph, after a commit or a
// maintenance pass. Both walks take the write mutex: a worker that keeps no metrics makes neither.
func (w *Worker) reportIndexWork() {
	if w.metrics != nil {
		w.metrics.setIndexWork(w.g.UnindexedRows(), w.indexWorkBytes())
	}
}

// indexWorkBytes is about how much memory the index work now due will hold while the
// maintenance runs it (engine.Graph.IndexWorkBytes), 0 when this worker builds no index. It is
// reported (omnigraph_index_work_bytes), not counted in pipeline_bytes: a fold of a large
// table can hold more than the whole bound, and counting it left the pipeline at its least
// through every such fold (the sustained rate with indices, over the official engine's writes:
// 0.80 to 0.88, median 0.82, in six runs with the count; 0.72 to 0.99, median 0.88, in five
// without; the spreads overlap), for a saving of at most pipeline_bytes. Operators size memory
// for it (docs/operators.md).
func (w *Worker) indexWorkBytes() int64 {
	if !w.cfg.BuildIndices || w.cfg.CompactionFanout == 0 {
		return 0
	}
	return w.g.IndexWorkBytes(w.cfg.CompactionFanout)
}

// CompactionActor is the actor recorded on the worker's compaction commits.
const CompactionActor = "omnigraph-worker:compaction"

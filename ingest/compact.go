package ingest

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/omnigraph/omnigraph-worker/engine"
)

// compactionRounds bounds the compactions run before one message: a merge of one tier can
// complete a run of the next, so a few rounds settle a cascade; the rest waits for the next
// message rather than holding this one.
const compactionRounds = 4

// compactionPause is how long the worker stops trying to compact after a compaction failed, so
// that a fault which keeps failing it (storage trouble, say) does not add a failed attempt to
// every message's latency; the messages themselves go on.
const compactionPause = time.Minute

// compactIfDue compacts the graph's main tables while one has a run to compact
// (engine.Graph.CompactionDue), before the message just received is applied (its AckWait is
// kept alive by the heartbeat meanwhile). Every load adds a fragment per table it touches;
// without this a long-running worker's tables would grow without bound in fragments, and with
// them the cost of every commit and scan. A failed compaction never fails the message: a
// RecoveryRequired one is finished by the load's own heal, anything else is tried again after
// compactionPause.
func (w *Worker) compactIfDue(ctx context.Context, log *zap.Logger) {
	if w.cfg.CompactionFanout == 0 || time.Now().Before(w.compactAfter) {
		return
	}
	for round := 0; round < compactionRounds && w.g.CompactionDue(w.cfg.CompactionFanout); round++ {
		start := time.Now()
		res, err := w.g.Optimize(ctx, engine.OptimizeOptions{Fanout: w.cfg.CompactionFanout, Actor: CompactionActor})
		took := time.Since(start)
		if err != nil {
			w.metrics.compaction(false, took)
			w.compactAfter = time.Now().Add(compactionPause)
			log.Warn("compaction failed; the next try waits", zap.Duration("took", took), zap.Duration("pause", compactionPause), zap.Error(err))
			return
		}
		if res.Commit == nil {
			return // due by the cached state, but storage had nothing to merge
		}
		w.metrics.compaction(true, took)
		for _, t := range res.Tables {
			log.Info("compacted", zap.String("table", t.TableKey), zap.String("commit", res.Commit.GraphCommitID),
				zap.Uint64("version", t.ToVersion), zap.Int("fragments_before", t.FragmentsBefore),
				zap.Int("fragments_removed", t.FragmentsRemoved), zap.Int("fragments_added", t.FragmentsAdded),
				zap.Uint64("rows_rewritten", t.RowsRewritten), zap.Duration("took", took))
		}
	}
}

// CompactionActor is the actor recorded on the worker's compaction commits.
const CompactionActor = "omnigraph-worker:compaction"

package main

import (
	"context"
	"errors"
	"os"
	"strings"

	"go.uber.org/zap"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/fleet"
	"github.com/omnigraph/omnigraph-worker/ingest"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// serveFleet is `worker run --graphs`: this process's share of the fleet's graphs, each
// graph's root <root>/<graph>, each served as `worker run --graph` serves one (its own
// lease, consumer, pipeline and metrics), started and stopped as the fleet's members come
// and go. The graphs served share fp: the default memory limit leaves room for the sum of
// their pipelines' bounds.
func serveFleet(ctx context.Context, c *config.Config, fp *ingest.Footprint, log *zap.Logger) error {
	graphs := c.GraphList()
	if err := checkFleetRoots(ctx, c, graphs); err != nil {
		return err
	}
	loc := c.Root
	if !strings.Contains(loc, "://") {
		loc = strings.TrimSuffix(loc, string(os.PathSeparator))
	}
	nc, stop, err := connectServed(ctx, c, loc, log)
	if err != nil || nc == nil {
		return err
	}
	defer stop()
	serveOne := func(ctx context.Context, graph string, m *ingest.Metrics) error {
		glog := log.With(zap.String("graph", graph))
		st, g, err := openServed(ctx, c, c.GraphRoot(graph), glog)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		defer st.Close()
		// The service logs its graph itself.
		svc, err := ingest.NewService(nc, g, c.IngestOf(graph), ingest.WithLogger(log), ingest.WithMetrics(m), ingest.WithLeaseTTL(c.LeaseTTL),
			ingest.WithFootprint(fp))
		if err != nil {
			return err
		}
		return svc.Run(ctx)
	}
	f, err := fleet.New(nc, fleet.Config{ID: c.Fleet, Graphs: graphs, TTL: c.LeaseTTL, Replication: c.Ingest().Replication}, serveOne,
		fleet.WithLogger(log), fleet.WithHTTP(c.HTTP), fleet.WithProfiles(c.Profiles),
		// What would fail any process the same way (a root without a graph and no schema, a
		// placement the cluster refuses) ends this one with its exit code, rather than being
		// tried again here and then, after each restart, wherever the graph goes.
		fleet.WithFatal(func(err error) bool { return exitCode(err) == exitUsage }))
	if err != nil {
		return err
	}
	cfg := f.Config()
	log.Info("fleet", zap.String("fleet", cfg.ID), zap.String("member", cfg.Member), zap.Strings("graphs", cfg.Graphs))
	return f.Run(ctx)
}

// checkFleetRoots refuses, before anything starts, a fleet whose graphs' roots do not all
// hold a graph when no schema would initialise them: the process would otherwise find out
// only when given such a graph, and the whole fleet with it.
func checkFleetRoots(ctx context.Context, c *config.Config, graphs []string) error {
	if c.Schema != "" {
		return nil
	}
	var missing []string
	for _, g := range graphs {
		st, err := openRoot(ctx, c.GraphRoot(g), c, storage.MustExist())
		var ng *storage.NoGraphError
		if errors.As(err, &ng) {
			missing = append(missing, c.GraphRoot(g))
			continue
		}
		if err != nil {
			return err
		}
		ok, err := st.Exists(ctx, "__schema_state.json")
		st.Close()
		if err != nil {
			return err
		}
		if !ok {
			missing = append(missing, st.URI())
		}
	}
	if len(missing) > 0 {
		return &storage.NoGraphError{Root: strings.Join(missing, ", "), Hint: "pass --schema FILE.pg (or OMNIGRAPH_SCHEMA) to initialise each graph of the fleet"}
	}
	return nil
}

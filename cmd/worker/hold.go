package main

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/ingest"
	"github.com/omnigraph/omnigraph-worker/internal/httpserve"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// openServedHeld is openServed for `worker run`, except that a graph whose stored state needs
// an operator (a __manifest version or schema file that does not decode, …) is waited on
// rather than exited from: under a restart policy an exit only comes back to the same error,
// a crash loop that tells nobody more than one hold does. Meanwhile /readyz answers 503
// "operator required: <kind>: …" and the metrics say so (m, which the service goes on with),
// and the graph is opened again every retry_max. It returns a nil graph when ctx ends first.
func openServedHeld(ctx context.Context, c *config.Config, log *zap.Logger, m *ingest.Metrics) (storage.Store, *engine.Graph, error) {
	var stopHTTP func()
	defer func() {
		if stopHTTP != nil {
			stopHTTP()
		}
	}()
	retry := c.RetryMax
	if retry <= 0 {
		retry = ingest.DefaultRetryMax
	}
	for attempt := 1; ; attempt++ {
		st, g, err := openServed(ctx, c, c.Root, log)
		if err == nil && attempt > 1 {
			m.SetOperator("", "")
			log.Info("operator hold over: the graph opens again", zap.String("root", c.Root), zap.Int("attempts", attempt))
		}
		if err == nil || !errs.NeedsOperator(err) {
			return st, g, err
		}
		if stopHTTP == nil {
			var herr error
			if stopHTTP, herr = httpserve.Start(httpserve.Config{Addr: c.HTTP, Profiles: c.Profiles}, m.Handler(), log); herr != nil {
				return nil, nil, fmt.Errorf("metrics server: %w (while the graph needs an operator: %v)", herr, err)
			}
		}
		kind := errs.Kind(err)
		m.SetOperator(kind, fmt.Sprintf("%s: open %s: %s (%d attempts)", kind, c.Root, err, attempt))
		log.Error("operator required: the graph cannot be opened; nothing is consumed until it can, and it is opened again",
			zap.String("kind", kind), zap.String("root", c.Root), zap.Int("attempts", attempt), zap.Duration("retry_in", retry), zap.Error(err))
		select {
		case <-ctx.Done():
			return nil, nil, nil
		case <-time.After(retry):
		}
	}
}

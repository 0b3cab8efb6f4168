// Package httpserve runs the HTTP server beside a worker, a single graph's or a fleet's: its
// metrics and health handler, and the runtime's profiles when asked for.
package httpserve

import (
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/omnigraph/omnigraph-worker/internal/profiling"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// Config says where the server listens and what it adds to the caller's handler.
type Config struct {
	Addr     string       // listen on this address ("" with no Listener: no server)
	Listener net.Listener // or serve on this one; stop closes it
	Profiles bool         // also serve the Go runtime's profiles (internal/profiling)
}

// Start serves h as c says until stop, which closes the server and waits for it to end. An
// address it cannot listen on is its only error.
func Start(c Config, h http.Handler, log *zap.Logger) (stop func(), err error) {
	ln := c.Listener
	if ln == nil {
		if c.Addr == "" {
			return func() {}, nil
		}
		if ln, err = net.Listen("tcp", c.Addr); err != nil {
			return nil, err
		}
	}
	if c.Profiles {
		h = profiling.Handler(h)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics server", zap.Error(err))
		}
	}()
	log.Info("metrics", zap.String("addr", ln.Addr().String()))
	return func() {
		_ = srv.Close()
		<-done
	}, nil
}

// Healthz is the liveness check of a worker process, a single graph's or a fleet's: 200 while
// the process can still write, 503 with the reason once a directory sync of a local root has
// failed, after which no local write of the process succeeds again (storage.SyncFailure) and
// only a restart mends it.
func Healthz(w http.ResponseWriter, _ *http.Request) {
	if err := storage.SyncFailure(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, "ok\n")
}

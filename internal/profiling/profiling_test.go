package profiling_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/internal/profiling"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

// TestHandlerServesProfilesBesideNext: the heap profile (text form) and the index come from
// the runtime, every other path from next.
func TestHandlerServesProfilesBesideNext(t *testing.T) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "next "+r.URL.Path) })
	h := profiling.Handler(next)
	if code, body := get(t, h, "/debug/pprof/heap?debug=1"); code != http.StatusOK || !strings.Contains(body, "heap profile:") {
		t.Fatalf("heap: %d %.200q", code, body)
	}
	if code, body := get(t, h, "/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Fatalf("index: %d %.200q", code, body)
	}
	if code, body := get(t, h, "/metrics"); code != http.StatusOK || body != "next /metrics" {
		t.Fatalf("/metrics: %d %q", code, body)
	}
}

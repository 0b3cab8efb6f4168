// Package profiling serves the Go runtime's profiles (net/http/pprof) beside a worker's
// metrics, for an operator who turns them on to find where a long-running process's memory
// or CPU goes.
package profiling

import (
	"net/http"
	"net/http/pprof"
)

// Prefix is where the profiles are served: Prefix + "heap", + "goroutine", + "profile" (CPU).
const Prefix = "/debug/pprof/"

// Handler serves the profiles under Prefix and everything else with next. It registers
// nothing on http.DefaultServeMux: importing net/http/pprof does, but no worker serves that
// mux, so the profiles are only where this handler is.
func Handler(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(Prefix, pprof.Index) // heap, goroutine, allocs, block, mutex, threadcreate
	mux.HandleFunc(Prefix+"cmdline", pprof.Cmdline)
	mux.HandleFunc(Prefix+"profile", pprof.Profile)
	mux.HandleFunc(Prefix+"symbol", pprof.Symbol)
	mux.HandleFunc(Prefix+"trace", pprof.Trace)
	mux.Handle("/", next)
	return mux
}

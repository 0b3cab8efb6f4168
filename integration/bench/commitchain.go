package main

import (
	"strings"

	"github.com/omnigraph/omnigraph-worker/graph/pg"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/recovery"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// commitChains measures each commit's own chain of sequential storage round trips, as issue
// #31 counts them: from the commit's first write to its visibility. A commit's first write is
// its intent's sidecar, armed beside its data files and the revalidation's reads (a load
// prepares with no request; a staged compaction wrote its files before, beside the messages);
// it is visible once the __manifest version that publishes it is written.
//
// The chain is followed over the requests of the commit protocol alone: the sidecar's writes,
// the listing of __recovery/, the schema state's read and every request on a _versions/ path
// (the revalidation's probes, the table commits, the publish). The data files a commit writes
// go out beside its sidecar or its confirmation and add no wave of their own; leaving them out,
// with the index and compaction work the worker stages in the background and the previous
// commit's sidecar removal, keeps that work from lengthening the count: Latency.RoundTrips
// chains every request, so a background request that ends between two of a commit's steps (the
// commit's CPU time between them) puts one more link between them there, although the commit
// never waited for it. A request's place in the chain is one more than the longest chain among
// the protocol requests that had ended when it started; a commit's chain is its publish's place
// less its sidecar's, plus one. A sidecar armed again after a failed revalidation counts from
// the first arming; __manifest versions written with no sidecar pending (a cascade of tail
// merges) are no commit of the worker's and are left out. A single writer is assumed: the next
// __manifest version after a sidecar is armed is its commit's publish.
type commitChains struct {
	ended    int64           // the longest chain among the protocol requests that have ended
	inflight map[int64]int64 // the place of each protocol request in flight, by Seq
	armed    int64           // the pending commit's sidecar's place; 0: no commit pending
	chains   []int64         // each finished commit's chain, in order
}

// observe starts following the requests of l; stop ends it (after which the chains are the
// caller's alone: the callbacks run under l's lock, which stop takes).
func (c *commitChains) observe(l *storage.Latency) (stop func()) {
	c.inflight = map[int64]int64{}
	l.Observe(c.start, c.end)
	return func() { l.Observe(nil, nil) }
}

func (c *commitChains) start(r storage.Request) {
	if !protocolRequest(r) {
		return
	}
	place := c.ended + 1
	c.inflight[r.Seq] = place
	switch {
	case c.armed == 0 && isSidecarWrite(r):
		c.armed = place
	case c.armed != 0 && r.Op == "put_if_absent" && strings.Contains(r.Location, "/"+publisher.Dir+"/_versions/"):
		c.chains = append(c.chains, place-c.armed+1)
		c.armed = 0
	}
}

func (c *commitChains) end(r storage.Request) {
	if place, ok := c.inflight[r.Seq]; ok {
		c.ended = max(c.ended, place)
		delete(c.inflight, r.Seq)
	}
}

// summary is the longest chain and the median one (0 and NaN with none).
func (c *commitChains) summary() (longest int64, median float64) {
	xs := make([]float64, len(c.chains))
	for i, n := range c.chains {
		longest = max(longest, n)
		xs[i] = float64(n)
	}
	median, _, _ = medianSpread(xs)
	return longest, median
}

// protocolRequest reports whether r is one of a commit protocol's requests (see commitChains).
func protocolRequest(r storage.Request) bool {
	switch {
	case strings.Contains(r.Location, "/_versions/"):
		return true
	case strings.HasSuffix(r.Location, "/"+pg.SchemaStateFile):
		return true
	case strings.Contains(r.Location, "/"+recovery.Dir+"/") || strings.HasSuffix(r.Location, "/"+recovery.Dir):
		return r.Op != "delete" // the previous commit's retirement, in the background
	}
	return false
}

// isSidecarWrite reports whether r writes an intent's sidecar whole (an arming; its
// confirmation replaces it).
func isSidecarWrite(r storage.Request) bool {
	return (r.Op == "put" || r.Op == "put_if_absent") && strings.Contains(r.Location, "/"+recovery.Dir+"/") && strings.HasSuffix(r.Location, ".json")
}

package main

import (
	"testing"

	"github.com/omnigraph/omnigraph-worker/storage"
)

// chainScript feeds commitChains a sequence of request starts and ends, as Latency would.
type chainScript struct {
	c   commitChains
	seq int64
	of  map[string]storage.Request
}

func newChainScript() *chainScript {
	s := &chainScript{of: map[string]storage.Request{}}
	s.c.inflight = map[int64]int64{}
	return s
}

// start starts requests, each "op location", named by their location.
func (s *chainScript) start(reqs ...[2]string) {
	for _, r := range reqs {
		s.seq++
		req := storage.Request{Seq: s.seq, Op: r[0], Location: "mem://g/" + r[1]}
		s.of[r[1]] = req
		s.c.start(req)
	}
}

// end ends the requests at these locations.
func (s *chainScript) end(locs ...string) {
	for _, l := range locs {
		s.c.end(s.of[l])
	}
}

// wave starts requests and ends them, as a step whose requests go out together.
func (s *chainScript) wave(reqs ...[2]string) {
	s.start(reqs...)
	for _, r := range reqs {
		s.end(r[1])
	}
}

const (
	sidecarA = "__recovery/01A.json"
	sidecarB = "__recovery/01B.json"
)

// A load's four waves count 4, however much background work (index and compaction reads and
// writes, the last commit's sidecar removal) starts and ends between its steps; a staged
// compaction's three count 3; a __manifest version written with no sidecar pending is left out.
func TestCommitChainsFollowTheProtocolRequests(t *testing.T) {
	s := newChainScript()
	s.start([2]string{"delete", "__recovery/00Z.json"}) // the last commit's Phase D, beside
	s.wave([2]string{"put", sidecarA}, [2]string{"put", "nodes/data/a.lance"}, [2]string{"list_dir", "__recovery"},
		[2]string{"get", "__schema_state.json"}, [2]string{"exists", "__manifest/_versions/9.manifest"}, [2]string{"exists", "nodes/_versions/9.manifest"})
	s.end("__recovery/00Z.json")
	for _, bg := range []string{"nodes/data/old.lance", "nodes/_indices/x/page_data.lance"} {
		s.wave([2]string{"get_range", bg}) // two background links between the load's steps
	}
	s.wave([2]string{"put_if_absent", "nodes/_versions/9.manifest"})
	s.wave([2]string{"put", "nodes/_indices/y/page_data.lance"})
	s.wave([2]string{"replace", sidecarA}, [2]string{"put", "__manifest/data/m.lance"})
	s.start([2]string{"put_if_absent", "__manifest/_versions/9.manifest"})
	s.end("__manifest/_versions/9.manifest")

	// A staged compaction: its files were written before; sidecar beside the revalidation,
	// the tables beside the publish's staging, the publish.
	s.wave([2]string{"put", "nodes/data/compacted.lance"})
	s.wave([2]string{"put", sidecarB}, [2]string{"list_dir", "__recovery"}, [2]string{"exists", "nodes/_versions/10.manifest"})
	s.wave([2]string{"put_if_absent", "nodes/_versions/10.manifest"}, [2]string{"put", "__manifest/data/n.lance"})
	s.wave([2]string{"put_if_absent", "__manifest/_versions/10.manifest"})
	// A cascade of __manifest tail merges: a version of its own, no sidecar.
	s.wave([2]string{"put_if_absent", "__manifest/_versions/11.manifest"})

	if len(s.c.chains) != 2 || s.c.chains[0] != 4 || s.c.chains[1] != 3 {
		t.Fatalf("chains %v, want [4 3]", s.c.chains)
	}
	if longest, median := s.c.summary(); longest != 4 || median != 3.5 {
		t.Fatalf("summary %d, %v; want 4, 3.5", longest, median)
	}
}

// A wave the commit really waited for counts: a probe that ended before the revalidation's other
// reads started (the writer's goroutines scheduled late), tables committed one after another,
// and a sidecar armed again after a failed revalidation (counted from the first arming).
func TestCommitChainsCountTheCommitsOwnExtraWaves(t *testing.T) {
	s := newChainScript()
	s.wave([2]string{"put", sidecarA}, [2]string{"exists", "nodes/_versions/9.manifest"})
	s.wave([2]string{"list_dir", "__recovery"}, [2]string{"exists", "__manifest/_versions/9.manifest"})
	s.wave([2]string{"put_if_absent", "nodes/_versions/9.manifest"})
	s.wave([2]string{"put_if_absent", "edges/_versions/9.manifest"})
	s.wave([2]string{"replace", sidecarA})
	s.wave([2]string{"put_if_absent", "__manifest/_versions/9.manifest"})

	s.wave([2]string{"put", sidecarB}, [2]string{"list_dir", "__recovery"}) // the revalidation fails
	s.wave([2]string{"delete", sidecarB})                                   // the take-back
	s.wave([2]string{"list_dir", "__recovery"}, [2]string{"exists", "__manifest/_versions/10.manifest"})
	s.wave([2]string{"put", "__recovery/01C.json"})
	s.wave([2]string{"put_if_absent", "nodes/_versions/10.manifest"})
	s.wave([2]string{"replace", "__recovery/01C.json"})
	s.wave([2]string{"put_if_absent", "__manifest/_versions/10.manifest"})
	if len(s.c.chains) != 2 || s.c.chains[0] != 6 || s.c.chains[1] != 6 {
		t.Fatalf("chains %v, want [6 6]", s.c.chains)
	}
}

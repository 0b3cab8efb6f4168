package publisher

import (
	"container/list"
	"sync"
)

// RecentReceipts is how many of the newest ingest receipts a state keeps in memory: a
// redelivery (the usual one follows a lost ack or a crash, right after its commit) is answered
// from them without reading storage. Older receipts are found through the key filter and an
// exact lookup. Tests lower it.
var RecentReceipts = 4096

// CommitCacheBytes bounds the graph commits a state keeps in memory (its recent commits and
// those lineage walks loaded). Tests lower it.
var CommitCacheBytes = 16 << 20

// receiptWindow holds the newest receipts by the manifest version that wrote them.
type receiptWindow struct {
	max   int
	byKey map[string]Receipt
	order []string // ring of keys in insertion order
	next  int
}

func newReceiptWindow(max int) *receiptWindow {
	if max < 1 {
		max = 1
	}
	return &receiptWindow{max: max, byKey: map[string]Receipt{}}
}

func (w *receiptWindow) get(key string) (Receipt, bool) {
	r, ok := w.byKey[key]
	return r, ok
}

// put keeps a receipt, evicting the oldest one kept; a receipt older than every one kept while
// the window is full (a row a compaction moved, folded again) is not taken.
func (w *receiptWindow) put(key string, r Receipt) {
	if _, ok := w.byKey[key]; ok {
		w.byKey[key] = r
		return
	}
	if len(w.order) < w.max {
		w.order = append(w.order, key)
		w.byKey[key] = r
		return
	}
	oldest := w.order[w.next]
	if r.ManifestVersion < w.byKey[oldest].ManifestVersion {
		return
	}
	delete(w.byKey, oldest)
	w.order[w.next] = key
	w.next = (w.next + 1) % w.max
	w.byKey[key] = r
}

// all lists the kept receipts, oldest first.
func (w *receiptWindow) all() []keyedReceipt {
	out := make([]keyedReceipt, 0, len(w.order))
	for i := range w.order {
		k := w.order[(w.next+i)%len(w.order)]
		out = append(out, keyedReceipt{Key: k, Receipt: w.byKey[k]})
	}
	return out
}

type keyedReceipt struct {
	Key string
	Receipt
}

// commitCache is a least-recently-used set of graph commits bounded in bytes. Readers of a
// shared state fill it, so it has its own lock.
type commitCache struct {
	mu    sync.Mutex
	max   int
	used  int
	ll    *list.List // front = most recent
	byID  map[string]*list.Element
	loads int // on-demand scans of __manifest for commits
}

func newCommitCache(max int) *commitCache {
	return &commitCache{max: max, ll: list.New(), byID: map[string]*list.Element{}}
}

// commitBytes estimates a cached commit's memory (strings, struct, list and map entries).
func commitBytes(c *Commit) int {
	n := 200 + len(c.ID) + len(c.Meta.ParentCommitID) + len(c.Meta.MergedParentCommitID) + len(c.Meta.ActorID)
	if c.Branch != nil {
		n += len(*c.Branch)
	}
	return n
}

func (c *commitCache) get(id string) (Commit, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byID[id]
	if !ok {
		return Commit{}, false
	}
	c.ll.MoveToFront(e)
	return *e.Value.(*Commit), true
}

func (c *commitCache) put(cm Commit) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(cm)
}

func (c *commitCache) putLocked(cm Commit) {
	if e, ok := c.byID[cm.ID]; ok {
		c.used -= commitBytes(e.Value.(*Commit))
		*e.Value.(*Commit) = cm
		c.used += commitBytes(&cm)
		c.ll.MoveToFront(e)
	} else {
		c.byID[cm.ID] = c.ll.PushFront(&cm)
		c.used += commitBytes(&cm)
	}
	for c.used > c.max && c.ll.Len() > 1 {
		e := c.ll.Back()
		old := e.Value.(*Commit)
		c.used -= commitBytes(old)
		delete(c.byID, old.ID)
		c.ll.Remove(e)
	}
}

// newest lists up to n cached commits, most recently used first.
func (c *commitCache) newest(n int) []Commit {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Commit
	for e := c.ll.Front(); e != nil && len(out) < n; e = e.Next() {
		out = append(out, *e.Value.(*Commit))
	}
	return out
}

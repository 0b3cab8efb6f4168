package lance

import (
	"container/list"
	"sync"
)

// lru keeps values by key within a byte budget, the least recently used dropped first past
// it; a value larger than the whole budget is not kept. It owns what it keeps: release frees a
// value it drops, share makes the reference get hands out (the caller then frees that one).
type lru[K comparable, V any] struct {
	mu      sync.Mutex
	budget  int64
	used    int64
	order   *list.List // of *lruEntry[K, V], most recent first
	byKey   map[K]*list.Element
	share   func(V) V
	release func(V)
}

type lruEntry[K comparable, V any] struct {
	key K
	v   V
	n   int64
}

func newLRU[K comparable, V any](budget int64, share func(V) V, release func(V)) lru[K, V] {
	return lru[K, V]{budget: budget, order: list.New(), byKey: map[K]*list.Element{}, share: share, release: release}
}

// keep takes v, of n bytes, as the value of key.
func (c *lru[K, V]) keep(key K, v V, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n > c.budget {
		c.release(v)
		return
	}
	if e, ok := c.byKey[key]; ok {
		c.drop(e)
	}
	c.byKey[key] = c.order.PushFront(&lruEntry[K, V]{key: key, v: v, n: n})
	c.used += n
	c.evict()
}

// get is a shared reference to the value of key, if it is kept.
func (c *lru[K, V]) get(key K) (v V, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return v, false
	}
	c.order.MoveToFront(e)
	return c.share(e.Value.(*lruEntry[K, V]).v), true
}

// forget drops the value of key.
func (c *lru[K, V]) forget(key K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok {
		c.drop(e)
	}
}

func (c *lru[K, V]) setBudget(n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.budget = max(n, 0)
	c.evict()
}

func (c *lru[K, V]) evict() {
	for c.used > c.budget {
		c.drop(c.order.Back())
	}
}

func (c *lru[K, V]) drop(e *list.Element) {
	x := c.order.Remove(e).(*lruEntry[K, V])
	delete(c.byKey, x.key)
	c.used -= x.n
	c.release(x.v)
}

package remote

import (
	"container/list"
	"sync"
)

// lru is a cache bounded by the total size of its values (each value's
// size is given when it is added), least recently used out first. It is
// safe for concurrent use. A value larger than the bound is not kept.
type lru[K comparable, V any] struct {
	mu    sync.Mutex
	limit int64
	size  int64
	ll    *list.List // of *lruEntry, most recent first
	m     map[K]*list.Element
	// evictions counts values dropped to stay within the bound.
	evictions int64
}

type lruEntry[K comparable, V any] struct {
	key  K
	val  V
	size int64
}

func newLRU[K comparable, V any](limit int64) *lru[K, V] {
	return &lru[K, V]{limit: limit, ll: list.New(), m: make(map[K]*list.Element)}
}

// get returns the value of key, marking it most recently used.
func (c *lru[K, V]) get(key K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[key]; ok {
		c.ll.MoveToFront(el)
		return el.Value.(*lruEntry[K, V]).val, true
	}
	var zero V
	return zero, false
}

// add stores val under key with the given size, dropping the least
// recently used values until the total is within the bound.
func (c *lru[K, V]) add(key K, val V, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[key]; ok {
		c.size -= el.Value.(*lruEntry[K, V]).size
		c.ll.Remove(el)
		delete(c.m, key)
	}
	if size > c.limit {
		return
	}
	c.m[key] = c.ll.PushFront(&lruEntry[K, V]{key: key, val: val, size: size})
	c.size += size
	for c.size > c.limit {
		el := c.ll.Back()
		e := el.Value.(*lruEntry[K, V])
		c.ll.Remove(el)
		delete(c.m, e.key)
		c.size -= e.size
		c.evictions++
	}
}

// stats returns the number of values held, their total size and the
// evictions so far.
func (c *lru[K, V]) stats() (n int, size, evictions int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m), c.size, c.evictions
}

// removeIf drops the values whose key matches.
func (c *lru[K, V]) removeIf(match func(K) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, el := range c.m {
		if match(k) {
			c.size -= el.Value.(*lruEntry[K, V]).size
			c.ll.Remove(el)
			delete(c.m, k)
		}
	}
}

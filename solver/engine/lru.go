package engine

import "math"

// blockLRU is the prefix cache: a set of KV block hashes with a fixed
// capacity and least-recently-used eviction. The list lives in a slice and
// links by index, so touching, inserting and evicting allocate nothing once
// the slice and the index have grown to the capacity.
type blockLRU struct {
	index    blockIndex // block hash -> node
	nodes    []lruNode
	free     []int32 // nodes released by a shrink, reused before appending
	head     int32   // most recently used; nilNode when empty
	tail     int32   // least recently used; nilNode when empty
	size     int
	capacity int
}

type lruNode struct {
	key        uint64
	prev, next int32
}

const nilNode = -1

func newBlockLRU(capacity int) blockLRU {
	c := blockLRU{head: nilNode, tail: nilNode}
	c.setCapacity(capacity)
	return c
}

// reset empties the cache, keeping its memory. A cache without memory
// yet gets it for its capacity (up to reserveBlocks) at once: a
// backtest's engines fill their caches within minutes, and growing the
// index and the nodes there by doubling was a tenth of the engine
// model's allocation and part of its time.
func (c *blockLRU) reset(capacity int) {
	c.index.reset()
	c.nodes, c.free = c.nodes[:0], c.free[:0]
	c.head, c.tail, c.size = nilNode, nilNode, 0
	c.setCapacity(capacity)
	if n := min(c.capacity, reserveBlocks); cap(c.nodes) < n {
		c.nodes = make([]lruNode, 0, n)
		c.index.reserve(n)
	}
}

// reserveBlocks bounds what reset reserves (256 KiB of index, 64 KiB of
// nodes), so that an engine with a large cache it never fills costs
// little more than before.
const reserveBlocks = 4096

// setCapacity changes the capacity, evicting the oldest blocks on a shrink.
func (c *blockLRU) setCapacity(capacity int) {
	c.capacity = min(max(capacity, 0), math.MaxInt32)
	for c.size > c.capacity {
		n := c.tail
		c.unlink(n)
		c.index.remove(c.nodes[n].key)
		c.free = append(c.free, n)
		c.size--
	}
}

// prefixHits counts the leading blocks that are cached, without touching
// them: a block only helps when every block before it is cached too.
func (c *blockLRU) prefixHits(blocks []uint64) int {
	for i, b := range blocks {
		if _, ok := c.index.get(b); !ok {
			return i
		}
	}
	return len(blocks)
}

// touchAll marks blocks as just used, inserting the missing ones. It walks
// them from the last to the first, so the first block ends most recently
// used and the tail of a prefix is evicted before its head (as vLLM does):
// a cached tail is worthless once its head is gone.
func (c *blockLRU) touchAll(blocks []uint64) {
	for i := len(blocks) - 1; i >= 0; i-- {
		c.touch(blocks[i])
	}
}

func (c *blockLRU) touch(key uint64) {
	if n, ok := c.index.get(key); ok {
		if n != c.head {
			c.unlink(n)
			c.pushFront(n)
		}
		return
	}
	if c.capacity == 0 {
		return
	}
	var n int32
	switch {
	case c.size == c.capacity: // evict the oldest and reuse its node
		n = c.tail
		c.unlink(n)
		c.index.remove(c.nodes[n].key)
		c.size--
	case len(c.free) > 0:
		n = c.free[len(c.free)-1]
		c.free = c.free[:len(c.free)-1]
	default:
		n = int32(len(c.nodes))
		c.nodes = append(c.nodes, lruNode{})
	}
	c.nodes[n].key = key
	c.index.put(key, n)
	c.pushFront(n)
	c.size++
}

func (c *blockLRU) unlink(n int32) {
	nd := &c.nodes[n]
	if nd.prev != nilNode {
		c.nodes[nd.prev].next = nd.next
	} else {
		c.head = nd.next
	}
	if nd.next != nilNode {
		c.nodes[nd.next].prev = nd.prev
	} else {
		c.tail = nd.prev
	}
}

func (c *blockLRU) pushFront(n int32) {
	nd := &c.nodes[n]
	nd.prev, nd.next = nilNode, c.head
	if c.head != nilNode {
		c.nodes[c.head].prev = n
	} else {
		c.tail = n
	}
	c.head = n
}

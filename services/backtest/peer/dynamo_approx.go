package peer

// dynamoApprox is Dynamo's radix tree without KV events
// (--no-kv-events): the router inserts the blocks of each request it
// routes for the chosen worker, with a TTL (router_ttl_secs, 120 s),
// refreshed by a later insert; the tree is pruned to 0.8 of
// router_max_tree_size (2^20 blocks) when it outgrows it, oldest first.
// Blocks are the trace's (prefix-chained ids, so a block id is a tree
// node), each weighing the Dynamo blocks it holds.
type dynamoApprox struct {
	ttl     int64 // ns
	maxSize int   // Dynamo blocks over all (block, worker) pairs
	size    int
	nodes   hashMap // trace block -> entry
	ents    pages[approxEntry]
	free    []int32
	fifo    []approxRec // insertions, oldest first (head at fifoHead)
	head    int
	alive   []int32 // scratch: workers still matching
}

type approxEntry struct {
	hash    uint64
	weight  int32
	holders smallList[approxHolder]
}

type approxHolder struct {
	worker  int32
	expires int64
}

type approxRec struct {
	hash    uint64
	worker  int32
	expires int64
}

func newDynamoApprox(ttl int64, maxSize int) *dynamoApprox {
	return &dynamoApprox{ttl: ttl, maxSize: maxSize, nodes: newHashMap(1024)}
}

// overlap adds to dst, per worker, the Dynamo blocks of the leading
// blocks of the request that worker holds in the tree (unexpired at now).
func (a *dynamoApprox) overlap(now int64, blocks []uint64, weight func(k int) int32, dst []int) {
	a.expire(now)
	a.alive = a.alive[:0]
	for k, h := range blocks {
		i, ok := a.nodes.get(h)
		if !ok {
			return
		}
		w := int(weight(k))
		ent := a.ents.at(i)
		if k == 0 {
			for _, x := range ent.holders.items() {
				a.alive = append(a.alive, x.worker)
				dst[x.worker] += w
			}
			continue
		}
		kept := a.alive[:0]
		for _, wk := range a.alive {
			if ent.holds(wk) {
				kept = append(kept, wk)
				dst[wk] += w
			}
		}
		if a.alive = kept; len(kept) == 0 {
			return
		}
	}
}

func (e *approxEntry) holds(w int32) bool {
	for _, x := range e.holders.items() {
		if x.worker == w {
			return true
		}
	}
	return false
}

// insert records blocks for worker w at now.
func (a *dynamoApprox) insert(now int64, blocks []uint64, weight func(k int) int32, w int) {
	exp := now + a.ttl
	for k, h := range blocks {
		i, ok := a.nodes.get(h)
		if !ok {
			i = a.newEntry(h, weight(k))
		}
		ent := a.ents.at(i)
		found := false
		hs := ent.holders.items()
		for j := range hs {
			if int(hs[j].worker) == w {
				hs[j].expires, found = exp, true
				break
			}
		}
		if !found {
			ent.holders.add(approxHolder{worker: int32(w), expires: exp})
			a.size += int(ent.weight)
		}
		a.fifo = append(a.fifo, approxRec{hash: h, worker: int32(w), expires: exp})
	}
	if a.size > a.maxSize {
		for a.size > a.maxSize*4/5 && a.head < len(a.fifo) {
			a.pop()
		}
	}
}

func (a *dynamoApprox) newEntry(h uint64, weight int32) int32 {
	var i int32
	if n := len(a.free); n > 0 {
		i, a.free = a.free[n-1], a.free[:n-1]
		a.ents.at(i).holders.reset()
	} else {
		i = a.ents.push()
	}
	e := a.ents.at(i)
	e.hash, e.weight = h, weight
	a.nodes.put(h, i)
	return i
}

// expire drops the (block, worker) pairs whose TTL ran out by now.
func (a *dynamoApprox) expire(now int64) {
	for a.head < len(a.fifo) && a.fifo[a.head].expires <= now {
		a.pop()
	}
	if a.head > 4096 && 2*a.head > len(a.fifo) { // reclaim the consumed head
		a.fifo = append(a.fifo[:0], a.fifo[a.head:]...)
		a.head = 0
	}
}

// pop removes the oldest insertion record, and its pair unless a later
// insert refreshed it.
func (a *dynamoApprox) pop() {
	r := a.fifo[a.head]
	a.head++
	i, ok := a.nodes.get(r.hash)
	if !ok {
		return
	}
	ent := a.ents.at(i)
	for j, x := range ent.holders.items() {
		if x.worker == r.worker && x.expires == r.expires {
			ent.holders.del(j)
			a.size -= int(ent.weight)
			break
		}
	}
	if ent.holders.len() == 0 {
		a.nodes.del(r.hash)
		a.free = append(a.free, i)
	}
}

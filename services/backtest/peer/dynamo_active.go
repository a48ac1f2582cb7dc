package peer

// dynamoActive is Dynamo's router-side ActiveSequences: for every
// worker, the unique blocks of the requests it routed there and has not
// seen complete (refcounted: a prefix shared by two requests counts
// once), the prompt tokens still to prefill (a request's uncached prompt,
// dropped at its first token: mark_prefill_completed), and the requests
// in flight. All of it is the router's own accounting, updated at once.
//
// Blocks are the trace's; each weighs the Dynamo blocks (the engine's KV
// block size) it holds, full ones only, as Dynamo hashes only full
// blocks.
type dynamoActive struct {
	traceTokens, bs int     // trace block and Dynamo block sizes, tokens
	refs            hashMap // trace block -> entry in ents
	ents            pages[activeEntry]
	free            []int32
	blocks          []int   // by worker: Σ weights of its unique active blocks
	prefill         []int64 // by worker: prompt tokens still to prefill
	requests        []int   // by worker
	reqs            map[int]activeReq
}

type activeEntry struct {
	hash   uint64
	weight int32
	users  smallList[activeUser] // workers with this block active, and how many requests use it there
}

type activeUser struct {
	worker int32
	refs   int32
}

type activeReq struct {
	worker  int
	blocks  []uint64 // the workload's slice: stable for the run
	prompt  int
	prefill int64 // still counted in prefill
}

func newDynamoActive(workers, traceTokens, bs int) *dynamoActive {
	return &dynamoActive{traceTokens: traceTokens, bs: bs, refs: newHashMap(1024), blocks: make([]int, workers),
		prefill: make([]int64, workers), requests: make([]int, workers), reqs: map[int]activeReq{}}
}

// weight is the number of full Dynamo blocks in trace block k of a
// prompt of prompt tokens.
func (a *dynamoActive) weight(k, prompt int) int32 {
	return int32((min((k+1)*a.traceTokens, prompt) - min(k*a.traceTokens, prompt)) / a.bs)
}

// present adds, for each worker, the weight of r's blocks it has active
// into dst (indexed by worker).
func (a *dynamoActive) present(blocks []uint64, dst []int) {
	for _, h := range blocks {
		if k, ok := a.refs.get(h); ok {
			ent := a.ents.at(k)
			for _, u := range ent.users.items() {
				dst[u.worker] += int(ent.weight)
			}
		}
	}
}

// add records request id, routed to worker w, with its blocks, prompt
// and prefill tokens still to compute.
func (a *dynamoActive) add(id, w int, blocks []uint64, prompt int, prefill int64) {
	for k, h := range blocks {
		a.ref(h, a.weight(k, prompt), w)
	}
	a.prefill[w] += prefill
	a.requests[w]++
	a.reqs[id] = activeReq{worker: w, blocks: blocks, prompt: prompt, prefill: prefill}
}

func (a *dynamoActive) ref(h uint64, weight int32, w int) {
	k, ok := a.refs.get(h)
	if !ok {
		if n := len(a.free); n > 0 {
			k, a.free = a.free[n-1], a.free[:n-1]
			a.ents.at(k).users.reset()
		} else {
			k = a.ents.push()
		}
		e := a.ents.at(k)
		e.hash, e.weight = h, weight
		a.refs.put(h, k)
	}
	ent := a.ents.at(k)
	us := ent.users.items()
	for i := range us {
		if int(us[i].worker) == w {
			us[i].refs++
			return
		}
	}
	ent.users.add(activeUser{worker: int32(w), refs: 1})
	a.blocks[w] += int(ent.weight)
}

// prefilled drops request id's prompt from its worker's prefill load.
func (a *dynamoActive) prefilled(id int) {
	r, ok := a.reqs[id]
	if !ok || r.prefill == 0 {
		return
	}
	a.prefill[r.worker] -= r.prefill
	r.prefill = 0
	a.reqs[id] = r
}

// done frees request id's blocks and load.
func (a *dynamoActive) done(id int) {
	r, ok := a.reqs[id]
	if !ok {
		return
	}
	a.prefilled(id)
	for _, h := range r.blocks {
		a.unref(h, r.worker)
	}
	a.requests[r.worker]--
	delete(a.reqs, id)
}

func (a *dynamoActive) unref(h uint64, w int) {
	k, ok := a.refs.get(h)
	if !ok {
		return
	}
	ent := a.ents.at(k)
	us := ent.users.items()
	for i := range us {
		if int(us[i].worker) != w {
			continue
		}
		if us[i].refs--; us[i].refs == 0 {
			a.blocks[w] -= int(ent.weight)
			ent.users.del(i)
		}
		break
	}
	if ent.users.len() == 0 {
		a.refs.del(h)
		a.free = append(a.free, k)
	}
}

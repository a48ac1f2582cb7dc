package backtest

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ilb-router/ilb/solver/sched"
)

// workload is a trace prepared for one fleet and shaped: flat arrays in
// arrival order, the same for every policy.
type workload struct {
	arrival   []int64 // virtual ns
	cluster   []int32
	row       []int32 // demand row (fleetInfo.rows), -1: no engine of the cluster serves its model and prompt
	model     []int32 // index into models
	models    []string
	conv      []int32
	prompt    []int32
	output    []int32
	blockOff  []int32 // request i's blocks are blocks[blockOff[i]:blockOff[i+1]]
	blocks    []uint64
	rowBlocks []int // distinct blocks among each demand row's requests
	convKey   []string
	convHash  []uint64 // sched.HashKey of the key
	copies    int      // requests added by swings
	dropped   int      // requests removed by swings
}

func (w *workload) len() int { return len(w.arrival) }

// shaping is what buildWorkload applies to the trace's timeline.
type shaping struct {
	speed    float64
	duration time.Duration // 0: all
	swings   []Swing
	seed     uint64
}

// buildWorkload scales arrival gaps by 1/speed, cuts at duration, applies
// the swings and flattens the result. The trace must have its
// conversations and clusters assigned.
func buildWorkload(t *Trace, fi *fleetInfo, sh shaping) (*workload, error) {
	items, dropped, err := shapeItems(t, fi, sh)
	if err != nil {
		return nil, err
	}
	w := &workload{}
	convs := map[string]int32{}
	models := map[string]int32{}
	for _, it := range items {
		r := &t.Requests[it.req]
		key := r.Conversation
		if it.copy > 0 {
			key = fmt.Sprintf("%s#%d", key, it.copy)
		}
		c, ok := convs[key]
		if !ok {
			c = int32(len(w.convKey))
			convs[key] = c
			w.convKey = append(w.convKey, key)
			w.convHash = append(w.convHash, sched.HashKey(key))
		}
		w.add(it, r, c)
		w.classify(fi, r, models)
	}
	w.blockOff = append(w.blockOff, int32(len(w.blocks)))
	w.dropped = dropped
	for _, it := range items {
		if it.copy > 0 {
			w.copies++
		}
	}
	if w.len() == 0 {
		return nil, fmt.Errorf("%w: no requests left after --duration and --swing", ErrBadTrace)
	}
	if len(w.blocks) > math.MaxInt32 {
		return nil, fmt.Errorf("%w: %d prefix blocks in all, more than %d", ErrBadTrace, len(w.blocks), math.MaxInt32)
	}
	w.rowBlocks = w.distinctBlocks(fi.nrows())
	return w, nil
}

// distinctBlocks counts the distinct block hashes among each demand
// row's requests: a bound on the entries of a row's prefix index
// (peer.Cluster.Blocks), counted once rather than grown into every run.
func (w *workload) distinctBlocks(rows int) []int {
	by := make([][]uint64, rows)
	for i, r := range w.row {
		if r >= 0 {
			by[r] = append(by[r], w.blocks[w.blockOff[i]:w.blockOff[i+1]]...)
		}
	}
	n := make([]int, rows)
	for r, bs := range by {
		slices.Sort(bs)
		n[r] = len(slices.Compact(bs))
	}
	return n
}

func (w *workload) add(it item, r *Request, c int32) {
	w.arrival = append(w.arrival, it.at)
	w.cluster = append(w.cluster, it.cluster)
	w.conv = append(w.conv, c)
	w.prompt = append(w.prompt, int32(r.InputTokens))
	w.output = append(w.output, int32(r.OutputTokens))
	w.blockOff = append(w.blockOff, int32(min(len(w.blocks), math.MaxInt32)))
	for _, b := range r.Blocks {
		if it.copy > 0 {
			b = splitmix(b ^ uint64(it.copy)*0xa0761d6478bd642f)
		}
		w.blocks = append(w.blocks, b)
	}
}

// classify appends the model and demand row of the request just added
// (r, of cluster w.cluster[last]): the row of its model and prompt
// length, -1 when no engine its cluster may use serves them (the data
// plane answers such a request 404 or 400; it fails).
func (w *workload) classify(fi *fleetInfo, r *Request, models map[string]int32) {
	m, ok := models[r.Model]
	if !ok {
		m = int32(len(w.models))
		models[r.Model] = m
		w.models = append(w.models, r.Model)
	}
	w.model = append(w.model, m)
	row := int32(-1)
	if model, err := fi.f.RequestModel(r.Model); err == nil {
		if k, err := fi.rows.Lookup(int(w.cluster[len(w.cluster)-1]), model, r.InputTokens); err == nil {
			row = int32(k)
		}
	}
	w.row = append(w.row, row)
}

// item is one request of the shaped workload: a trace request or a copy.
type item struct {
	at      int64
	req     int
	copy    int // 0: the original
	cluster int32
}

func shapeItems(t *Trace, fi *fleetInfo, sh shaping) (items []item, dropped int, err error) {
	swings := make([][]Swing, len(fi.clusters))
	for _, s := range sh.swings {
		c, ok := fi.clusterIndex(s.Cluster)
		if !ok {
			return nil, 0, fmt.Errorf("backtest: --swing: cluster %q is not in the fleet", s.Cluster)
		}
		swings[c] = append(swings[c], s)
	}
	items = make([]item, 0, len(t.Requests))
	for i := range t.Requests {
		r := &t.Requests[i]
		at := int64(float64(r.ArrivalNs) / sh.speed)
		if sh.duration > 0 && at >= int64(sh.duration) {
			break // requests are in arrival order
		}
		c, ok := fi.clusterIndex(r.Cluster)
		if !ok {
			return nil, 0, fmt.Errorf("%w: request %d: cluster %q is not in the fleet", ErrBadTrace, i, r.Cluster)
		}
		n := copiesOf(swings[c], at, r.Conversation, sh.seed)
		if n == 0 {
			dropped++
		}
		for k := range n {
			items = append(items, item{at: at, req: i, copy: k, cluster: int32(c)})
		}
	}
	slices.SortStableFunc(items, func(a, b item) int { return cmp.Compare(a.at, b.at) })
	return items, dropped, nil
}

// copiesOf is how many times a request arriving at at is played: 1 outside
// swings; inside one of factor f, floor(f) plus one more with probability
// frac(f), decided by a hash of the conversation so that all of its turns
// agree (so f < 1 drops whole conversations).
func copiesOf(sw []Swing, at int64, conv string, seed uint64) int {
	n := 1.0
	for _, s := range sw {
		if at >= int64(s.From) && at < int64(s.To) {
			n *= s.Factor
		}
	}
	whole := math.Floor(n)
	u := float64(splitmix(sched.HashKey(conv)^seed)>>11) / (1 << 53)
	if u < n-whole {
		whole++
	}
	return int(whole)
}

package peer

import (
	"math"
	"testing"
	"time"
)

func newTestDynamo(t *testing.T, c DynamoConfig, f *Fleet) *dynamo {
	t.Helper()
	r, err := Dynamo(c).New(f, 0, 7)
	if err != nil {
		t.Fatal(err)
	}
	return r.(*dynamo)
}

// The cost is prefill blocks (own prompt + active prefill − cached
// overlap) plus decode blocks (active + the request's new ones), in
// 16-token blocks: worked by hand.
func TestDynamoCost(t *testing.T) {
	d := newTestDynamo(t, DefaultDynamoConfig(), testFleet(2, 64, 500_000, 9000))
	v := newTestView(2)
	v.cached[0] = 1 // engine 0 holds the request's first 512-token block: 32 Dynamo blocks
	r := &Request{ID: 1, PromptTokens: 1024, Blocks: []uint64{10, 11}}
	// w0: (1024/16 − 32) + (0 + 64) = 96; w1: 64 + 64 = 128.
	if w := d.Pick(v, r); w != 0 {
		t.Fatalf("picked %d, want 0 (96 < 128)", w)
	}
	if d.cost[0] != 96 || d.cost[1] != 128 {
		t.Fatalf("costs %v, want [96 128]", d.cost)
	}
	// Request 1 is now active on w0: 512 uncached prompt tokens to
	// prefill (1024 − 32·16) and 64 active blocks. A second request with
	// other blocks: w0: (512+1024)/16 − 32 + (64 + 64) = 192; w1: 128.
	r2 := &Request{ID: 2, PromptTokens: 1024, Blocks: []uint64{20, 21}}
	if w := d.Pick(v, r2); w != 1 || d.cost[0] != 192 || d.cost[1] != 128 {
		t.Fatalf("picked %d with costs %v, want 1 with [192 128]", w, d.cost)
	}
	// Request 1's first token ends its prefill load; its blocks stay
	// until it completes.
	d.FirstToken(v, r, 0)
	if d.active.prefill[0] != 0 || d.active.blocks[0] != 64 {
		t.Fatalf("after first token: prefill %d, blocks %d; want 0, 64", d.active.prefill[0], d.active.blocks[0])
	}
	d.Completed(v, r, 0, false)
	if d.active.blocks[0] != 0 || d.active.requests[0] != 0 || len(d.active.reqs) != 1 {
		t.Fatalf("after completion: blocks %d, requests %d, tracked %d", d.active.blocks[0], d.active.requests[0], len(d.active.reqs))
	}
}

// A prefix shared by requests active on one worker counts once in its
// decode blocks, and the request's blocks already active there are not
// new; a partial last block counts its full 16-token blocks.
func TestDynamoActiveBlocksShared(t *testing.T) {
	a := newDynamoActive(2, 512, 16)
	a.add(1, 0, []uint64{1, 2}, 1024, 0)
	a.add(2, 0, []uint64{1, 3}, 512+100, 0) // block 3 holds 100 tokens: 6 Dynamo blocks
	if a.blocks[0] != 32+32+6 {
		t.Fatalf("active blocks %d, want 70", a.blocks[0])
	}
	present := make([]int, 2)
	a.present([]uint64{1, 2, 9}, present)
	if present[0] != 64 || present[1] != 0 {
		t.Fatalf("present %v, want [64 0]", present)
	}
	a.done(1)
	if a.blocks[0] != 38 {
		t.Fatalf("after one completion %d active blocks, want 38", a.blocks[0])
	}
}

// Temperature 0: exact ties go to each tied worker with equal chance.
func TestDynamoTiesUniform(t *testing.T) {
	d := newTestDynamo(t, DefaultDynamoConfig(), testFleet(3, 64, 500_000, 9000))
	d.cand = []int32{0, 1, 2}
	counts := make([]int, 3)
	r := &Request{PromptTokens: 512, Blocks: []uint64{1}}
	d.req = r
	for range 3000 {
		counts[d.choose(r)]++
	}
	for w, c := range counts {
		if c < 900 || c > 1100 {
			t.Fatalf("worker %d won %d of 3000 ties, want about 1000 (%v)", w, c, counts)
		}
	}
}

// The queue holds requests while every worker is busy: max_num_seqs
// requests active, or active prefill above 16 × max_num_batched_tokens.
func TestDynamoQueue(t *testing.T) {
	f := testFleet(2, 1, 500_000, 9000) // max_num_seqs 1
	d := newTestDynamo(t, DefaultDynamoConfig(), f)
	v := newTestView(2)
	a := &Request{ID: 1, PromptTokens: 512, Blocks: []uint64{1}}
	b := &Request{ID: 2, PromptTokens: 512, Blocks: []uint64{2}}
	c := &Request{ID: 3, PromptTokens: 512, Blocks: []uint64{3}}
	wa, wb := d.Pick(v, a), d.Pick(v, b)
	if wa == wb || wa < 0 || wb < 0 {
		t.Fatalf("first two went to %d and %d, want both workers", wa, wb)
	}
	if got := d.Pick(v, c); got != Defer {
		t.Fatalf("third with every worker full: %d, want Defer", got)
	}
	d.Completed(v, a, wa, false)
	if got := d.Pick(v, c); got != wa {
		t.Fatalf("after a completion: %d, want %d", got, wa)
	}

	// Token threshold: max_num_batched_tokens 100, so busy above 1600
	// prompt tokens still to prefill.
	f = testFleet(1, 1000, 500_000, 9000)
	f.Engines[0].MaxBatchedTokens = 100
	d = newTestDynamo(t, DefaultDynamoConfig(), f)
	v = newTestView(1)
	if d.Pick(v, &Request{ID: 1, PromptTokens: 1600, Blocks: []uint64{1, 2, 3, 4}}) != 0 {
		t.Fatal("first request not routed")
	}
	if d.Pick(v, &Request{ID: 2, PromptTokens: 10, Blocks: []uint64{9}}) != 0 {
		t.Fatal("at exactly 16 × 100 prefill tokens the worker is not busy yet")
	}
	if d.Pick(v, &Request{ID: 3, PromptTokens: 10, Blocks: []uint64{8}}) != Defer {
		t.Fatal("above 16 × 100 prefill tokens the request must wait")
	}
	d.FirstToken(v, &Request{ID: 1}, 0)
	if d.Pick(v, &Request{ID: 3, PromptTokens: 10, Blocks: []uint64{8}}) != 0 {
		t.Fatal("the first token frees the prefill load")
	}
	c2 := DefaultDynamoConfig()
	c2.QueueThreshold = math.NaN()
	if newTestDynamo(t, c2, f).allBusy() {
		t.Fatal("NaN threshold must disable the queue")
	}
}

// Without KV events the router's own inserts are the tree, for 120 s.
func TestDynamoApproxTTL(t *testing.T) {
	c := DefaultDynamoConfig()
	c.KVEvents = false
	d := newTestDynamo(t, c, testFleet(2, 64, 500_000, 9000))
	v := newTestView(2)
	v.cached[1] = 2 // KV events would say engine 1: ignored without them
	r := &Request{ID: 1, PromptTokens: 1024, Blocks: []uint64{10, 11}}
	w := d.Pick(v, r)
	d.Completed(v, r, w, false)
	for _, tc := range []struct {
		at   time.Duration
		want int
	}{{119 * time.Second, 64}, {121 * time.Second, 0}} {
		v.now = int64(tc.at)
		clear(d.overlap)
		d.approx.overlap(v.now, []uint64{10, 11, 12}, func(int) int32 { return 32 }, d.overlap)
		if d.overlap[w] != tc.want || d.overlap[1-w] != 0 {
			t.Fatalf("at %v overlap %v, want %d on worker %d", tc.at, d.overlap, tc.want, w)
		}
	}
	// The tree is pruned to 0.8 of its maximum, oldest first.
	x := newDynamoApprox(int64(time.Hour), 100)
	one := func(int) int32 { return 10 }
	for k := range 11 {
		x.insert(int64(k), []uint64{uint64(100 + k)}, one, 0)
	}
	if x.size != 80 {
		t.Fatalf("tree size %d after outgrowing 100, want 80", x.size)
	}
	got := make([]int, 1)
	x.overlap(20, []uint64{100}, one, got)
	if got[0] != 0 {
		t.Fatal("the oldest block survived the prune")
	}
}

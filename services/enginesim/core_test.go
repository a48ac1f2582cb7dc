package enginesim

import (
	"math/rand/v2"
	"testing"

	"github.com/ilb-router/ilb/solver/engine"
)

// coreRun drives a core in virtual time over random arrivals sharing
// prefixes, with faults along the way, and returns the first-token times
// the core reported and the model's completions.
func coreRun(t *testing.T, p engine.Params, seed uint64, n int) (map[uint64]int64, []engine.Done) {
	t.Helper()
	firsts := map[uint64]int64{}
	var dones []engine.Done
	c, err := newCore(p, func(tag uint64, at int64) {
		if _, dup := firsts[tag]; dup {
			t.Errorf("request %d: first token reported twice", tag)
		}
		firsts[tag] = at
	}, func(d *engine.Done) { dones = append(dones, *d) })
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	v := int64(0)
	for i := range n {
		v += rng.Int64N(40e6) // up to 40 ms apart: batches form and queues build
		if err := c.submit(v, randomRequest(rng, uint64(i))); err != nil {
			t.Fatal(err)
		}
		if err := coreFault(c, rng, v, i); err != nil {
			t.Fatal(err)
		}
		c.advanceTo(v)
	}
	c.setHealthy(true)
	if err := c.setReplicas(v+1, p.Replicas, p.Replicas); err != nil {
		t.Fatal(err)
	}
	c.advanceTo(1 << 62)
	return firsts, dones
}

// randomRequest makes prompts from a few shared conversation prefixes.
// As appendBlocks guarantees, the blocks never cover the whole prompt, so
// every prefill computes at least one token and takes time.
func randomRequest(rng *rand.Rand, id uint64) engine.Request {
	conv := uint64(rng.IntN(5))
	nb := 1 + rng.IntN(6)
	blocks := make([]uint64, nb)
	for i := range blocks {
		blocks[i] = conv<<32 | uint64(i)
	}
	prompt := nb*16 + 1 + rng.IntN(16)
	return engine.Request{ID: id, Tag: id, PromptTokens: prompt, OutputTokens: 1 + rng.IntN(30), Blocks: blocks}
}

func coreFault(c *core, rng *rand.Rand, v int64, i int) error {
	switch i % 97 {
	case 20:
		return c.model.SetErrorRate(0.3, uint64(i))
	case 30:
		return c.model.SetErrorRate(0, 0)
	case 40:
		return c.setSlowdown(v, 1+rng.Float64()*3)
	case 50:
		return c.setSlowdown(v, 1)
	case 60:
		return c.setReplicas(v, 0, 2)
	case 62:
		return c.setReplicas(v, 1, 2)
	case 70:
		c.setHealthy(false)
	case 73:
		c.setHealthy(true)
	}
	return nil
}

// The core's first-token times must be the model's own FirstTokenNs, for
// every request served, under batching, queueing, cache hits, injected
// errors, slowdowns, replica loss and unhealthy periods.
func TestCoreFirstTokenMatchesModel(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*engine.Params)
	}{
		{"overhead", func(p *engine.Params) { p.PrefillOverheadMs = 5 }},
		{"zero-overhead", func(p *engine.Params) {}},
		{"small-batch", func(p *engine.Params) { p.MaxBatch = 3; p.PrefillOverheadMs = 1 }},
		{"kv-admission", func(p *engine.Params) { p.KVAdmission = true; p.KVCacheTokens = 400 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := engine.Params{PrefillTokensPerS: 2000, DecodeBaseMs: 20, DecodePerSeqMs: 0.5,
				MaxBatch: 16, KVCacheTokens: 4096, BlockTokens: 16, Replicas: 2}
			tc.edit(&p)
			firsts, dones := coreRun(t, p, 7, 3000)
			served, failed := 0, 0
			for _, d := range dones {
				got, ok := firsts[d.Tag]
				if d.Error != "" {
					failed++
					if ok {
						t.Errorf("request %d failed (%s) but got a first token", d.Tag, d.Error)
					}
					continue
				}
				served++
				if !ok || got != d.FirstTokenNs {
					t.Errorf("request %d: first token reported %d (seen %v), model says %d", d.Tag, got, ok, d.FirstTokenNs)
				}
			}
			if served+failed != 3000 || served < 2000 || failed == 0 {
				t.Fatalf("served %d failed %d of 3000: the workload does not exercise the core", served, failed)
			}
		})
	}
}

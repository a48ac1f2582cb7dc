package dataplane

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/ilb-router/ilb/solver/sched"
)

// benchPlane is a data plane with one cluster over 16 engines, one of
// them unavailable, and some load in flight so the spill check runs.
func benchPlane(b testing.TB) (*DataPlane, *cluster, []uint64) {
	return benchPlaneOf(b, testConfig("fe-a"))
}

// benchPlaneOf is benchPlane under the data plane config cfg.
func benchPlaneOf(b testing.TB, cfg Config) (*DataPlane, *cluster, []uint64) {
	d := newDP(b, cfg, Deps{})
	mustSet(b, d, snap("fe-a", 1, engineNames(16)))
	d.ObserveStatus(unhealthy("eng-03"))
	c, _ := d.cluster("fe-a")
	c.inflight.Store(64)
	for _, x := range c.cells {
		x.inflight.Store(4)
	}
	hashes := make([]uint64, 4096)
	for i := range hashes {
		hashes[i] = sched.HashKey("conversation-" + strconv.Itoa(i))
	}
	return d, c, hashes
}

// BenchmarkPickPath is the request path's pick in process: picker Load,
// conversation memory, shedding check, availability, spill check, the
// table pick and the counters. It must not allocate.
func BenchmarkPickPath(b *testing.B) {
	d, c, hashes := benchPlane(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		p := c.cur.Load()
		if _, _, err := d.decide(c, p, hashes[i&(len(hashes)-1)]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPickPathParallel is BenchmarkPickPath from every core at once.
func BenchmarkPickPathParallel(b *testing.B) {
	d, c, hashes := benchPlane(b)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			if _, _, err := d.decide(c, c.cur.Load(), hashes[i&(len(hashes)-1)]); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkHTTPPick is POST /v1/pick end to end in process: JSON in,
// guardrails, JSON out.
func BenchmarkHTTPPick(b *testing.B) {
	d, _, _ := benchPlane(b)
	h := d.Handler()
	bodies := make([]string, 1024)
	for i := range bodies {
		bodies[i] = `{"cluster":"fe-a","conversation_id":"conversation-` + strconv.Itoa(i) + `"}`
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		req, _ := http.NewRequest(http.MethodPost, "/v1/pick", strings.NewReader(bodies[i&1023]))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}

func TestPickPathDoesNotAllocate(t *testing.T) {
	d, c, hashes := benchPlane(t)
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		_, _, _ = d.decide(c, c.cur.Load(), hashes[i&(len(hashes)-1)])
		i++
	})
	if allocs != 0 {
		t.Fatalf("pick path allocates %v times per pick", allocs)
	}
}

// benchModelPlane is benchPlane's fleet serving two models: every engine
// serves "small", the even ones also "big"; a snapshot without classes,
// so each model's table is built from the top-level weights.
func benchModelPlane(b testing.TB) (*DataPlane, *cluster, []uint64) {
	cfg := testConfig("fe-a")
	cfg.EngineModels = map[string][]string{}
	for i, n := range sortedKeys(engineNames(16)) {
		cfg.EngineModels[n] = []string{"small"}
		if i%2 == 0 {
			cfg.EngineModels[n] = []string{"big", "small"}
		}
	}
	return benchPlaneOf(b, cfg)
}

var benchModels = [2]string{"big", "small"}

// BenchmarkPickPathModels is BenchmarkPickPath in a two-model fleet: the
// class lookup (model and estimated prompt length) comes first. It must
// not allocate either.
func BenchmarkPickPathModels(b *testing.B) {
	d, c, hashes := benchModelPlane(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		p, err := c.cur.Load().forRequest(benchModels[i&1], 200)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := d.decide(c, p, hashes[i&(len(hashes)-1)]); err != nil {
			b.Fatal(err)
		}
	}
}

func TestPickPathModelsDoesNotAllocate(t *testing.T) {
	d, c, hashes := benchModelPlane(t)
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		p, _ := c.cur.Load().forRequest(benchModels[i&1], 200)
		_, _, _ = d.decide(c, p, hashes[i&(len(hashes)-1)])
		i++
	})
	if allocs != 0 {
		t.Fatalf("pick path with models allocates %v times per pick", allocs)
	}
}

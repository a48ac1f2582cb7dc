package optimizer

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/fleetmodel"
	"github.com/ilb-router/ilb/solver/engine"
)

// simulate runs the shared engine model at a Poisson load (requests of
// prompt tokens, no cache reuse, output tokens each) and returns the mean
// TTFT and TBOT of the requests that finished.
func simulate(t testing.TB, fe schemas.FleetEngine, loadRPS float64, prompt, output, n int, seed uint64) (ttft, tbot float64) {
	t.Helper()
	// The engine as the backtester and engine simulator model it, with
	// its fleet scheduler, but without KV admission, which the prior
	// leaves out.
	p, err := fleetmodel.Params(&schemas.Fleet{BlockTokens: 512}, fe)
	if err != nil {
		t.Fatal(err)
	}
	p.KVAdmission = false
	e, err := engine.New(p)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	var out []engine.Done
	now := int64(0)
	var sumTTFT, sumTBOT float64
	count := 0
	warm := n / 5
	for i := range n {
		now += int64(rng.ExpFloat64() / loadRPS * 1e9)
		if err := e.Submit(now, engine.Request{ID: uint64(i), PromptTokens: prompt, OutputTokens: output, Tag: uint64(i)}); err != nil {
			t.Fatal(err)
		}
		out = e.Advance(now, out[:0])
		for _, d := range out {
			if d.Tag >= uint64(warm) {
				sumTTFT += d.TTFTMs
				sumTBOT += d.TBOTMs
				count++
			}
		}
	}
	return sumTTFT / float64(count), sumTBOT / float64(count)
}

// TestPriorMatchesEngineModel checks the cold-start prior against the
// shared engine model it approximates, on the example fleet's two SKUs:
// the capacity is where the simulated queue starts to diverge, and the
// latency curves stay close below it.
func TestPriorMatchesEngineModel(t *testing.T) {
	f := schemas.ExampleFleetOneModel()
	for _, name := range []string{"east-h100-0", "east-a100-0"} {
		fe, _ := f.Engine(name)
		p := PriorProfile(fe, 1000, 200)
		for _, rho := range []float64{0.2, 0.5, 0.7, 0.85, 0.95} {
			ttft, tbot := simulate(t, fe, rho*p.CapacityRps, 1000, 200, 20000, 1)
			predTTFT := p.TTFT.BaseMs + p.TTFT.QueueMs*rho/(1-rho)
			predTBOT := p.TBOT.BaseMs + p.TBOT.SlopeMs*rho
			if rho <= 0.85 && math.Abs(predTTFT/ttft-1) > 0.4 {
				t.Errorf("%s at ρ=%.2f: prior TTFT %.0f ms, engine model %.0f ms", name, rho, predTTFT, ttft)
			}
			if math.Abs(predTBOT/tbot-1) > 0.25 {
				t.Errorf("%s at ρ=%.2f: prior TBOT %.1f ms, engine model %.1f ms", name, rho, predTBOT, tbot)
			}
		}
		// Past the prior's capacity the simulated queue grows without bound.
		over, _ := simulate(t, fe, 1.15*p.CapacityRps, 1000, 200, 20000, 2)
		under, _ := simulate(t, fe, 0.9*p.CapacityRps, 1000, 200, 20000, 2)
		if !(over > 10*under) {
			t.Errorf("%s: mean TTFT %.0f ms at 1.15× the prior capacity vs %.0f ms at 0.9×: capacity too low", name, over, under)
		}
	}
}

// TestPriorExampleFleetSizing pins the prior to the sizing the example
// fleet's comments derive by hand (about 3.6 rps per H100, 1.9 per A100 at
// 1000-token prompts and 200 output tokens), and replicas scale capacity.
func TestPriorExampleFleetSizing(t *testing.T) {
	f := schemas.ExampleFleetOneModel()
	for _, c := range []struct {
		engine string
		want   float64
	}{{"east-h100-0", 3.6}, {"east-a100-0", 1.95}} {
		fe, _ := f.Engine(c.engine)
		got := PriorProfile(fe, 1000, 200).CapacityRps
		if math.Abs(got-c.want) > 0.05 {
			t.Errorf("%s: prior capacity %.3f rps, want about %.2f", c.engine, got, c.want)
		}
		fe.Replicas = 3
		if got3 := PriorProfile(fe, 1000, 200).CapacityRps; math.Abs(got3-3*got) > 1e-9 {
			t.Errorf("%s: 3 replicas give %.3f rps, want 3 × %.3f", c.engine, got3, got)
		}
	}
}

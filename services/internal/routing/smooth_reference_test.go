package routing

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// smoothReference is Smooth as it was before it merged the two splits in
// name order (a map summed in sortedKeys order, then Normalize).
func smoothReference(cfg SmoothConfig, prev map[string]float64, prevShed float64, next map[string]float64, nextShed float64,
	usable func(engine string) bool, dt time.Duration, reuse float64) (map[string]float64, float64) {
	if len(prev) == 0 || prevShed >= 1 {
		return next, nextShed
	}
	if nextShed >= 1 || len(next) == 0 {
		// The published split, the shed fraction moving toward 1.
		as := smoothStep(dt, cfg.Shed)
		kept := 0.0
		for _, e := range sortedKeys(prev) {
			if usable(e) {
				kept += prev[e]
			}
		}
		if as == 1 || kept <= 0 {
			return next, nextShed
		}
		out := map[string]float64{}
		for _, e := range sortedKeys(prev) {
			if usable(e) {
				out[e] = prev[e] / kept
			}
		}
		return Normalize(out, prevShed+as*(1-prevShed))
	}
	aw, as := smoothStep(dt, cfg.Weights), smoothStep(dt, cfg.Shed)
	calm := !(prevShed >= MinShed) && !(nextShed >= MinShed)
	if calm {
		aw, as = smoothStep(dt, calmTau(cfg, reuse)), 1
	}
	if aw == 1 && as == 1 {
		return next, nextShed
	}
	names := sortedKeys(prev)
	kept := 0.0
	for _, e := range names {
		if usable(e) {
			kept += prev[e]
		}
	}
	if kept <= 0 {
		return next, nextShed
	}
	out := make(map[string]float64, len(prev)+len(next))
	for _, e := range names {
		if usable(e) {
			out[e] = (1 - aw) * prev[e] / kept
		}
	}
	served := 1 - nextShed
	for _, e := range sortedKeys(next) {
		out[e] += aw * next[e] / served
	}
	if calm {
		return Normalize(out, 0)
	}
	shed := prevShed + as*(nextShed-prevShed)
	if !(nextShed >= MinShed) && shed < SmoothShedFloor {
		return next, nextShed
	}
	return Normalize(out, shed)
}

// Smooth gives the reference's weights and shed bit for bit on random
// splits: engines in one, the other or both, some unusable, weights under
// the floor, calm and shedding rows.
func TestSmoothIsReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	split := func(n int) map[string]float64 {
		w := map[string]float64{}
		for range n {
			v := rng.Float64()
			if rng.IntN(6) == 0 {
				v *= WeightFloor
			}
			w[fmt.Sprintf("e%02d", rng.IntN(20))] = v
		}
		return w
	}
	sheds := []float64{0, 0, MinShed / 2, 0.002, 0.05, 0.3, 1}
	for i := range 2000 {
		prev, next := split(1+rng.IntN(12)), split(1+rng.IntN(12))
		prevShed, nextShed := sheds[rng.IntN(len(sheds))], sheds[rng.IntN(len(sheds))]
		if nextShed == 1 && rng.IntN(2) == 0 {
			next = map[string]float64{} // a solution that serves the row nowhere
		}
		bad := rng.IntN(20)
		usable := func(e string) bool { return e != fmt.Sprintf("e%02d", bad) }
		dt, reuse := time.Duration(1+rng.IntN(60))*time.Second, []float64{0, 0.05, 0.2}[i%3]
		cfg := DefaultSmoothConfig()
		gotW, gotS := Smooth(cfg, prev, prevShed, next, nextShed, usable, dt, reuse)
		wantW, wantS := smoothReference(cfg, prev, prevShed, next, nextShed, usable, dt, reuse)
		if math.Float64bits(gotS) != math.Float64bits(wantS) || len(gotW) != len(wantW) {
			t.Fatalf("case %d: shed %v, %d weights; reference %v, %d", i, gotS, len(gotW), wantS, len(wantW))
		}
		for e, w := range wantW {
			if g, ok := gotW[e]; !ok || math.Float64bits(g) != math.Float64bits(w) {
				t.Fatalf("case %d: %s weight %v, reference %v", i, e, g, w)
			}
		}
	}
}

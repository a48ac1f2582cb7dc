package prior

import (
	"math"
	"testing"
)

// TestShapeEstimateAlphas: after the first interval (taken as it is) each
// interval moves the prompt, its cached share and second moment by Alpha
// and the answer by OutputAlpha, or by Alpha when OutputAlpha is 0; an
// interval without completions leaves the estimate as it was.
func TestShapeEstimateAlphas(t *testing.T) {
	for _, c := range []struct {
		alpha, outputAlpha, wantOutputWeight float64
	}{
		{0.7, 0.4, 0.4},
		{0.7, 0, 0.7},
		{0.2, 1, 1},
	} {
		se := ShapeEstimate{Alpha: c.alpha, OutputAlpha: c.outputAlpha, Fallback: Shape{PromptTokens: 1, OutputTokens: 1}}
		se.Observe(2, 2*8000, 2*2000, 2*300, 2*6000*6000)
		se.Roll()
		if got := se.Get(); got != (Shape{PromptTokens: 8000, CachedFraction: 0.25, OutputTokens: 300, UncachedSq: 6000 * 6000}) {
			t.Fatalf("%+v: first interval %+v, want it as observed", c, got)
		}
		se.Roll() // nothing observed: unchanged
		se.Observe(1, 2000, 1000, 100, 1000*1000)
		se.Roll()
		got, a, ao := se.Get(), c.alpha, c.wantOutputWeight
		want := Shape{PromptTokens: a*2000 + (1-a)*8000, CachedFraction: a*0.5 + (1-a)*0.25,
			OutputTokens: ao*100 + (1-ao)*300, UncachedSq: a*1000*1000 + (1-a)*6000*6000}
		for _, d := range [][3]float64{{got.PromptTokens, want.PromptTokens, 1e-9}, {got.CachedFraction, want.CachedFraction, 1e-12},
			{got.OutputTokens, want.OutputTokens, 1e-9}, {got.UncachedSq, want.UncachedSq, 1e-3}} {
			if math.Abs(d[0]-d[1]) > d[2] {
				t.Errorf("%+v: after the second interval %+v, want %+v", c, got, want)
				break
			}
		}
	}
}

package regress

import (
	"math/rand/v2"
	"testing"
)

// refFitLine is fitLine as it was before its sums over y were shared
// between the capacity search's fits: the reference the faster one must
// match bit for bit.
func refFitLine(x, y, w []float64) line {
	var sw, mx, my float64
	for i := range x {
		sw += w[i]
		mx += w[i] * x[i]
		my += w[i] * y[i]
	}
	mx /= sw
	my /= sw
	var sxx, sxy, syy, x2, xy float64
	for i := range x {
		dx, dy := x[i]-mx, y[i]-my
		sxx += w[i] * dx * dx
		sxy += w[i] * dx * dy
		syy += w[i] * dy * dy
		x2 += w[i] * x[i] * x[i]
		xy += w[i] * x[i] * y[i]
	}
	l := line{a: my, sst: syy}
	if sxx > 0 {
		l.b = sxy / sxx
		l.a = my - l.b*mx
	}
	if l.b < 0 || l.a < 0 {
		l = bestOnBoundary(x, y, w, my, x2, xy, syy)
	}
	l.sse = sse(x, y, w, l.a, l.b)
	return l
}

// The capacity search's fits (ttftLine) and fitLine give exactly what the
// reference gives, on random weighted data with every sign of slope.
func TestFitLineMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 300 {
		n := 3 + r.IntN(500)
		pts := make([]Point, n)
		for i := range pts {
			load := 1 + 100*r.Float64()
			pts[i] = Point{LoadRPS: load, TTFTMs: 200 + (float64(trial%3)-1)*load*r.Float64() + 50*r.Float64(),
				TBOTMs: 20 + r.Float64(), Weight: float64(r.IntN(3))}
		}
		d, err := prepare(pts, Config{MinSamples: 3, MinLoadSpread: 0, TTFTSLOMs: 1000, MaxCapacityFactor: 20, MinTTFTR2: 0})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []float64{1.001, 1.5, 3, 19} {
			c := d.maxLoad * f
			got := d.ttftLine(c)
			want := refFitLine(d.x, d.ttft, d.w) // d.x holds λ/(c−λ) now
			if got != want {
				t.Fatalf("trial %d capacity %v: ttftLine %+v, reference %+v", trial, c, got, want)
			}
			if got := fitLine(d.x, d.tbot, d.w); got != refFitLine(d.x, d.tbot, d.w) {
				t.Fatalf("trial %d: fitLine differs from the reference", trial)
			}
		}
	}
}

package regress

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// refSearchCapacity is searchCapacity as it was before estimates stood in
// for exact fits: every grid point and golden-section probe fitted
// exactly. The faster search must return the same capacity bit for bit.
func (d *data) refSearchCapacity(factor float64) (float64, error) {
	sLo, sHi := math.Log(minHeadroom), math.Log(factor-1)
	capacity := func(s float64) float64 { return d.maxLoad * (1 + math.Exp(s)) }
	sse := func(s float64) float64 { return d.ttftLine(capacity(s)).sse }
	step := (sHi - sLo) / (gridPoints - 1)
	best, bi := math.Inf(1), 0
	for i := range gridPoints {
		if v := sse(sLo + float64(i)*step); v < best {
			best, bi = v, i
		}
	}
	if bi == gridPoints-1 || math.IsInf(best, 1) || math.IsNaN(best) {
		return capacity(sHi), ErrNoSaturation
	}
	s := refGolden(sse, sLo+float64(max(bi-1, 0))*step, sLo+float64(bi+1)*step)
	if sse(s) > best {
		s = sLo + float64(bi)*step
	}
	c := capacity(s)
	if d.ttftLine(c).b == 0 {
		return c, ErrNoSaturation
	}
	return c, nil
}

func refGolden(f func(float64) float64, a, b float64) float64 {
	const r = 0.6180339887498949
	x1, x2 := b-r*(b-a), a+r*(b-a)
	f1, f2 := f(x1), f(x2)
	for range goldenRounds {
		pa, pb, p1, p2 := a, b, x1, x2
		if f1 <= f2 {
			b, x2, f2 = x2, x1, f1
			x1 = b - r*(b-a)
			f1 = f(x1)
		} else {
			a, x1, f1 = x1, x2, f2
			x2 = a + r*(b-a)
			f2 = f(x2)
		}
		if a == pa && b == pb && x1 == p1 && x2 == p2 {
			break
		}
	}
	if f1 <= f2 {
		return x1
	}
	return x2
}

// searchCases are windows with loads counted over a window (few distinct
// loads: the estimates decide most comparisons) and with continuous loads
// (no groups), noisy and noise-free, saturating and not, pooled engines
// with a second curve, near-flat and falling TTFT.
func searchCases() [][]Point {
	r := rand.New(rand.NewPCG(5, 6))
	var cases [][]Point
	for trial := range 400 {
		tr := truth{base: 50 + 400*r.Float64(), queue: 5 + 100*r.Float64(), capacity: 0.5 + 50*r.Float64(),
			tbotBase: 20, tbotSlope: 10}
		n := 8 + r.IntN(1000)
		hi := 0.3 + 0.69*r.Float64()
		pts := simulate(tr, n, 0.01, hi, []float64{0, 0.01, 0.1, 0.5}[trial%4], uint64(trial))
		if trial%5 != 4 { // counted loads: arrivals over a 5 s window
			for i := range pts {
				pts[i].LoadRPS = math.Round(pts[i].LoadRPS*5) / 5
			}
		}
		if trial%7 == 3 { // a pooled second engine with another curve
			other := simulate(truth{tr.base * 1.3, tr.queue * 0.7, tr.capacity * 1.2, 20, 10}, n/2, 0.01, hi, 0.1, uint64(trial+1000))
			for i := range other {
				other[i].LoadRPS = math.Round(other[i].LoadRPS*5) / 5
			}
			pts = append(pts, other...)
		}
		if trial%11 == 5 { // flat TTFT: no saturation
			for i := range pts {
				pts[i].TTFTMs = 100 + r.Float64()
			}
		}
		if trial%13 == 7 { // TTFT falling with load: flat fits
			for i := range pts {
				pts[i].TTFTMs = 500 - 3*pts[i].LoadRPS + 10*r.Float64()
			}
		}
		if trial%3 == 0 {
			for i := range pts {
				pts[i].Weight = 0
			}
		}
		cases = append(cases, pts)
	}
	return cases
}

// The search with estimates returns what the exhaustive search returns,
// bit for bit, and refuses the same inputs.
func TestSearchMatchesReference(t *testing.T) {
	cfg := Config{MinSamples: 3, MinLoadSpread: 0, TTFTSLOMs: 1000, MaxCapacityFactor: 20, MinTTFTR2: 0}
	grouped := 0
	for i, pts := range searchCases() {
		d, err := prepare(pts, cfg)
		if err != nil {
			continue
		}
		if d.groups.of != nil {
			grouped++
		}
		want, wantErr := d.refSearchCapacity(cfg.MaxCapacityFactor)
		got, gotErr := d.searchCapacity(cfg.MaxCapacityFactor, 0)
		if math.Float64bits(got) != math.Float64bits(want) || errors.Is(gotErr, ErrNoSaturation) != (wantErr != nil) {
			t.Fatalf("case %d (%d points, grouped %v): capacity %v (%v), reference %v (%v)",
				i, len(pts), d.groups.of != nil, got, gotErr, want, wantErr)
		}
	}
	if grouped < 200 {
		t.Errorf("only %d cases grouped", grouped)
	}
}

// BenchmarkFitCounted fits windows whose loads are counts over 5 s (few
// distinct loads, as the backtester's and the aggregator's are).
func BenchmarkFitCounted(b *testing.B) {
	for _, n := range []int{120, 960} {
		b.Run(fmt.Sprintf("windows=%d", n), func(b *testing.B) {
			pts := simulate(truth{150, 40, 10, 20, 15}, n, 0.05, 0.95, 0.05, 11)
			for i := range pts {
				pts[i].LoadRPS = math.Round(pts[i].LoadRPS*5) / 5
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Fit(pts, DefaultConfig()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A Fitter fits what Fit fits, bit for bit, and refuses the same inputs,
// whatever it fitted before: its working memory carries over from fits
// with and without groups, of more and of fewer points.
func TestFitterIsFit(t *testing.T) {
	cfg := Config{MinSamples: 3, MinLoadSpread: 0, TTFTSLOMs: 1000, MaxCapacityFactor: 20, MinTTFTR2: 0}
	var f Fitter
	for i, pts := range searchCases() {
		want, wantErr := Fit(pts, cfg)
		got, gotErr := f.Fit(pts, cfg)
		if fmt.Sprintf("%#v %v", got, gotErr) != fmt.Sprintf("%#v %v", want, wantErr) {
			t.Fatalf("case %d (%d points): Fitter %+v (%v), Fit %+v (%v)", i, len(pts), got, gotErr, want, wantErr)
		}
	}
	// Once grown, a successful fit allocates nothing.
	pts := simulate(truth{150, 40, 10, 20, 15}, 960, 0.05, 0.95, 0.05, 11)
	for i := range pts {
		pts[i].LoadRPS = math.Round(pts[i].LoadRPS*5) / 5
	}
	if _, err := f.Fit(pts, DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(5, func() { f.Fit(pts, DefaultConfig()) }); allocs != 0 {
		t.Errorf("%v allocations a fit, want 0", allocs)
	}
}

// With Config.MinHeadroom, Fit refuses (ErrNoHeadroom) only fits whose
// capacity lies below MinHeadroom × the largest load, and fits every other
// input as it does without the option, bit for bit.
func TestMinHeadroomRefusesOnlyPinned(t *testing.T) {
	cfg := Config{MinSamples: 3, MinLoadSpread: 0, TTFTSLOMs: 1000, MaxCapacityFactor: 20, MinTTFTR2: 0}
	var plain, pinned Fitter
	for _, headroom := range []float64{1.05, 1.5, 4} {
		refused := 0
		with := cfg
		with.MinHeadroom = headroom
		for i, pts := range searchCases() {
			want, wantErr := plain.Fit(pts, cfg)
			got, gotErr := pinned.Fit(pts, with)
			if errors.Is(gotErr, ErrNoHeadroom) {
				refused++
				if !(want.CapacityRPS < headroom*want.LoadMaxRPS) {
					t.Fatalf("headroom %v, case %d: refused, but the fit's capacity is %v rps over loads up to %v",
						headroom, i, want.CapacityRPS, want.LoadMaxRPS)
				}
				continue
			}
			if fmt.Sprintf("%#v %v", got, gotErr) != fmt.Sprintf("%#v %v", want, wantErr) {
				t.Fatalf("headroom %v, case %d: %+v (%v), without the option %+v (%v)", headroom, i, got, gotErr, want, wantErr)
			}
		}
		t.Logf("headroom %v: %d of 400 refused", headroom, refused)
		if refused == 0 {
			t.Errorf("headroom %v: no case refused", headroom)
		}
	}
}

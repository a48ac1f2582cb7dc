package regress

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// truth is a profile to simulate from.
type truth struct {
	base, queue, capacity, tbotBase, tbotSlope float64
}

// simulate draws n windows with loads uniform in [lo, hi] x capacity and
// multiplicative lognormal noise of relative size noise on both latencies.
func simulate(tr truth, n int, lo, hi, noise float64, seed uint64) []Point {
	r := rand.New(rand.NewPCG(seed, 1))
	pts := make([]Point, n)
	for i := range pts {
		l := tr.capacity * (lo + (hi-lo)*r.Float64())
		rho := l / tr.capacity
		pts[i] = Point{
			LoadRPS: l,
			TTFTMs:  (tr.base + tr.queue*rho/(1-rho)) * math.Exp(noise*r.NormFloat64()),
			TBOTMs:  (tr.tbotBase + tr.tbotSlope*rho) * math.Exp(noise*r.NormFloat64()),
			Weight:  float64(50 + r.IntN(100)),
		}
	}
	return pts
}

func within(t *testing.T, name string, got, want, rel float64) {
	t.Helper()
	if math.Abs(got-want) > rel*math.Abs(want) {
		t.Errorf("%s = %.6g, want %.6g within %.1f%%", name, got, want, 100*rel)
	}
}

// tolerances are relative errors allowed on each parameter.
type tolerances struct{ capacity, base, queue, tbotBase, tbotSlope float64 }

// TestFitRecoversKnownParameters fits 20 simulated data sets per case (200
// windows, 3% multiplicative noise). The tolerances sit just above the
// worst errors seen over 100 seeds.
func TestFitRecoversKnownParameters(t *testing.T) {
	for _, c := range []struct {
		name   string
		tr     truth
		lo, hi float64
		tol    tolerances
	}{
		// DESIGN.md's example engine.
		{"design-example", truth{150, 40, 100, 20, 15}, 0.05, 0.95, tolerances{0.01, 0.02, 0.08, 0.02, 0.05}},
		// A 70B model on 2 GPUs: slow prefill, saturates at 2 rps.
		{"70b-slow", truth{400, 60, 2, 30, 60}, 0.05, 0.97, tolerances{0.01, 0.02, 0.08, 0.03, 0.03}},
		// Light load only, up to 70% of capacity: the curvature that pins
		// the capacity is weak, and capacity trades off against the queue
		// term; the predictions over the range seen stay within 3%.
		{"light-load", truth{50, 10, 40, 25, 5}, 0.02, 0.7, tolerances{0.15, 0.02, 0.40, 0.02, 0.30}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 20; seed++ {
				p, err := Fit(simulate(c.tr, 200, c.lo, c.hi, 0.03, seed), DefaultConfig())
				if err != nil {
					t.Fatalf("seed %d: Fit: %v", seed, err)
				}
				within(t, "capacity", p.CapacityRPS, c.tr.capacity, c.tol.capacity)
				within(t, "ttft base", p.TTFTBaseMs, c.tr.base, c.tol.base)
				within(t, "ttft queue", p.TTFTQueueMs, c.tr.queue, c.tol.queue)
				within(t, "tbot base", p.TBOTBaseMs, c.tr.tbotBase, c.tol.tbotBase)
				within(t, "tbot slope", p.TBOTSlopeMs, c.tr.tbotSlope, c.tol.tbotSlope)
				// What the optimizer uses: predictions across the range seen.
				for _, rho := range []float64{0.2, 0.5, c.hi * 0.95} {
					want := c.tr.base + c.tr.queue*rho/(1-rho)
					within(t, "predicted TTFT", p.TTFTMs(rho*c.tr.capacity), want, 0.03)
				}
				if p.TTFTR2 < 0.85 || p.Samples != 200 {
					t.Errorf("seed %d: R² %.3f, samples %d", seed, p.TTFTR2, p.Samples)
				}
				if t.Failed() {
					t.Fatalf("seed %d: %+v", seed, p)
				}
			}
		})
	}
}

func TestFitNoiseFreeIsExact(t *testing.T) {
	tr := truth{150, 40, 100, 20, 15}
	p, err := Fit(simulate(tr, 30, 0.1, 0.9, 0, 1), DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct {
		name      string
		got, want float64
	}{
		{"capacity", p.CapacityRPS, 100}, {"base", p.TTFTBaseMs, 150}, {"queue", p.TTFTQueueMs, 40},
		{"tbot base", p.TBOTBaseMs, 20}, {"tbot slope", p.TBOTSlopeMs, 15},
	} {
		within(t, v.name, v.got, v.want, 1e-6)
	}
	if p.TTFTR2 < 1-1e-9 || p.TBOTR2 < 1-1e-9 {
		t.Errorf("R² %v %v on noise-free data", p.TTFTR2, p.TBOTR2)
	}
	// SLO 1000 ms: 150 + 40 r = 1000 -> r = 21.25, ρ = r/(1+r).
	within(t, "SLO capacity", p.SLOCapacityRPS, 100*21.25/22.25, 1e-6)
	within(t, "max utilization", p.MaxUtilization(), 21.25/22.25, 1e-6)
}

func TestFitIsDeterministic(t *testing.T) {
	pts := simulate(truth{150, 40, 100, 20, 15}, 100, 0.1, 0.9, 0.05, 3)
	a, errA := Fit(pts, DefaultConfig())
	b, errB := Fit(pts, DefaultConfig())
	if a != b || errA != nil || errB != nil {
		t.Errorf("two fits differ: %+v / %+v (%v, %v)", a, b, errA, errB)
	}
}

func TestWeightIsRepetition(t *testing.T) {
	pts := simulate(truth{150, 40, 100, 20, 15}, 40, 0.1, 0.9, 0.05, 4)
	for i := range pts {
		pts[i].Weight = 1
	}
	weighted := append([]Point{}, pts...)
	weighted[3].Weight = 3
	repeated := append(append([]Point{}, pts...), pts[3], pts[3])
	a, errA := Fit(weighted, DefaultConfig())
	b, errB := Fit(repeated, DefaultConfig())
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	within(t, "capacity", a.CapacityRPS, b.CapacityRPS, 1e-9)
	within(t, "queue", a.TTFTQueueMs, b.TTFTQueueMs, 1e-9)
	unweighted := append([]Point{}, pts...)
	for i := range unweighted {
		unweighted[i].Weight = 0 // 0 counts as 1
	}
	c, _ := Fit(unweighted, DefaultConfig())
	d, _ := Fit(pts, DefaultConfig())
	if c != d {
		t.Errorf("weight 0 and weight 1 differ: %+v / %+v", c, d)
	}
}

func TestFitRefuses(t *testing.T) {
	good := simulate(truth{150, 40, 100, 20, 15}, 50, 0.1, 0.9, 0.03, 5)
	linear := make([]Point, 30)
	flat := make([]Point, 30)
	noise := make([]Point, 30)
	falling := make([]Point, 30)
	r := rand.New(rand.NewPCG(9, 9))
	for i := range linear {
		l := float64(i + 1)
		linear[i] = Point{LoadRPS: l, TTFTMs: 50 + 2*l, TBOTMs: 20}
		flat[i] = Point{LoadRPS: l, TTFTMs: 80, TBOTMs: 20}
		noise[i] = Point{LoadRPS: l, TTFTMs: 80 + r.NormFloat64(), TBOTMs: 20}
		falling[i] = Point{LoadRPS: l, TTFTMs: 200 - 3*l, TBOTMs: 20}
	}
	with := func(i int, set func(*Point)) []Point {
		p := append([]Point{}, good...)
		set(&p[i])
		return p
	}
	for _, c := range []struct {
		name string
		pts  []Point
		cfg  func(*Config)
		want error
	}{
		{"too few", good[:7], nil, ErrTooFewSamples},
		{"none", nil, nil, ErrTooFewSamples},
		{"same load", sameLoad(good), nil, ErrNarrowRange},
		{"narrow", simulate(truth{150, 40, 100, 20, 15}, 50, 0.5, 0.55, 0.03, 6), nil, ErrNarrowRange},
		{"linear", linear, nil, ErrNoSaturation},
		{"flat", flat, nil, ErrNoSaturation},
		// Noise alone: a spurious curve through it explains little.
		{"noise", noise, nil, ErrPoorFit},
		{"falling", falling, nil, ErrNoSaturation},
		{"noisy", simulate(truth{150, 40, 100, 20, 15}, 50, 0.05, 0.6, 0.6, 8), nil, ErrPoorFit},
		{"NaN load", with(3, func(p *Point) { p.LoadRPS = math.NaN() }), nil, ErrInvalidPoint},
		{"Inf TTFT", with(3, func(p *Point) { p.TTFTMs = math.Inf(1) }), nil, ErrInvalidPoint},
		{"negative TBOT", with(3, func(p *Point) { p.TBOTMs = -1 }), nil, ErrInvalidPoint},
		{"NaN weight", with(3, func(p *Point) { p.Weight = math.NaN() }), nil, ErrInvalidPoint},
		{"bad config", good, func(c *Config) { c.MinSamples = 1 }, ErrConfig},
		{"bad SLO", good, func(c *Config) { c.TTFTSLOMs = math.NaN() }, ErrConfig},
		{"bad factor", good, func(c *Config) { c.MaxCapacityFactor = 1 }, ErrConfig},
		{"bad headroom", good, func(c *Config) { c.MinHeadroom = 1 }, ErrConfig},
		{"headroom above the factor", good, func(c *Config) { c.MinHeadroom = 30 }, ErrConfig},
		{"bad spread", good, func(c *Config) { c.MinLoadSpread = 1 }, ErrConfig},
		{"bad R²", good, func(c *Config) { c.MinTTFTR2 = 2 }, ErrConfig},
	} {
		cfg := DefaultConfig()
		if c.cfg != nil {
			c.cfg(&cfg)
		}
		p, err := Fit(c.pts, cfg)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: Fit = %+v, %v; want %v", c.name, p, err, c.want)
		}
	}
}

func sameLoad(pts []Point) []Point {
	out := append([]Point{}, pts...)
	for i := range out {
		out[i].LoadRPS = 42
	}
	return out
}

func TestFitCapacity(t *testing.T) {
	tr := truth{150, 40, 100, 20, 15}
	pts := simulate(tr, 100, 0.1, 0.9, 0.03, 10)
	p, err := FitCapacity(pts, 100, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	within(t, "base", p.TTFTBaseMs, 150, 0.03)
	within(t, "queue", p.TTFTQueueMs, 40, 0.05)
	if p.CapacityRPS != 100 {
		t.Errorf("capacity %v changed", p.CapacityRPS)
	}
	for _, c := range []float64{0, 50, maxLoad(pts), math.Inf(1), math.NaN()} {
		if _, err := FitCapacity(pts, c, DefaultConfig()); !errors.Is(err, ErrCapacity) {
			t.Errorf("capacity %v: %v, want ErrCapacity", c, err)
		}
	}
}

func maxLoad(pts []Point) float64 {
	m := 0.0
	for _, p := range pts {
		m = max(m, p.LoadRPS)
	}
	return m
}

func TestProfilePredictions(t *testing.T) {
	p := Profile{TTFTBaseMs: 100, TTFTQueueMs: 50, TBOTBaseMs: 20, TBOTSlopeMs: 10, CapacityRPS: 10, SLOCapacityRPS: 8}
	if got := p.TTFTMs(5); got != 150 {
		t.Errorf("TTFT at ρ=0.5 = %v, want 150", got)
	}
	if got := p.TTFTMs(10); !math.IsInf(got, 1) {
		t.Errorf("TTFT at capacity = %v, want +Inf", got)
	}
	if got := p.TBOTMs(5); got != 25 {
		t.Errorf("TBOT at ρ=0.5 = %v, want 25", got)
	}
	if got := p.MaxUtilization(); got != 0.8 {
		t.Errorf("MaxUtilization = %v, want 0.8", got)
	}
	if got := (Profile{}).MaxUtilization(); got != 0 {
		t.Errorf("zero profile MaxUtilization = %v", got)
	}
	if got := sloCapacity(Profile{TTFTBaseMs: 2000, TTFTQueueMs: 1, CapacityRPS: 5}, 1000); got != 0 {
		t.Errorf("SLO below base: SLO capacity %v, want 0", got)
	}
}

// FuzzFit: any input gives a profile or an error, never a panic, and an
// accepted profile is finite, non-negative, and saturates above every load.
func FuzzFit(f *testing.F) {
	seed := func(pts []Point) []byte {
		var b []byte
		for _, p := range pts {
			for _, v := range []float64{p.LoadRPS, p.TTFTMs, p.TBOTMs, p.Weight} {
				b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
			}
		}
		return b
	}
	f.Add(seed(simulate(truth{150, 40, 100, 20, 15}, 10, 0.1, 0.9, 0.03, 1)))
	f.Add(seed(simulate(truth{400, 60, 2, 30, 60}, 12, 0.05, 0.97, 0.1, 2)))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		var pts []Point
		for len(b) >= 32 {
			v := func(i int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])) }
			pts = append(pts, Point{LoadRPS: v(0), TTFTMs: v(1), TBOTMs: v(2), Weight: v(3)})
			b = b[32:]
		}
		cfg := DefaultConfig()
		cfg.MinSamples = 3
		p, err := Fit(pts, cfg)
		if err != nil {
			return
		}
		for _, v := range []float64{p.TTFTBaseMs, p.TTFTQueueMs, p.TBOTBaseMs, p.TBOTSlopeMs, p.SLOCapacityRPS} {
			if !(v >= 0) || math.IsInf(v, 1) {
				t.Fatalf("accepted profile with %v: %+v", v, p)
			}
		}
		if !(p.CapacityRPS > p.LoadMaxRPS) || p.TTFTR2 > 1+1e-9 || p.SLOCapacityRPS > p.CapacityRPS {
			t.Fatalf("accepted profile %+v", p)
		}
	})
}

func BenchmarkFit(b *testing.B) {
	for _, n := range []int{30, 360, 3000} { // 5 minutes, 1 hour, 8 hours of 10 s windows
		b.Run(fmt.Sprintf("windows=%d", n), func(b *testing.B) {
			pts := simulate(truth{150, 40, 100, 20, 15}, n, 0.05, 0.95, 0.05, 11)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Fit(pts, DefaultConfig()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "windows/s")
		})
	}
}

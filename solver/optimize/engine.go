package optimize

import (
	"math"
	"slices"
)

// engineCost is one engine's cost F(λ) = λ·L(λ) in rps·ms, where L is the
// per-request latency of DESIGN.md at load λ:
//
//	L(λ) = a + b·ρ/(1−ρ) + c·ρ,  ρ = λ/k,
//	a = ttft.base_ms + T·tbot.base_ms,  b = ttft.queue_ms,  c = T·tbot.slope_ms,
//
// with T the mean output tokens. F is convex and increasing on [0, u], the
// engine's load cap u = max_utilization·k < k, or Engine.MaxLoadRps if
// lower:
//
//	F'(λ)  = a + b·((1−ρ)⁻² − 1) + 2c·ρ
//	F''(λ) = (2b·(1−ρ)⁻³ + 2c) / k
type engineCost struct {
	a, b, c float64 // ms
	k       float64 // capacity, rps
	u       float64 // load cap, rps
	d1u     float64 // F'(u), ms
}

func newEngineCost(e Engine, meanOutputTokens, maxUtilization float64) engineCost {
	f := engineCost{
		a: e.TTFT.BaseMs + meanOutputTokens*e.TBOT.BaseMs,
		b: e.TTFT.QueueMs,
		c: meanOutputTokens * e.TBOT.SlopeMs,
		k: e.CapacityRps,
		u: e.LoadCap(maxUtilization),
	}
	f.d1u, _ = f.marginal(f.u)
	return f
}

// latency is L(λ), the per-request latency in ms; +Inf at or beyond
// capacity.
func (f *engineCost) latency(l float64) float64 {
	if l <= 0 || f.k == 0 {
		return f.a
	}
	r := l / f.k
	if r >= 1 {
		return math.Inf(1)
	}
	return f.a + f.b*r/(1-r) + f.c*r
}

// cost is F(λ) = λ·L(λ).
func (f *engineCost) cost(l float64) float64 {
	if l <= 0 {
		return 0
	}
	return l * f.latency(l)
}

// marginal returns F'(λ) and F”(λ).
func (f *engineCost) marginal(l float64) (d1, d2 float64) {
	if f.k == 0 {
		return f.a, 0
	}
	r := l / f.k
	q := 1 / (1 - r)
	return f.a + f.b*(q*q-1) + 2*f.c*r, (2*f.b*q*q*q + 2*f.c) / f.k
}

// loadAtPrice returns the load λ in [0, u] at which F'(λ) = v, clipped:
// 0 when v ≤ F'(0), u when v ≥ F'(u). It is the maximiser of v·λ − F(λ).
func (f *engineCost) loadAtPrice(v float64) float64 { return f.loadAtPriceFrom(v, f.u/2) }

// loadAtPriceFrom is loadAtPrice with Newton's method started at warm.
func (f *engineCost) loadAtPriceFrom(v, warm float64) float64 {
	if v <= f.a || f.u == 0 {
		return 0
	}
	if v >= f.d1u {
		return f.u
	}
	lo, hi, l := 0.0, f.u, warm
	if !(l > lo && l < hi) {
		l = f.u / 2
	}
	for range 100 {
		// marginal's F' and F'', F'' only once the root is not reached
		// (most calls end at the second or third point; the same
		// arithmetic, so the same bits)
		r := l / f.k
		q := 1 / (1 - r)
		g := f.a + f.b*(q*q-1) + 2*f.c*r - v
		if math.Abs(g) <= 1e-15*v {
			break
		}
		if g > 0 {
			hi = l
		} else {
			lo = l
		}
		d2 := (2*f.b*q*q*q + 2*f.c) / f.k
		next := l - g/d2
		if !(next > lo && next < hi) {
			next = lo + (hi-lo)/2
		}
		if next == l || hi-lo <= 1e-15*f.u {
			break
		}
		l = next
	}
	return l
}

// conjugate is F*(v) = max over 0 ≤ λ ≤ u of v·λ − F(λ).
func (f *engineCost) conjugate(v float64) float64 {
	l := f.loadAtPrice(v)
	return max(0, v*l-f.cost(l))
}

// engineArc is one cluster's arc into the engine being solved: it receives
// x = w·max(0, b − μ) at engine price μ, where b = π − n + δ·y and w = 1/δ.
type engineArc struct{ b, w float64 }

// solveEngine finds the engine's load λ and price μ given its arcs: the λ in
// [0, u] with Σ w·max(0, b − μ) = λ, μ = F'(λ) below the cap and μ ≥ F'(u)
// at it. warm is a starting guess for λ. When nothing flows, μ = F'(0).
func (f *engineCost) solveEngine(arcs []engineArc, warm float64) (l, mu float64) {
	if f.u == 0 || !anyAbove(arcs, f.a) {
		return 0, f.a
	}
	if supply(arcs, f.d1u) >= f.u {
		return f.u, priceForSupply(arcs, f.d1u, f.u)
	}
	return f.interiorLoad(arcs, warm)
}

// anyAbove reports whether some arc's b is above v: whether the largest
// b is, without the pass over the rest once one is.
func anyAbove(arcs []engineArc, v float64) bool {
	for _, a := range arcs {
		if a.b > v {
			return true
		}
	}
	return false
}

// interiorLoad solves Σ w·max(0, b − F'(λ)) = λ for λ in (0, u) by Newton's
// method safeguarded with bisection; the left side falls as λ grows.
func (f *engineCost) interiorLoad(arcs []engineArc, warm float64) (l, mu float64) {
	lo, hi := 0.0, f.u
	l = warm
	if !(l > lo && l < hi) {
		l = hi / 2
	}
	for range 200 {
		d1, d2 := f.marginal(l)
		s, slope, mag := supplySlopeMag(arcs, d1)
		g := s - l
		// Stop once g is within its rounding error: s sums differences
		// b − μ, each off by about ε·(|b| + |μ|) times its w.
		if math.Abs(g) <= 1e-15*l {
			return l, d1
		}
		if math.Abs(g) <= 8*epsilon*(mag+slope*math.Abs(d1)+l) {
			// One more Newton step, without the pass over the arcs that
			// would only show the rounding error.
			if next := l + g/(1+slope*d2); next > lo && next < hi {
				l = next
				d1, _ = f.marginal(l)
			}
			return l, d1
		}
		if g > 0 {
			lo = l
		} else {
			hi = l
		}
		next := l + g/(1+slope*d2)
		if !(next > lo && next < hi) {
			next = lo + (hi-lo)/2
		}
		if next == l || hi-lo <= 1e-15*f.u {
			return l, d1
		}
		l = next
	}
	mu, _ = f.marginal(l)
	return l, mu
}

// supply is Σ w·max(0, b − μ).
func supply(arcs []engineArc, mu float64) float64 {
	s := 0.0
	for _, a := range arcs {
		if a.b > mu {
			s += a.w * (a.b - mu)
		}
	}
	return s
}

// supplySlope is supply and the sum of w over arcs that flow at μ.
func supplySlope(arcs []engineArc, mu float64) (s, slope float64) {
	for _, a := range arcs {
		if a.b > mu {
			s += a.w * (a.b - mu)
			slope += a.w
		}
	}
	return s, slope
}

// supplySlopeMag is supplySlope and Σ w·|b| over the arcs that flow at
// μ, which bounds supply's rounding error.
func supplySlopeMag(arcs []engineArc, mu float64) (s, slope, mag float64) {
	for _, a := range arcs {
		if a.b > mu {
			s += a.w * (a.b - mu)
			slope += a.w
			mag += a.w * math.Abs(a.b)
		}
	}
	return s, slope, mag
}

// epsilon is the float64 unit roundoff.
const epsilon = 0x1p-53

// priceForSupply solves supply(μ) = target for μ ≥ from, where
// supply(from) ≥ target. supply is piecewise linear, convex and falling, so
// Newton's method from the left reaches the root's segment in a few steps.
func priceForSupply(arcs []engineArc, from, target float64) float64 {
	mu := from
	for range 100 {
		s, slope := supplySlope(arcs, mu)
		if s <= target || slope == 0 {
			return mu
		}
		next := mu + (s-target)/slope
		if next <= mu {
			return mu
		}
		mu = next
	}
	return mu
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

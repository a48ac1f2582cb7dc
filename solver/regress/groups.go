package regress

import "math"

// groups are the points pooled by distinct load. Loads measured over
// fixed windows are counts over a window length, so an engine's history
// of hundreds of windows holds a few dozen distinct loads at most (the
// backtester's: 5-13 in 960), and the regressor λ/(c−λ) of the capacity
// search takes one value per group. estimate uses that to price a
// candidate capacity in a pass over the groups instead of the points;
// the search then computes the exact fit (ttftLine, in index order as
// ever) only where the estimates cannot decide a comparison, so Fit's
// result is bit for bit what the exhaustive search gives.
type groups struct {
	load []float64 // the distinct loads, in order of first appearance
	// Per group: Σw, Σw·y, Σw·(y − ȳ_g)² about the group's own mean ȳ_g,
	// and Σw·(y − my) about the overall weighted mean my.
	w, wy, within, dev []float64
	wyy                float64 // Σw·y² over every point, for the error bound
	x                  []float64
	of                 []int32          // each point's group
	at                 map[uint64]int32 // groupLoads's scratch: a load's group
}

// groupLoads pools the TTFT sums by load (by the bits of the load, so
// that 0 and -0 stay apart as they do in the per-point regressor) into g,
// reusing g's memory.
func (g *groups) groupLoads(load, y, w []float64, my float64) {
	if g.at == nil {
		g.at = map[uint64]int32{}
	}
	clear(g.at)
	g.load, g.w, g.wy, g.wyy = g.load[:0], g.w[:0], g.wy[:0], 0
	g.of = resize(g.of, len(load))
	for i, l := range load {
		k, ok := g.at[math.Float64bits(l)]
		if !ok {
			k = int32(len(g.load))
			g.at[math.Float64bits(l)] = k
			g.load = append(g.load, l)
			g.w, g.wy = append(g.w, 0), append(g.wy, 0)
		}
		g.of[i] = k
		g.w[k] += w[i]
		g.wy[k] += w[i] * y[i]
		g.wyy += w[i] * y[i] * y[i]
	}
	n := len(g.load)
	g.within, g.dev, g.x = zeroed(g.within, n), zeroed(g.dev, n), zeroed(g.x, n)
	for i := range load {
		k := g.of[i]
		dy := y[i] - g.wy[k]/g.w[k]
		g.within[k] += w[i] * dy * dy
		g.dev[k] += w[i] * (y[i] - my)
	}
}

// resize returns s with length n, reusing its memory when it has room
// (the values are left as they are: callers write each before reading).
// It grows as append does, so a Fitter whose histories lengthen by a few
// points a fit reallocates a logarithmic number of times.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		s = append(s[:cap(s)], make([]T, n-cap(s))...)
	}
	return s[:n]
}

// zeroed is resize with every value 0.
func zeroed[T any](s []T, n int) []T {
	s = resize(s, n)
	clear(s)
	return s
}

// regressor sets g.x to λ/(c−λ) for each group's load: the same
// division, so the same bits, as the per-point regressor.
func (g *groups) regressor(c float64) {
	for k, l := range g.load {
		g.x[k] = l / (c - l)
	}
}

// Relative bounds on how far estimate's sse and the exact one can differ:
// a sum of n non-negative terms in another order (about n·2⁻⁵³ of it) and
// residuals rounded differently (about 2⁻⁵³ of the magnitudes that make
// them). Each is taken some thousands of times larger than that, so the
// bound errs only towards computing more exact fits.
const (
	sumError      = 1e-9
	residualError = 1e-10
)

// estimate returns the TTFT fit's sse at capacity c, computed from the
// group sums, and a bound on its distance from ttftLine(c).sse; a bound of
// 0 when the exact fit is certainly the flat one, whose sse is syy. It takes
// the same decisions as fitLineSums (the interior fit, else the better of
// the flat and the through-origin ones); where a decision is a near tie
// either choice gives nearly the same sse, since each fit minimises the
// sse over its free parameters.
func (g *groups) estimate(c float64, ys lineSums) (sse, bound float64) {
	g.regressor(c)
	mx := 0.0
	for k, x := range g.x {
		mx += g.w[k] * x
	}
	mx /= ys.sw
	var sxx, sxy, x2, xy float64
	for k, x := range g.x {
		dx := x - mx
		sxx += g.w[k] * dx * dx
		sxy += dx * g.dev[k]
		x2 += g.w[k] * x * x
		xy += x * g.wy[k]
	}
	a, b := ys.my, 0.0
	if sxx > 0 {
		b = sxy / sxx
		a = ys.my - b*mx
	}
	switch {
	case b >= 0 && a >= 0:
		return g.bounded(g.sse(a, b), a, b, ys.sw, x2)
	case x2 <= 0 || xy <= 0:
		return g.bounded(ys.syy, ys.my, 0, ys.sw, x2)
	}
	origin, originBound := g.bounded(g.sse(0, xy/x2), 0, xy/x2, ys.sw, x2)
	switch {
	case origin < ys.syy:
		return origin, originBound
	case sxy < -sumError*math.Sqrt(sxx*ys.syy) && origin-originBound > ys.syy:
		// Certainly flat: the exact fit's sxy is negative too (its
		// error is within sumError·√(sxx·syy) by Cauchy-Schwarz) and
		// its through-origin fit is worse, so its sse is syy itself
		// (bestOnBoundary).
		return ys.syy, 0
	}
	return g.bounded(ys.syy, ys.my, 0, ys.sw, x2)
}

// bounded returns sse with the bound on its error for the fit a + b·x.
func (g *groups) bounded(sse, a, b, sw, x2 float64) (float64, float64) {
	floor := residualError * residualError * (g.wyy + a*a*sw + b*b*x2)
	return sse, sumError*sse + 2*math.Sqrt(sse*floor) + floor
}

// sse is Σw·(y − a − b·x)² over the points, by group: each group's
// spread about its own mean plus its weight times its mean's residual.
func (g *groups) sse(a, b float64) float64 {
	s := 0.0
	for k, x := range g.x {
		r := g.wy[k]/g.w[k] - a - b*x
		s += g.within[k] + g.w[k]*r*r
	}
	return s
}

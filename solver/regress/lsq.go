package regress

// line is a weighted least-squares fit y = a + b*x with a, b >= 0.
type line struct {
	a, b float64
	sse  float64 // weighted sum of squared residuals
	sst  float64 // weighted total sum of squares about the mean
}

// r2 is the coefficient of determination. With no spread in y it is 1 for
// a perfect fit and 0 otherwise (the usual convention for 0/0).
func (l line) r2() float64 {
	if l.sst == 0 {
		if l.sse == 0 {
			return 1
		}
		return 0
	}
	return 1 - l.sse/l.sst
}

// fitLine fits y = a + b*x by weighted least squares under a >= 0, b >= 0.
// For two parameters the constrained optimum is the unconstrained one if
// feasible, else the better of the two one-parameter fits on the boundary
// (b = 0: the weighted mean; a = 0: the fit through the origin). It uses
// centred sums, so large offsets in x or y do not cost precision.
func fitLine(x, y, w []float64) line {
	mx := 0.0
	for i := range x {
		mx += w[i] * x[i]
	}
	return fitLineSums(x, y, w, mx, ySums(y, w))
}

// lineSums are fitLine's sums over y alone: Σw, the weighted mean of y
// and Σw·(y − mean)².
type lineSums struct{ sw, my, syy float64 }

// ySums computes them, each accumulated in index order as fitLine always
// has, so fits that reuse them are bit for bit the same.
func ySums(y, w []float64) lineSums {
	var s lineSums
	for i := range y {
		s.sw += w[i]
		s.my += w[i] * y[i]
	}
	s.my /= s.sw
	for i := range y {
		dy := y[i] - s.my
		s.syy += w[i] * dy * dy
	}
	return s
}

// fitLineSums is fitLine given Σw·x (mx, not yet divided) and y's sums.
func fitLineSums(x, y, w []float64, mx float64, ys lineSums) line {
	mx /= ys.sw
	my, syy := ys.my, ys.syy
	var sxx, sxy, x2, xy float64
	y, w = y[:len(x)], w[:len(x)] // one bounds check here, none in the loop
	for i := range x {
		dx, dy := x[i]-mx, y[i]-my
		sxx += w[i] * dx * dx
		sxy += w[i] * dx * dy
		x2 += w[i] * x[i] * x[i]
		xy += w[i] * x[i] * y[i]
	}
	l := line{a: my, sst: syy}
	if sxx > 0 {
		l.b = sxy / sxx
		l.a = my - l.b*mx
	}
	if l.b < 0 || l.a < 0 {
		return bestOnBoundary(x, y, w, my, x2, xy, syy)
	}
	l.sse = sse(x, y, w, l.a, l.b)
	return l
}

// bestOnBoundary returns the better one-parameter fit, with its sse (the
// one the comparison computed: the capacity search's fits are on the
// boundary most of the time, and a third pass for it was a sixth of
// their cost).
//
// The flat fit's sse is syy: its residuals y − my − 0·x are the
// deviations y − my that syy sums, in the same order and form (x is
// finite, so 0·x is 0).
func bestOnBoundary(x, y, w []float64, my, x2, xy, syy float64) line {
	flat := line{a: my, sst: syy, sse: syy}
	if x2 <= 0 || xy <= 0 {
		return flat
	}
	origin := line{b: xy / x2, sst: syy}
	origin.sse = sse(x, y, w, origin.a, origin.b)
	if origin.sse < flat.sse {
		return origin
	}
	return flat
}

func sse(x, y, w []float64, a, b float64) float64 {
	var s float64
	y, w = y[:len(x)], w[:len(x)]
	for i := range x {
		r := y[i] - a - b*x[i]
		s += w[i] * r * r
	}
	return s
}

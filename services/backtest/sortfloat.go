package backtest

import (
	"math"
	"slices"
)

// radixMin is the length from which sortFloats sorts by radix: below it
// slices.Sort is faster (it was at 366 values, the radix sort at 3,658).
const radixMin = 1024

// sortFloats sorts xs in increasing order, as slices.Sort does. When
// every value is a non-negative number (latencies are), the values'
// bit patterns order as the values do, and equal values have equal
// bits, so a radix sort on the bits (LSD, a byte a pass, passes on a
// byte every value shares skipped) gives exactly slices.Sort's result
// in about half the time; the percentiles of a run sorted five
// arrays of every request each (TestSortFloatsIsSort).
func sortFloats(xs []float64) {
	if len(xs) < radixMin || !nonNegative(xs) {
		slices.Sort(xs)
		return
	}
	var counts [8][256]int
	for _, x := range xs {
		k := math.Float64bits(x)
		for d := range counts {
			counts[d][byte(k>>(8*d))]++
		}
	}
	a, b := xs, make([]float64, len(xs))
	for d := range counts {
		c, shift := &counts[d], 8*uint(d)
		if c[byte(math.Float64bits(a[0])>>shift)] == len(a) {
			continue // every value has this byte
		}
		sum := 0
		for i, n := range c {
			c[i], sum = sum, sum+n
		}
		for _, x := range a {
			k := byte(math.Float64bits(x) >> shift)
			b[c[k]] = x
			c[k]++
		}
		a, b = b, a
	}
	copy(xs, a) // a no-op when a is xs
}

// nonNegative reports whether every x is a number with its sign bit
// clear (not NaN, not -0, not negative).
func nonNegative(xs []float64) bool {
	for _, x := range xs {
		if math.Float64bits(x)>>63 != 0 || x != x {
			return false
		}
	}
	return true
}

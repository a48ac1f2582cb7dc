package sched

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// canonical validates engines and weights and returns them sorted by name,
// so every table built from the same (name, weight) set is identical
// whatever order the caller listed it in (for example a Go map's).
func canonical(engines []string, weights []float64) ([]string, []float64, error) {
	if err := checkLens(engines, weights); err != nil {
		return nil, nil, err
	}
	names := make([]string, len(engines))
	ws := make([]float64, len(engines))
	if err := canonicalTo(names, ws, make([]int, len(engines)), engines, weights); err != nil {
		return nil, nil, err
	}
	return names, ws, nil
}

// canonical is the package function canonical into u's names and ws.
func (u *Updater) canonical(engines []string, weights []float64) error {
	if err := checkLens(engines, weights); err != nil {
		return err
	}
	n := len(engines)
	u.names, u.ws, u.sorted = resize(u.names, n), resize(u.ws, n), resize(u.sorted, n)
	return canonicalTo(u.names, u.ws, u.sorted, engines, weights)
}

func checkLens(engines []string, weights []float64) error {
	if len(engines) != len(weights) {
		return fmt.Errorf("%d engines but %d weights", len(engines), len(weights))
	}
	if len(engines) == 0 || len(engines) > MaxEngines {
		return fmt.Errorf("%d engines, want 1 to %d", len(engines), MaxEngines)
	}
	return nil
}

// canonicalTo writes engines and weights sorted by name into names and
// ws, using order (all three of their length) as scratch, and validates
// them.
func canonicalTo(names []string, ws []float64, order []int, engines []string, weights []float64) error {
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(engines[a], engines[b]) })
	for j, i := range order {
		names[j], ws[j] = engines[i], weights[i]
	}
	if err := checkNames(names); err != nil {
		return err
	}
	return checkWeights(names, ws)
}

// resize returns s with length n, reusing its array when it is large
// enough; the contents are unspecified.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// checkNames requires non-empty names in strictly ascending order, which
// also rules out duplicates.
func checkNames(names []string) error {
	for i, n := range names {
		if n == "" {
			return fmt.Errorf("engine %d has an empty name", i)
		}
		if i > 0 && names[i-1] >= n {
			if names[i-1] == n {
				return fmt.Errorf("engine %q listed twice", n)
			}
			return fmt.Errorf("engines not sorted: %q before %q", names[i-1], n)
		}
	}
	return nil
}

func checkWeights(names []string, ws []float64) error {
	total := 0.0
	for i, w := range ws {
		if math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
			return fmt.Errorf("engine %q: weight %v, want finite and >= 0", names[i], w)
		}
		total += w
	}
	if !(total > 0) {
		return fmt.Errorf("no engine has a positive weight")
	}
	if math.IsInf(total, 0) {
		return fmt.Errorf("weights overflow: their sum is not finite")
	}
	return nil
}

// apportion splits slots among engines in proportion to weights by the
// largest remainder (Hamilton) method: each engine gets the floor of its
// exact quota, and the slots left over go one each to the largest
// remainders, ties to the lower index (the smaller name). Every count is
// within one slot of its exact quota; an engine of weight 0 gets none.
//
// The float arithmetic is deterministic across platforms: the total is
// summed in name order, scaling by slots (a power of two) is exact, and the
// explicit float64 conversion forbids fused multiply-add.
func apportion(ws []float64, slots int) []int {
	counts := make([]int, len(ws))
	apportionTo(counts, make([]float64, len(ws)), make([]int, len(ws)), ws, slots)
	return counts
}

// apportion is the package function apportion of u.ws into u.quota.
func (u *Updater) apportion(slots int) {
	n := len(u.ws)
	u.quota, u.rem, u.byRem = resize(u.quota, n), resize(u.rem, n), resize(u.byRem, n)
	apportionTo(u.quota, u.rem, u.byRem, u.ws, slots)
}

// apportionTo writes the counts into counts, using rem and order (all of
// the length of ws) as scratch.
func apportionTo(counts []int, rem []float64, order []int, ws []float64, slots int) {
	total := 0.0
	for _, w := range ws {
		total += w
	}
	given := 0
	for i, w := range ws {
		q := float64(w / total * float64(slots))
		f := math.Floor(q)
		counts[i], rem[i] = int(f), q-f
		given += counts[i]
	}
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := cmp.Compare(rem[b], rem[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	settle(counts, ws, order, slots-given)
}

// settle hands out (or, if rounding overshot, takes back) the slots left
// after flooring, in the order of the remainders. Taking back cannot happen
// with exact arithmetic and is here so a rounding surprise still yields a
// table that covers every slot exactly once.
func settle(counts []int, ws []float64, order []int, left int) {
	for left > 0 {
		for _, i := range order {
			if left == 0 {
				break
			}
			if ws[i] > 0 {
				counts[i]++
				left--
			}
		}
	}
	for left < 0 {
		for j := len(order) - 1; j >= 0 && left < 0; j-- {
			if i := order[j]; counts[i] > 0 {
				counts[i]--
				left++
			}
		}
	}
}

package optimize

import (
	"fmt"
	"testing"
)

// tiesFromStart runs the tie method alone from a solve's cold start (no
// Newton rounds, no forest) and certifies its point.
func tiesFromStart(t *testing.T, p *Problem, prev *Solution) (certificate, *ties) {
	t.Helper()
	m := newModel(p)
	st := newState(m, &memory{})
	st.setKappa(1)
	pv := warmStart(p, m, prev)
	st.start(pv)
	x := newTies(m, st.cur.pi)
	if pv != nil {
		x.tiesFrom(st.centrePoint())
	}
	if !x.solve(100_000) {
		t.Fatalf("the tie method did not close in 100,000 moves (%d merges, %d splits)", x.merges, x.splits)
	}
	st.cur = x.point()
	return st.certifyExact(), x
}

// The tie method alone, cold and warm, closes exactly on random fleets
// (some short of capacity, so shedding), and finds Solve's optimum.
func TestTiesCloseExactly(t *testing.T) {
	for i, p := range smallFleets(t, 40) {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			want, err := Solve(p, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			ct, _ := tiesFromStart(t, p, nil)
			if !(ct.gap <= 1e-9) || ct.kkt > 1e-6*ct.obj {
				t.Errorf("cold: gap %v, KKT residual %v ms", ct.gap, ct.kkt)
			}
			near(t, "cold objective", ct.obj/newModel(p).total, want.ObjectiveMs, 1e-9)
			q := perturbDemand(p, newRand(uint64(i)), 0.05)
			wantQ, err := Solve(q, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			ct, _ = tiesFromStart(t, q, want)
			if !(ct.gap <= 1e-9) {
				t.Errorf("warm: gap %v", ct.gap)
			}
			near(t, "warm objective", ct.obj/newModel(q).total, wantQ.ObjectiveMs, 1e-9)
		})
	}
}

// A warm start from the last solution takes few moves: most of its ties
// are the new optimum's.
func TestTiesWarmStartIsShort(t *testing.T) {
	p := regimeFleet(t, regimeSlack, 30, 300)
	prev, err := Solve(p, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	q := perturbDemand(p, newRand(7), 0.05)
	ct, x := tiesFromStart(t, q, prev)
	if !(ct.gap <= 1e-9) {
		t.Errorf("gap %v", ct.gap)
	}
	if x.moves > 60 {
		t.Errorf("%d moves from the previous solution, want a few dozen", x.moves)
	}
	t.Logf("%d moves, %d merges, %d splits", x.moves, x.merges, x.splits)
}

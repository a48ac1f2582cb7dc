package routing

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ilb-router/ilb/solver/optimize"
)

// SmoothConfig says how fast a demand row's published routing follows the
// solver. A fleet at the edge of its capacity sees its modelled capacity
// move with the mean request (Mooncake's prompts are heavy-tailed, so a
// 25 s mean swings by a quarter) and its solutions flip between shedding
// a fraction and overflowing to a farther engine every few seconds;
// published as solved, every flip moves conversations and refuses by
// turns. While the published or the new solution sheds, the published
// routing moves toward each new solution with these time constants
// instead: the split of the served traffic over the engines with
// Weights, the shed fraction with Shed.
//
// A row that sheds nothing before or after has its split smoothed with
// Reuse, scaled by how much of the fleet's prompts its engines serve from
// their prefix caches (reuse in Smooth; full at ReuseFull and above):
// moving such a row moves conversations away from the engines that hold
// their context, and the split otherwise follows every move of the
// demand and capacity estimates (weight churn above a PID controller's on
// fleets short of capacity). Without prefix reuse a move costs nothing,
// and bursty traffic needs the split to follow its demand within seconds
// (the Azure code trace loses 2 points of SLO attainment with a 100 s
// time constant there), so such a row is smoothed with Calm only, which
// is also the least time constant of a row with reuse: short enough for
// bursts, long enough that the split does not follow each solve's move
// of the capacity estimates (with the mean request tracked over about
// one control interval, solver/prior.ShapeEstimate, the Azure traces'
// splits published as solved churned up to 1.5 × pid's; over 20 s,
// below pid's). 0 publishes each solution as solved.
type SmoothConfig struct {
	Weights time.Duration
	Shed    time.Duration
	Reuse   time.Duration
	Calm    time.Duration
}

// DefaultSmoothConfig returns the optimizer's defaults (README.md,
// "Shedding"): the served split and the shed fraction each over about
// 100 s, and the split of a row that sheds nothing over 100 s when
// prompts reuse the prefix cache, over 20 s without reuse.
func DefaultSmoothConfig() SmoothConfig {
	return SmoothConfig{Weights: 100 * time.Second, Shed: 100 * time.Second, Reuse: 100 * time.Second, Calm: 20 * time.Second}
}

// Validate reports the first problem with c.
func (c SmoothConfig) Validate() error {
	for _, d := range []struct {
		v    time.Duration
		name string
	}{{c.Weights, "weights"}, {c.Shed, "shed"}, {c.Reuse, "reuse"}, {c.Calm, "calm"}} {
		if d.v < 0 {
			return fmt.Errorf("smoothing time constant %v (%s) must be >= 0 (0: publish as solved)", d.v, d.name)
		}
	}
	return nil
}

// Released is c once an overload has ended (Release): a row that shed
// publishes its solution as it is, its refusals gone at once, and so does
// a row without prefix reuse; a row whose engines serve prompts from
// their prefix caches still moves its split with the Reuse pace. The end
// of an overload says nothing about where a conversation's context is
// cached: released outright, such rows followed every solve from then on
// until the solver shed again, which on the headroom fleet (released in
// its first seconds, when the first window's burst asks 13.6 requests a
// second and the next ones 2.4) was the whole hour, with 3.5 × this
// pace's weight churn (services/backtest README, "Released").
func (c SmoothConfig) Released() SmoothConfig {
	c.Weights, c.Shed, c.Calm = 0, 0, 0
	return c
}

// CalmAsSolved is c with the rows that shed nothing published as solved
// (Reuse and Calm 0): what a caller whose smoothed routing Overloads an
// engine publishes instead.
func (c SmoothConfig) CalmAsSolved() SmoothConfig {
	c.Reuse, c.Calm = 0, 0
	return c
}

// ReuseFull is the share of prompt tokens served from prefix caches at
// which a row that sheds nothing is smoothed with the full
// SmoothConfig.Reuse; below it the time constant shrinks in proportion
// (Mooncake's conversations reuse 13-24% of their prompt tokens, the
// Azure traces none).
const ReuseFull = 0.1

// SmoothShedFloor is the smoothed shed fraction under which a row whose
// new solution sheds nothing is released: it publishes the solution as
// it is. Below it the decay would refuse a request now and then for
// minutes after an overload ended.
const SmoothShedFloor = 0.003

// Smooth returns the weights and shed fraction to publish for a row whose
// published routing is (prev, prevShed), dt after it was published, when
// the solver's new one is (next, nextShed) (both as Normalize returns
// them). reuse is the share of the fleet's prompt tokens served from
// prefix caches lately (prior.Shape.CachedFraction). usable reports
// whether the row may still send to an engine (it is in the new problem,
// eligible, with capacity): the rest lose their weight at once. Each part
// moves a fraction 1 − exp(−dt/τ) of the way to the new solution
// (SmoothConfig). A solution that sheds the whole row (or serves it
// nowhere) moves the shed fraction toward 1 at the Shed pace over the
// published split (the usable part of it). It returns the new solution as
// it is when the published routing sheds everything, when there is none,
// when nothing usable is left of it, and when neither sheds and its calm
// time constant is 0.
//
// Until the fourteenth session a solution that shed the whole row was
// published as it was: one solve whose capacity estimates dipped (the
// overload fleet's modelled capacity 4.7, 2.6, 3.5 rps over three solves
// of 5 s) refused all of a cluster's requests for that solve, where it
// had refused a tenth, and moved its weights by 0.89 twice; on the
// overload fleet that one publish was most of the runs whose weight
// churn rose above pid's (services/backtest README, "Shedding a whole
// row").
func Smooth(cfg SmoothConfig, prev map[string]float64, prevShed float64, next map[string]float64, nextShed float64,
	usable func(engine string) bool, dt time.Duration, reuse float64) (map[string]float64, float64) {
	if len(prev) == 0 || prevShed >= 1 {
		return next, nextShed
	}
	if nextShed >= 1 || len(next) == 0 {
		return shedAll(cfg, prev, prevShed, next, nextShed, usable, dt)
	}
	aw, as := smoothStep(dt, cfg.Weights), smoothStep(dt, cfg.Shed)
	calm := !(prevShed >= MinShed) && !(nextShed >= MinShed)
	if calm {
		aw, as = smoothStep(dt, calmTau(cfg, reuse)), 1
	}
	if aw == 1 && as == 1 {
		return next, nextShed
	}
	names, kept := usableNames(prev, usable)
	if kept <= 0 {
		return next, nextShed
	}
	shed := 0.0
	if !calm {
		shed = prevShed + as*(nextShed-prevShed)
		if !(nextShed >= MinShed) && shed < SmoothShedFloor {
			return next, nextShed // released: the solution as it is
		}
	}
	// The split of the served traffic: previous and new weights, each
	// normalised to 1 over its engines, moved aw of the way; then
	// normalised as Normalize does, in name order.
	return normalizeSplit(mergeSplit(names, prev, 1-aw, kept, sortedKeys(next), next, aw, 1-nextShed), shed)
}

// shedAll is Smooth of a solution (next, nextShed) that serves the row
// nowhere: the shed fraction moves from prevShed toward 1 at the Shed
// pace and the rest is served as the published split prev (its usable
// engines, normalised as Normalize does); the solution as it is when the
// pace is 0 or nothing usable is left of prev.
func shedAll(cfg SmoothConfig, prev map[string]float64, prevShed float64, next map[string]float64, nextShed float64,
	usable func(engine string) bool, dt time.Duration) (map[string]float64, float64) {
	as := smoothStep(dt, cfg.Shed)
	if as == 1 {
		return next, nextShed
	}
	names, kept := usableNames(prev, usable)
	if kept <= 0 {
		return next, nextShed
	}
	return normalizeSplit(mergeSplit(names, prev, 1, kept, nil, nil, 0, 1), prevShed+as*(1-prevShed))
}

// usableNames is the engines of the published split prev that the row
// may still send to, in name order (usable asked once each), and the
// weight they carry, summed in that order.
func usableNames(prev map[string]float64, usable func(engine string) bool) ([]string, float64) {
	names, kept := sortedKeys(prev), 0.0
	n := 0
	for _, e := range names {
		if usable(e) {
			names[n] = e
			n++
			kept += prev[e]
		}
	}
	return names[:n], kept
}

// weighted is one engine's weight.
type weighted struct {
	name string
	w    float64
}

// mergeSplit returns, in name order, each engine's ap·prev/kept (for the
// engines in from, sorted) plus an·next/served (for those in to, sorted):
// the values a map summing the two parts in that order holds.
func mergeSplit(from []string, prev map[string]float64, ap, kept float64, to []string, next map[string]float64, an, served float64) []weighted {
	out := make([]weighted, 0, len(from)+len(to))
	for len(from) > 0 || len(to) > 0 {
		switch {
		case len(to) == 0 || len(from) > 0 && from[0] < to[0]:
			out = append(out, weighted{from[0], ap * prev[from[0]] / kept})
			from = from[1:]
		case len(from) == 0 || to[0] < from[0]:
			out = append(out, weighted{to[0], an * next[to[0]] / served}) // 0 + x: x (a kept x is positive)
			to = to[1:]
		default:
			out = append(out, weighted{from[0], ap*prev[from[0]]/kept + an*next[to[0]]/served})
			from, to = from[1:], to[1:]
		}
	}
	return out
}

// normalizeSplit is Normalize of the weights in split, which is in name
// order: those under WeightFloor dropped, the rest scaled to sum to
// 1 − shed (summed in that order).
func normalizeSplit(split []weighted, shed float64) (map[string]float64, float64) {
	sum, n := 0.0, 0
	for _, x := range split {
		if x.w >= WeightFloor {
			split[n] = x
			n++
			sum += x.w
		}
	}
	if sum == 0 || shed >= 1 {
		return map[string]float64{}, 1
	}
	scale := (1 - shed) / sum
	out := make(map[string]float64, n)
	for _, x := range split[:n] {
		out[x.name] = x.w * scale
	}
	return out, shed
}

// calmTau is the time constant of a row that sheds nothing when a share
// reuse of prompt tokens comes from prefix caches: reuseTau, and never
// under cfg.Calm.
func calmTau(cfg SmoothConfig, reuse float64) time.Duration {
	return max(cfg.Calm, reuseTau(cfg.Reuse, reuse))
}

// reuseTau is the time constant tau of a row that sheds nothing scaled by
// a share reuse of prompt tokens from prefix caches: tau at ReuseFull and
// above, shrinking in proportion below, 0 without reuse.
func reuseTau(tau time.Duration, reuse float64) time.Duration {
	if !(reuse > 0) {
		return 0
	}
	return time.Duration(float64(tau) * min(1, reuse/ReuseFull))
}

// smoothStep is the share of the way a part with time constant tau moves
// in dt: all of it for tau 0 (no smoothing), and for a dt that is not
// positive (a clock stepped back), which would otherwise freeze the
// routing.
func smoothStep(dt, tau time.Duration) float64 {
	if tau <= 0 || dt <= 0 {
		return 1
	}
	return 1 - math.Exp(-dt.Seconds()/tau.Seconds())
}

// Usable reports whether demand row c of a problem BuildProblem made may
// send to an engine: eligible (its list is sorted) and with capacity
// (engines are sorted by name).
func Usable(p *optimize.Problem, c string) func(engine string) bool {
	elig := p.Eligible[c]
	return func(e string) bool {
		if _, ok := slices.BinarySearch(elig, e); !ok {
			return false
		}
		i, ok := slices.BinarySearchFunc(p.Engines, e, func(x optimize.Engine, name string) int { return cmp.Compare(x.Name, name) })
		return ok && p.Engines[i].CapacityRps > 0
	}
}

// ReleaseDrop is how far the fleet's demand must fall below what it was
// at the solver's last shortfall for smoothing to be released.
const ReleaseDrop = 0.2

// Release tells when an overload has ended, so that smoothing stops at
// once instead of decaying: at the edge of capacity the solver stops and
// starts shedding every few seconds with the fleet's demand steady,
// which is what smoothing is for, but after a demand swing the demand
// falls, and the shed fraction decaying over minutes would refuse what
// the fleet can serve. It remembers the fleet's total demand at the
// solver's last shortfall; once the solver sheds nothing and the demand
// has fallen ReleaseDrop below that, the rows are smoothed with
// SmoothConfig.Released until the solver sheds again: their solutions as
// they are, but for the split of a row with prefix reuse. The zero value
// is ready.
type Release struct {
	atShortfall float64 // total demand at the last solve that shed
	released    bool
}

// Observe takes a solve: the fleet's total demand and whether the solver
// shed anything. It reports whether smoothing is released.
func (r *Release) Observe(demand float64, sheds bool) bool {
	switch {
	case sheds:
		r.atShortfall, r.released = demand, false
	case demand < (1-ReleaseDrop)*r.atShortfall:
		r.released = true
	}
	return r.released
}

// TotalDemand is the sum of p's rows' demand.
func TotalDemand(p *optimize.Problem) float64 {
	sum := 0.0
	for _, c := range p.Clusters {
		sum += c.DemandRps
	}
	return sum
}

// Sheds reports whether sol sheds a fraction of some row (MinShed or more).
func Sheds(sol *optimize.Solution) bool {
	for _, f := range sol.ShedFraction {
		if f >= MinShed {
			return true
		}
	}
	return false
}

// Overloads reports whether routing weights (by row of p, each a share of
// the row's demand, as Normalize returns them) would load some engine of
// p past its load cap (max_utilization × capacity, or its MaxLoadRps)
// by more than a thousandth. Smoothing a row that sheds nothing trades
// following the solver for keeping conversations where their cache is;
// it must never publish a split that sends an engine more than it can
// take: after a demand swing the solver moves the swung row's overflow
// to engines with room at once, and a smoothed split would keep it on
// the full ones for minutes. A caller whose smoothed routing Overloads
// publishes the calm rows as solved instead.
func Overloads(p *optimize.Problem, weights map[string]map[string]float64) bool {
	load := make(map[string]float64, len(p.Engines))
	for _, c := range p.Clusters {
		// In any order: an engine's load gains one term a row, in the
		// rows' order.
		for e, v := range weights[c.Name] {
			load[e] += c.DemandRps * v
		}
	}
	for _, e := range p.Engines {
		if load[e.Name] > e.LoadCap(p.MaxUtilization)*(1+1e-3)+1e-12 {
			return true
		}
	}
	return false
}

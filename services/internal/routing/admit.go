package routing

import (
	"math"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/optimize"
	"github.com/ilb-router/ilb/solver/sched"
)

// Local admission is the data plane's last resort against overload
// between solves: it refuses a request only when the engine it would go to
// (and every alternative) has more requests waiting than it can start
// within the TTFT SLO. An engine starts waiting requests at about its
// capacity (each one finishing frees a slot), so a request behind W
// waiting ones starts after about W/capacity seconds: the queue limit is
// capacity × ttft_slo. It is the rule of the backtester's jsq-admission
// reference, applied to the data plane's view of the queues (the last
// engine status plus what it sent since).
//
// It cannot refuse twice for the shortfall the optimizer already sheds:
// the optimizer sheds only demand beyond the engines' caps, so the queues
// it leaves are bounded, and a queue the optimizer's shed has drained
// admits again.

// QueueLimit is how many requests may wait at an engine of capacity
// capacityRPS for a new one still to start within ttftSLOMs; at least 1.
// A capacity or SLO that is not a positive number gives 0: no limit.
func QueueLimit(capacityRPS, ttftSLOMs float64) float64 {
	if !(capacityRPS > 0) || !(ttftSLOMs > 0) || math.IsInf(capacityRPS*ttftSLOMs, 1) {
		return 0
	}
	return max(1, capacityRPS*ttftSLOMs/1000)
}

// PrefillLimit is how many prompt tokens may be queued for prefill at an
// engine ahead of a new request for it still to start within ttftSLOMs:
// its prefill rate × replicas × the SLO. A queue of requests hides their
// sizes: ten waiting 60,000-token prompts are a minute of prefill on an
// h100 where ten 2,000-token ones are two seconds. The data plane admits
// a request at an engine only while both limits hold; the prompts pending
// there are exactly what it sent and has no answer to, plus what the
// other data planes share (services/dataplane, pending_sync.go). It is
// the rule of the backtester's jsq-admission reference, by prompt tokens
// as it counts them. 0 (no limit) when the rate or SLO is not positive.
func PrefillLimit(prefillTokensPerS float64, replicas int, ttftSLOMs float64) float64 {
	v := prefillTokensPerS * float64(max(replicas, 1)) * ttftSLOMs / 1000
	if !(prefillTokensPerS > 0) || !(ttftSLOMs > 0) || math.IsInf(v, 1) {
		return 0
	}
	return v
}

// PrefillLimits is PrefillLimit of every engine of the fleet, by name,
// from its prefill_tokens_per_s and replicas and the fleet's ttft_slo_ms.
func PrefillLimits(f *schemas.Fleet) map[string]float64 {
	out := make(map[string]float64, len(f.Engines))
	for _, e := range f.Engines {
		if l := PrefillLimit(e.PrefillTokensPerS, e.Replicas, f.TTFTSLOMs); l > 0 {
			out[e.Name] = l
		}
	}
	return out
}

// QueueLimits is QueueLimit of every engine of p (capacities derated).
func QueueLimits(p *optimize.Problem, ttftSLOMs float64) map[string]float64 {
	out := make(map[string]float64, len(p.Engines))
	for _, e := range p.Engines {
		if l := QueueLimit(e.CapacityRps, ttftSLOMs); l > 0 {
			out[e.Name] = l
		}
	}
	return out
}

// OngoingQueueFactor is how much longer a queue an ongoing conversation is
// admitted to than a new one: its prefix is cached on its engine (less to
// prefill), and refusing it breaks a conversation under way. New
// conversations are refused first.
const OngoingQueueFactor = 2

// Admit reports whether a request may join a queue of waiting requests
// at an engine whose queue limit is limit; ongoing says whether it
// continues a conversation. limit 0 (unknown) admits everything.
func Admit(waiting, limit float64, ongoing bool) bool {
	if !(limit > 0) {
		return true
	}
	if ongoing {
		limit *= OngoingQueueFactor
	}
	return waiting < limit
}

// secondSeed derives a new conversation's second candidate from its key.
const secondSeed = 0x5bd1e9955bd1e995

// SecondChoice returns the table engine a new conversation goes to under
// the power of d choices (d = Choices): chosen (its own engine, or where
// Choose sent it) or one of Choices−1 candidates drawn from the same table
// by other hashes of its key (skipping engines closed to it), whichever
// has the lowest load.
// Drawing both from the weighted table keeps the optimizer's shares on
// average, while the choice evens out what weights cannot see: the
// queues of the last seconds (Mitzenmacher's two choices cut the queueing
// of random assignment roughly exponentially). Ongoing conversations stay
// where their cache is. Ties keep chosen.
func SecondChoice(t *sched.Table, h uint64, chosen int, closed func(i int) bool, load func(i int) float64) int {
	best, bestLoad := chosen, load(chosen)
	for k := uint64(1); k < Choices; k++ { // the k-th extra candidate's hash
		alt, ok := t.PickSkip(mixKey(h^(secondSeed*k)), closed)
		if !ok || alt == best {
			continue
		}
		if l := load(alt); l < bestLoad {
			best, bestLoad = alt, l
		}
	}
	return best
}

// Busy is the number of requests at an engine that SecondChoice and
// Overflow compare engines on (before the prefill pending there): the
// other data planes' by the engine's last status (its waiting and
// running, less this data plane's own requests in flight there when the
// status came, never below 0) plus this data plane's own in flight now.
// A data plane knows its own requests exactly and at once, where a status
// comes a second late: counting the requests sent since the status on
// top of it (as until the fourteenth session) kept a finished request in
// the load until the next status and left one that ended before it in
// the status's count, so that for the second after each status an engine
// looked as busy as it had been. Measured on the backtester's 34
// scenarios (services/backtest README, "Own requests live"), SLO
// attainment +11.2 and +10.8 points summed over seeds 1-8 and 9-16, 18
// up in both, most of it two code fleets changing regime (+6.3 and +4.9
// without them; the TBOT-bound code fleet u9 +0.4 and +0.5); on the
// eight fleets not tuned on −1.7 and −1.3, of which −1.4 and −1.7 the
// regime of one code fleet, u27.
func Busy(waiting, running, ownAtStatus, ownNow float64) float64 {
	return max(0, waiting+running-ownAtStatus) + ownNow
}

// Choices is how many candidates a new conversation is offered: its own
// engine and Choices−1 more drawn from the table. More choices see more
// of the cluster's engines at once; measured on the backtester's Mooncake
// and Azure scenarios (services/backtest README, "Two choices"), SLO
// attainment rose from 2 to 4 choices and no further beyond.
const Choices = 4

// mixKey is the SplitMix64 finaliser.
func mixKey(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// Overflow returns which of n engines outside a cluster's table (engines
// its traffic may use that have no weight in it) a new conversation goes
// to instead of the table engine chosen for it, whose load is bestLoad:
// the one with the lowest load (the first on ties), if that is under
// MoveRatio × bestLoad and bestLoad is at least MoveLoadMin; else -1.
// closed(i) reports an engine it may not go to (unavailable, or over its
// admission limit). A bestLoad of +Inf (the table engine's load unknown:
// no status yet, or no queue limit) keeps the plan: an unknown load is
// not a burst, and every engine with a known load would be "under half"
// of it, so each new conversation would leave the table.
//
// The weights are the optimizer's plan for the windows it saw; a burst
// between solves can fill the engines of a cluster's table while others
// it may use sit idle, and the table's candidates (SecondChoice) cannot
// see those. A fluid plan that keeps a cluster on its nearest engines is
// right on average and wrong for the seconds of a burst: there a
// request that would wait behind half of what its engine can start
// within the TTFT SLO is better served by an engine with room, network
// included. Measured on the backtester's scenarios (services/backtest
// README, "Overflow"), SLO attainment rose on 21 of 31 and fell on 5 (by
// up to 2.3 points, on code traces that flip between regimes), +35
// points summed, most on the multi-region fleets whose bursts outrun the
// solves.
func Overflow(bestLoad float64, n int, closed func(i int) bool, load func(i int) float64) int {
	if !(bestLoad >= MoveLoadMin) || math.IsInf(bestLoad, 1) {
		return -1
	}
	out, lim := -1, bestLoad*MoveRatio
	for i := range n {
		if closed(i) {
			continue
		}
		if l := load(i); l < lim {
			out, lim = i, l
		}
	}
	return out
}

// MoveRatio is how much lighter than its own engine another candidate
// must be for an ongoing conversation to leave its cache behind: less
// than MoveRatio × its engine's load. Its next turns then follow it
// there (the data plane remembers it as a spill). Measured on the
// backtester's scenarios (services/backtest README), moving at half the
// load raised SLO attainment on every one and kept the cache hit ratio
// within 0.93 of pure affinity's; moving more readily lost cache hits.
const MoveRatio = 0.5

// MoveMin is the fewest requests own's engine must hold, as the data
// plane knows them (waiting and running by its last status, plus those
// sent since and not yet ended), for an ongoing conversation to leave it.
// The load the candidates are compared on (Busy) still counts the other
// data planes' requests that the last status saw and that have ended
// since; an engine holding nothing else is not left for that: a
// conversation's quick next turn would leave its cache to get away from
// a finished turn.
const MoveMin = 1

// MoveLoadMin is the least load own's engine must carry, as load(own)
// measures it (its queue, batch and pending prefill over its queue limit:
// what it can start within ttft_slo_ms), for an ongoing conversation to
// leave it. Below half of what it can start within the SLO its own engine
// serves the turn in time, and leaving only throws away the context
// cached there: on the headroom fleet's first acceptance stretch 15% of
// the follow-up turns moved, more than half of them by this rule, for a
// cache hit ratio 0.91 × hash's; with the floor 0.95 ×, SLO attainment
// level (services/backtest README, "Moving a conversation").
const MoveLoadMin = 0.5

// Move returns the table engine an ongoing conversation goes to: its own
// (own), unless own holds at least MoveMin requests (held), carries a
// load of at least MoveLoadMin, and the lightest of the candidates
// SecondChoice draws for it has under MoveRatio × own's load.
func Move(t *sched.Table, h uint64, own int, held float64, closed func(i int) bool, load func(i int) float64) int {
	if !(held >= MoveMin) || load(own) < MoveLoadMin {
		return own
	}
	alt := SecondChoice(t, h, own, closed, load)
	if alt != own && load(alt) < MoveRatio*load(own) {
		return alt
	}
	return own
}

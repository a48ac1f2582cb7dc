package peer

// jsqAdmission is the reference for "the least shedding that keeps the
// SLO": least-loaded routing (services/backtest's least-loaded: the
// fewest requests in flight per batch slot, seen live over every front
// end, the nearer engine on ties, then round-robin) over the engines on
// which the request can start in time, refusing it only when it can
// start within ttft_slo_ms on none of the cluster's eligible healthy
// engines. It may see live state, which no real router has:
//
//   - View.InFlight: every engine's requests in flight, from all front
//     ends (as least-loaded sees them);
//   - View.PrefillBacklog: the prompt tokens queued ahead of a new
//     request on each engine, i.e. the uncached prompts of the requests
//     sent there that have no first token yet (cache hits estimated from
//     the engine's prefix cache when each was sent).
//
// The start time on engine e is network_ms(cluster, e) + 1000 ·
// backlog_e / prefill_tokens_per_s_e: in the engine model the prompts
// queued ahead are computed before this one's (whole, or in chunks in
// arrival order), at the engine's prefill rate. With chunked prefill each
// step also carries the decodes (a 8192-token h100 step at 10 decodes
// spends 4% of its time on them), which the estimate leaves out, so it
// errs towards admitting. It also leaves out the request's own prefill (a 100k-token prompt takes 11 s on
// an h100: it cannot meet a 2 s TTFT anywhere, and refusing it would be
// shedding on an idle fleet) and any wait for a free batch slot (answer
// lengths are not known ahead), so it sheds only requests that are late
// before they begin: it never refuses while some engine has no prefill
// queued beyond the SLO.
type jsqAdmission struct {
	f    *Fleet
	c    int
	next int
	cand []int32
	top  []int32
}

func jsqAdmissionPolicy() Policy {
	return Policy{Name: "jsq-admission", About: "least-loaded (live) with admission: refuses only requests that can start within ttft_slo_ms nowhere",
		New: func(f *Fleet, c int, _ uint64) (Router, error) { return &jsqAdmission{f: f, c: c}, nil }}
}

// ReadsBacklog asks the simulator to track View.PrefillBacklog.
func (*jsqAdmission) ReadsBacklog() {}

// startMs is when request r could begin its prefill on engine e, from now.
func (j *jsqAdmission) startMs(v View, e int) float64 {
	eng := j.f.Engines[e]
	return j.f.Clusters[j.c].NetworkMs[e] + 1000*float64(v.PrefillBacklog(e))/eng.PrefillTokensPerS
}

func (j *jsqAdmission) Pick(v View, _ *Request) int {
	j.cand = v.Candidates(j.cand[:0])
	if len(j.cand) == 0 {
		return NoEngine
	}
	feasible := j.cand[:0]
	for _, e := range j.cand {
		if j.startMs(v, int(e)) <= j.f.TTFTSLOMs {
			feasible = append(feasible, e)
		}
	}
	if len(feasible) == 0 {
		return Shed
	}
	net := j.f.Clusters[j.c].NetworkMs
	j.top = j.top[:0]
	bestLoad, bestNet := 0.0, 0.0
	for _, e := range feasible {
		load, ms := float64(v.InFlight(int(e)))/float64(max(j.f.Engines[e].Slots, 1)), net[e]
		switch {
		case len(j.top) == 0 || load < bestLoad || (load == bestLoad && ms < bestNet):
			bestLoad, bestNet, j.top = load, ms, append(j.top[:0], e)
		case load == bestLoad && ms == bestNet:
			j.top = append(j.top, e)
		}
	}
	j.next++
	return int(j.top[j.next%len(j.top)])
}

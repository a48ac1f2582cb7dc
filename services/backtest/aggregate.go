package backtest

// aggregate computes every per-request aggregate of res from the
// outcomes, in request order, by the rules README.md gives, so that the
// same numbers follow from the `--requests` rows: counts and fractions of
// all requests, latency statistics of served requests (nearest-rank
// quantiles, the mean summed in ascending order), the cache hit ratio as
// Σ cached / Σ prompt tokens of served requests, and SLO attainment as
// the share of all requests served within both SLO bounds.
func (r *recorder) aggregate(res *PolicyResult) {
	o, w, n := r.out, r.w, r.w.len()
	nc, ne := len(r.fi.clusters), len(r.fi.engines)
	ttft, e2e, tbot, byCluster, byEngine := r.latencyBuffers(nc, ne)
	var prompt, cached int64
	engPrompt, engCached := make([]int64, ne), make([]int64, ne)
	res.Clusters = make([]ClusterResult, nc)
	for c, name := range r.fi.clusters {
		res.Clusters[c].Name = name
	}
	for i := range n {
		c := int(w.cluster[i])
		cr := &res.Clusters[c]
		cr.Requests++
		switch o.kind[i] {
		case outShed:
			res.Shed++
			cr.Shed++
			continue
		case outFailed:
			res.Failed++
			continue
		case outServed:
		default:
			continue
		}
		e := int(o.engine[i])
		res.Served++
		cr.Served++
		if o.good(i, r.slo) {
			res.Good++
			cr.Good++
		}
		ttft, e2e, tbot = append(ttft, o.ttft[i]), append(e2e, o.e2e[i]), append(tbot, o.tbot[i])
		byCluster[c] = append(byCluster[c], o.ttft[i])
		byEngine[e] = append(byEngine[e], o.ttft[i])
		p := int64(w.prompt[i])
		prompt, cached = prompt+p, cached+int64(o.cached[i])
		engPrompt[e], engCached[e] = engPrompt[e]+p, engCached[e]+int64(o.cached[i])
	}
	res.Requests = n
	res.TTFTMs, res.E2EMs, res.TBOTMs = summarise(ttft), summarise(e2e), summarise(tbot)
	res.TTFTCDF, res.E2ECDF = cdf(ttft), cdf(e2e)
	res.CacheHitRatio = ratio(float64(cached), float64(prompt))
	res.SLO = r.slo
	res.SLOAttainment = ratio(float64(res.Good), float64(n))
	res.ServedFraction = ratio(float64(res.Served), float64(n))
	res.ShedFraction = ratio(float64(res.Shed), float64(n))
	res.FailedFraction = ratio(float64(res.Failed), float64(n))
	res.GoodputRPS = ratio(float64(res.Good), arrivalSpanS(w))
	for c := range res.Clusters {
		cr := &res.Clusters[c]
		cr.TTFTMs = summarise(byCluster[c])
		cr.SLOAttainment = ratio(float64(cr.Good), float64(cr.Requests))
	}
	res.Engines = make([]EngineResult, ne)
	for e, name := range r.fi.engines {
		res.Engines[e] = EngineResult{Name: name, TTFTMs: summarise(byEngine[e]),
			CacheHitRatio: ratio(float64(engCached[e]), float64(engPrompt[e]))}
	}
}

// arrivalSpanS is the time from the first to the last arrival of the
// workload, in seconds, computed from the arrival times in ms as the
// per-request records carry them.
func arrivalSpanS(w *workload) float64 {
	return (arrivalMs(w, w.len()-1) - arrivalMs(w, 0)) / 1000
}

// arrivalMs is request i's arrival time in ms, as the records write it.
func arrivalMs(w *workload, i int) float64 { return float64(w.arrival[i]) / 1e6 }

// latencyBuffers returns empty slices with room for the served
// requests' latencies: overall, by cluster and by engine, cut from one
// allocation (appending from nil doubled each of them up, about half a
// megabyte a run for the optimizer's 3,658 requests).
func (r *recorder) latencyBuffers(nc, ne int) (ttft, e2e, tbot []float64, byCluster, byEngine [][]float64) {
	o, w := r.out, r.w
	perCluster, perEngine := make([]int, nc), make([]int, ne)
	served := 0
	for i := range w.len() {
		if o.kind[i] == outServed {
			served++
			perCluster[w.cluster[i]]++
			perEngine[o.engine[i]]++
		}
	}
	buf := make([]float64, 5*served)
	take := func(n int) []float64 {
		s := buf[:0:n]
		buf = buf[n:]
		return s
	}
	ttft, e2e, tbot = take(served), take(served), take(served)
	byCluster, byEngine = make([][]float64, nc), make([][]float64, ne)
	for c, n := range perCluster {
		byCluster[c] = take(n)
	}
	for e, n := range perEngine {
		byEngine[e] = take(n)
	}
	return ttft, e2e, tbot, byCluster, byEngine
}

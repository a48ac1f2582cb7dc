package backtest

import (
	"github.com/ilb-router/ilb/solver/engine"
	"github.com/ilb-router/ilb/solver/sched"
)

// recorder accumulates one simulation's outcome.
type recorder struct {
	fi *fleetInfo
	w  *workload

	ttft, e2e        []float64
	ttftByCluster    [][]float64
	ttftByEngine     [][]float64
	prompt, cached   int64
	shed, failed     int
	followups, moved int
	churnSum         float64
	churnN           int
	updates          int

	clusterReq, clusterServed    []int
	clusterRouted, clusterRemote []int
	engReq                       []int
	engPrompt, engCached         []int64
	engOccupancy                 []float64 // Σ over status ticks of running/(max batch × ready)
	ticks                        int

	series   *Series
	bucketNs int64
	bucket   seriesBucket
	result   PolicyResult
}

// seriesBucket accumulates one step of the series.
type seriesBucket struct {
	end            int64
	inflightSum    []float64
	samples        int
	prompt, cached int64
	served         int
}

func newRecorder(cfg *Config, fi *fleetInfo, w *workload) *recorder {
	ne, nc := len(fi.engines), len(fi.clusters)
	r := &recorder{
		fi: fi, w: w,
		ttft: make([]float64, 0, w.len()), e2e: make([]float64, 0, w.len()),
		ttftByCluster: make([][]float64, nc), ttftByEngine: make([][]float64, ne),
		clusterReq: make([]int, nc), clusterServed: make([]int, nc),
		clusterRouted: make([]int, nc), clusterRemote: make([]int, nc),
		engReq: make([]int, ne), engPrompt: make([]int64, ne), engCached: make([]int64, ne),
		engOccupancy: make([]float64, ne),
		series:       &Series{StepS: cfg.SeriesInterval.Seconds(), Engines: fi.engines},
		bucketNs:     int64(cfg.SeriesInterval),
	}
	r.bucket = seriesBucket{end: r.bucketNs, inflightSum: make([]float64, ne)}
	return r
}

// routed counts request i sent to engine e.
func (r *recorder) routed(s *sim, i, e int) {
	c := int(r.w.cluster[i])
	r.engReq[e]++
	r.clusterRouted[c]++
	if r.fi.remote[c][e] {
		r.clusterRemote[c]++
	}
}

func (r *recorder) fail(*sim, int) { r.failed++ }

// served records a finished request; the network time between its
// cluster and the engine is added to both latencies.
func (r *recorder) served(s *sim, i, e int, d *engine.Done) {
	c := int(r.w.cluster[i])
	net := r.fi.net[c][e]
	ttft := d.TTFTMs + net
	r.ttft = append(r.ttft, ttft)
	r.ttftByCluster[c] = append(r.ttftByCluster[c], ttft)
	r.ttftByEngine[e] = append(r.ttftByEngine[e], ttft)
	r.e2e = append(r.e2e, float64(d.FinishNs-d.ArrivalNs)/1e6+net)
	r.prompt += int64(d.PromptTokens)
	r.cached += int64(d.CachedTokens)
	r.engPrompt[e] += int64(d.PromptTokens)
	r.engCached[e] += int64(d.CachedTokens)
	r.clusterServed[c]++
	r.bucket.prompt += int64(d.PromptTokens)
	r.bucket.cached += int64(d.CachedTokens)
	r.bucket.served++
}

// weightUpdate records that cluster c's weights changed from old to new
// (by engine index), for weight_churn.
func (r *recorder) weightUpdate(old, new []float64) {
	r.churnSum += sched.TotalVariation(r.weightMap(old), r.weightMap(new))
	r.churnN++
}

func (r *recorder) weightMap(w []float64) map[string]float64 {
	m := make(map[string]float64, len(w))
	for e, v := range w {
		if v != 0 {
			m[r.fi.engines[e]] = v
		}
	}
	return m
}

// sample is called at every status tick with the engines' status.
func (r *recorder) sample(s *sim, t int64, e int, st engine.Status) {
	if e == 0 {
		for t >= r.bucket.end {
			r.closeBucket(s)
		}
		r.bucket.samples++
		r.ticks++
	}
	r.bucket.inflightSum[e] += float64(s.inflight[e])
	if slots := s.fi.params[e].MaxBatch * max(st.ReadyReplicas, 1); slots > 0 {
		r.engOccupancy[e] += float64(st.Running) / float64(slots)
	}
}

func (r *recorder) closeBucket(s *sim) {
	b := &r.bucket
	ne := len(r.fi.engines)
	inflight := make([]float64, ne)
	for e := range inflight {
		inflight[e] = ratio(b.inflightSum[e], float64(b.samples))
		b.inflightSum[e] = 0
	}
	sr := r.series
	sr.TimeS = append(sr.TimeS, float64(b.end)/1e9)
	sr.InFlight = append(sr.InFlight, inflight)
	sr.PromptTokens = append(sr.PromptTokens, b.prompt)
	sr.CachedTokens = append(sr.CachedTokens, b.cached)
	sr.Served = append(sr.Served, b.served)
	if w := fleetShares(s); w != nil {
		sr.Weights = append(sr.Weights, w)
	}
	b.end += r.bucketNs
	b.samples, b.prompt, b.cached, b.served = 0, 0, 0, 0
}

// fleetShares is the share of all traffic each engine is meant to get:
// Σ over clusters of demand fraction × weight. Nil for policies without
// weights.
func fleetShares(s *sim) []float64 {
	out := make([]float64, len(s.fi.engines))
	for c, d := range s.fi.demand {
		w := s.pol.weights(c)
		if w == nil {
			return nil
		}
		for e, v := range w {
			out[e] += d * v
		}
	}
	return out
}

// finish computes the result once the simulation has ended.
func (r *recorder) finish(s *sim) {
	if r.bucket.samples > 0 || r.bucket.served > 0 {
		r.closeBucket(s)
	}
	res := &r.result
	res.Policy = s.name
	res.Requests = r.w.len()
	res.Served, res.Shed, res.Failed = len(r.ttft), r.shed, r.failed
	res.TTFTMs, res.E2EMs = summarise(r.ttft), summarise(r.e2e)
	res.TTFTCDF, res.E2ECDF = cdf(r.ttft), cdf(r.e2e)
	res.CacheHitRatio = ratio(float64(r.cached), float64(r.prompt))
	res.WeightChurn, res.WeightUpdates = ratio(r.churnSum, float64(r.churnN)), r.churnN
	res.Followups = r.followups
	res.FollowupMovedRatio = ratio(float64(r.moved), float64(r.followups))
	res.SimulatedS = float64(s.now) / 1e9
	res.Series = r.series
	for i := range r.w.cluster {
		r.clusterReq[r.w.cluster[i]]++
	}
	for c, name := range r.fi.clusters {
		res.Clusters = append(res.Clusters, ClusterResult{
			Name: name, Requests: r.clusterReq[c], Served: r.clusterServed[c],
			TTFTMs:      summarise(r.ttftByCluster[c]),
			RemoteRatio: ratio(float64(r.clusterRemote[c]), float64(r.clusterRouted[c])),
		})
	}
	for e, name := range r.fi.engines {
		util := ratio(r.engOccupancy[e], float64(r.ticks))
		res.MaxUtilization = max(res.MaxUtilization, util)
		res.Engines = append(res.Engines, EngineResult{
			Name: name, Requests: r.engReq[e], Utilization: util, TTFTMs: summarise(r.ttftByEngine[e]),
			BusyRatio:     ratio(float64(s.busyNs(e)), float64(s.now)),
			CacheHitRatio: ratio(float64(r.engCached[e]), float64(r.engPrompt[e])),
		})
	}
}

// Series are a policy's time series for the report, one point per
// Config.SeriesInterval of simulated time.
type Series struct {
	StepS    float64
	Engines  []string
	TimeS    []float64   // end of each step
	InFlight [][]float64 // [step][engine]: mean requests in flight
	Weights  [][]float64 // [step][engine]: share of fleet traffic; nil without weights
	// PromptTokens and CachedTokens are of the requests served in each
	// step: their ratio is the cache hit ratio over time.
	PromptTokens, CachedTokens []int64
	Served                     []int // [step]
}

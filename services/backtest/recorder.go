package backtest

import (
	"math"
	"slices"
	"strings"

	"github.com/ilb-router/ilb/solver/engine"
)

// recorder accumulates one simulation's outcome.
type recorder struct {
	fi *fleetInfo
	w  *workload

	out              *outcomes
	slo              SLO
	followups, moved int
	refused          int // shed by local admission
	churnSum         float64
	churnN           int
	movedInSpan      float64 // churnSum of the updates up to the last arrival
	lastArrival      int64
	byName           []int // engine indexes in the order of their names, for weightUpdate
	updates          int

	clusterRouted, clusterRemote []int
	engReq                       []int
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
	served, shed   int
}

func newRecorder(cfg *Config, fi *fleetInfo, w *workload) *recorder {
	ne, nc := len(fi.engines), len(fi.clusters)
	r := &recorder{
		fi: fi, w: w, out: newOutcomes(w.len()),
		slo:           SLO{TTFTMs: cfg.Fleet.TTFTSLOMs, TBOTMs: cfg.Fleet.TBOTSLOMs},
		clusterRouted: make([]int, nc), clusterRemote: make([]int, nc),
		engReq: make([]int, ne), engOccupancy: make([]float64, ne),
		series:   &Series{StepS: cfg.SeriesInterval.Seconds(), Engines: fi.engines},
		bucketNs: int64(cfg.SeriesInterval),
	}
	r.bucket = seriesBucket{end: r.bucketNs, inflightSum: make([]float64, ne)}
	if w.len() > 0 {
		r.lastArrival = w.arrival[w.len()-1]
	}
	return r
}

// routed counts request i sent to engine e.
func (r *recorder) routed(s *sim, i, e int) {
	c := int(r.w.cluster[i])
	r.out.engine[i] = int16(e)
	r.engReq[e]++
	r.clusterRouted[c]++
	if r.fi.remote[r.w.row[i]][e] {
		r.clusterRemote[c]++
	}
}

// fail records request i as failed.
func (r *recorder) fail(_ *sim, i int) { r.out.kind[i] = outFailed }

// shed records request i as refused by the policy.
func (r *recorder) shed(i int) {
	r.out.kind[i] = outShed
	r.bucket.shed++
}

// served records a finished request. Its latencies run from its arrival
// in the trace (time held at a router included) and add the network time
// between its cluster and the engine.
func (r *recorder) served(_ *sim, i, e int, d *engine.Done) {
	net, at := r.fi.net[r.w.row[i]][e], r.w.arrival[i]
	o := r.out
	o.kind[i] = outServed
	o.ttft[i] = float64(d.FirstTokenNs-at)/1e6 + net
	o.e2e[i] = float64(d.FinishNs-at)/1e6 + net
	o.tbot[i] = d.TBOTMs
	o.cached[i] = int32(d.CachedTokens)
	r.bucket.prompt += int64(d.PromptTokens)
	r.bucket.cached += int64(d.CachedTokens)
	r.bucket.served++
}

// weightUpdate records that cluster c's weights changed from old to new
// (by engine index), for weight_churn: sched.TotalVariation of the two
// as maps by engine name, without building them (they were a tenth of
// pid's CPU). It sums |old - new| in the order of the engines' names, as
// TotalVariation does; an engine with no weight in either adds 0, which
// leaves the sum as it is, so the result is the same bit for bit
// (TestWeightUpdateIsTotalVariation).
func (r *recorder) weightUpdate(old, new []float64, now int64) {
	if r.byName == nil {
		r.byName = namesOrder(r.fi.engines)
	}
	sum := 0.0
	for _, e := range r.byName {
		sum += math.Abs(weightAt(old, e) - weightAt(new, e))
	}
	r.churnSum += sum / 2
	r.churnN++
	if now <= r.lastArrival {
		r.movedInSpan += sum / 2
	}
}

// weightAt is w[e], 0 past its end.
func weightAt(w []float64, e int) float64 {
	if e < len(w) {
		return w[e]
	}
	return 0
}

// namesOrder returns the indexes of names in the names' sorted order.
func namesOrder(names []string) []int {
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(names[a], names[b]) })
	return order
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
	sr.Shed = append(sr.Shed, b.shed)
	if w := fleetShares(s); w != nil {
		sr.Weights = append(sr.Weights, w)
	}
	b.end += r.bucketNs
	b.samples, b.prompt, b.cached, b.served, b.shed = 0, 0, 0, 0, 0
}

// fleetShares is the share of all traffic each engine is meant to get:
// Σ over demand rows of their demand share × weight. Nil for policies
// without weights.
func fleetShares(s *sim) []float64 {
	out := make([]float64, len(s.fi.engines))
	for c, d := range s.fi.rowShare {
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
	if r.bucket.samples > 0 || r.bucket.served > 0 || r.bucket.shed > 0 {
		r.closeBucket(s)
	}
	res := &r.result
	res.Policy = s.name
	r.aggregate(res)
	res.ShedAdmission = r.refused
	res.WeightChurn, res.WeightUpdates = ratio(r.churnSum, float64(r.churnN)), r.churnN
	res.Followups = r.followups
	res.FollowupMovedRatio = ratio(float64(r.moved), float64(r.followups))
	res.SimulatedS = float64(s.now) / 1e9
	if rows, span := s.fi.nrows(), arrivalSpanS(r.w); rows > 0 && span > 0 {
		res.WeightMovedPerMinute = r.movedInSpan / float64(rows) / (span / 60)
	}
	res.Series = r.series
	for c := range res.Clusters {
		res.Clusters[c].RemoteRatio = ratio(float64(r.clusterRemote[c]), float64(r.clusterRouted[c]))
	}
	for e := range res.Engines {
		util := ratio(r.engOccupancy[e], float64(r.ticks))
		res.MaxUtilization = max(res.MaxUtilization, util)
		res.Engines[e].Requests, res.Engines[e].Utilization = r.engReq[e], util
		res.Engines[e].BusyRatio = ratio(float64(s.busyNs(e)), float64(s.now))
	}
	res.outcomes = r.out
	if c, ok := s.pol.(interface {
		calibration(*recorder, int64) []EngineCalibration
	}); ok {
		res.Calibration = c.calibration(r, s.now)
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
	Shed                       []int // [step]: requests refused by the policy
}

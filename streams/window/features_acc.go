package window

import (
	"cmp"
	"slices"
	"strings"

	"github.com/ilb-router/ilb/schemas"
)

// engineAcc is one engine's state in one window: one cell per cluster seen
// in its completions, one for completions without a (room for their)
// cluster, and the status events. The engine row is the merge of the cells,
// made at emission: a completion then touches one cell's sketches, not two
// (sketch updates are cache misses, and the bulk of the cost per event).
// Reset keeps every slice and sketch so that a recycled window does not
// allocate.
type engineAcc struct {
	other    cellAcc // completions with no cluster, or one beyond MaxClustersPerEngine
	status   statusAcc
	clusters []clusterAcc // active ones first; reset ones kept beyond n
	n        int
	hot      int // cluster used last
}

type clusterAcc struct {
	name, class string
	cell        cellAcc
}

// cellAcc accumulates completions (an engine row or a pair row).
type cellAcc struct {
	requests, errors     uint64
	prompt, cachedPrompt uint64
	ttft, tbot           Sketch
	// The request shape of the completions without error: prompt and
	// output tokens, and the squares of the uncached prompt tokens.
	okPrompt, okOutput uint64
	okUncachedSq       float64
}

// statusAcc accumulates status events (engine rows only).
type statusAcc struct {
	events      uint64
	inflightSum float64
	utilSum     float64
	utilEvents  uint64 // events with a known max batch
	kvSum       float64
	kvEvents    uint64
	lastNs      int64
	ready       uint32
	health      schemas.Health
}

// completionSample is what one completion adds, worked out once for all
// the windows and cells it goes to.
type completionSample struct {
	ttft, tbot sample
	failed     bool
	class      string // the completion's request class (Features.classify)
}

func prepareCompletion(c *schemas.Completion) completionSample {
	if c.Error != "" {
		return completionSample{failed: true}
	}
	s := completionSample{ttft: prepare(c.TTFTMs)}
	if c.OutputTokens >= 2 { // a single token has no inter-token time
		s.tbot = prepare(c.TBOTMs)
	}
	return s
}

func (a *engineAcc) reset() {
	a.other.reset()
	a.status = statusAcc{}
	for i := range a.n {
		a.clusters[i].name, a.clusters[i].class = "", ""
		a.clusters[i].cell.reset()
	}
	a.n, a.hot = 0, 0
}

// addCompletion adds c to its cluster's cell; false means the cluster did
// not fit (MaxClustersPerEngine), and c went to the engine row only.
func (a *engineAcc) addCompletion(c *schemas.Completion, s *completionSample, maxClusters int) bool {
	if c.Cluster == "" {
		a.other.add(c, s)
		return true
	}
	cell := a.cluster(c.Cluster, s.class, maxClusters)
	if cell == nil {
		a.other.add(c, s)
		return false
	}
	cell.add(c, s)
	return true
}

func (a *engineAcc) cluster(name, class string, maxClusters int) *cellAcc {
	if a.hot < a.n && a.clusters[a.hot].name == name && a.clusters[a.hot].class == class {
		return &a.clusters[a.hot].cell
	}
	for i := range a.n {
		if a.clusters[i].name == name && a.clusters[i].class == class {
			a.hot = i
			return &a.clusters[i].cell
		}
	}
	if a.n >= maxClusters {
		return nil
	}
	if a.n == len(a.clusters) {
		a.clusters = append(a.clusters, clusterAcc{})
	}
	a.clusters[a.n].name, a.clusters[a.n].class = name, class
	a.hot = a.n
	a.n++
	return &a.clusters[a.hot].cell
}

func (c *cellAcc) reset() {
	c.requests, c.errors, c.prompt, c.cachedPrompt = 0, 0, 0, 0
	c.okPrompt, c.okOutput, c.okUncachedSq = 0, 0, 0
	c.ttft.Reset()
	c.tbot.Reset()
}

func (c *cellAcc) merge(o *cellAcc) {
	c.requests += o.requests
	c.errors += o.errors
	c.prompt += o.prompt
	c.cachedPrompt += o.cachedPrompt
	c.okPrompt += o.okPrompt
	c.okOutput += o.okOutput
	c.okUncachedSq += o.okUncachedSq
	c.ttft.Merge(&o.ttft)
	c.tbot.Merge(&o.tbot)
}

func (c *cellAcc) add(x *schemas.Completion, s *completionSample) {
	c.requests++
	c.prompt += uint64(x.PromptTokens)
	c.cachedPrompt += uint64(min(x.CachedPromptTokens, x.PromptTokens))
	if s.failed {
		c.errors++
		return
	}
	u := float64(x.PromptTokens - min(x.CachedPromptTokens, x.PromptTokens))
	c.okPrompt += uint64(x.PromptTokens)
	c.okOutput += uint64(x.OutputTokens)
	c.okUncachedSq += u * u
	c.ttft.addSample(s.ttft)
	c.tbot.addSample(s.tbot)
}

func (s *statusAcc) add(x *schemas.EngineStatus, maxBatch int) {
	s.events++
	s.inflightSum += float64(x.Running) + float64(x.Waiting)
	if maxBatch > 0 {
		s.utilSum += float64(x.Running) / (float64(maxBatch) * float64(max(x.ReadyReplicas, 1)))
		s.utilEvents++
	}
	if kv := x.KVCacheUtilization; kv == kv {
		s.kvSum += kv
		s.kvEvents++
	}
	if s.events == 1 || x.TimeUnixNano >= s.lastNs {
		s.lastNs, s.ready, s.health = x.TimeUnixNano, x.ReadyReplicas, x.Health
	}
}

// appendRows appends the engine row and then the pair rows, by cluster;
// all is scratch space for the engine row's merged cell.
func (a *engineAcc) appendRows(dst []schemas.Feature, e Entry[engineAcc], all *cellAcc, sizeSec float64) []schemas.Feature {
	all.reset()
	all.merge(&a.other)
	for i := range a.n {
		all.merge(&a.clusters[i].cell)
	}
	row := all.row(e, "", sizeSec)
	st := &a.status
	row.StatusEvents = st.events
	row.InFlight = ratio(st.inflightSum, st.events)
	row.Utilization = ratio(st.utilSum, st.utilEvents)
	row.KVCacheUtil = ratio(st.kvSum, st.kvEvents)
	row.ReadyReplicas = st.ready
	row.Healthy = st.events > 0 && st.health == schemas.HealthHealthy
	row.LateEvents = e.Late
	dst = append(dst, row)
	active := a.clusters[:a.n]
	slices.SortFunc(active, func(x, y clusterAcc) int {
		return cmp.Or(strings.Compare(x.name, y.name), strings.Compare(x.class, y.class))
	})
	a.hot = 0
	for i := range active {
		row := active[i].cell.row(e, active[i].name, sizeSec)
		row.Class = active[i].class
		dst = append(dst, row)
	}
	return dst
}

func (c *cellAcc) row(e Entry[engineAcc], cluster string, sizeSec float64) schemas.Feature {
	ttft50, ttft90, ttft99 := c.ttft.Quantiles3(0.50, 0.90, 0.99)
	tbot50, tbot90, tbot99 := c.tbot.Quantiles3(0.50, 0.90, 0.99)
	return schemas.Feature{
		WindowStartUnixNano: e.Window.StartNs,
		WindowEndUnixNano:   e.Window.EndNs,
		Engine:              e.Key,
		Cluster:             cluster,
		Requests:            c.requests,
		Errors:              c.errors,
		ArrivalRPS:          float64(c.requests) / sizeSec,
		TTFTP50Ms:           ttft50,
		TTFTP90Ms:           ttft90,
		TTFTP99Ms:           ttft99,
		TBOTP50Ms:           tbot50,
		TBOTP90Ms:           tbot90,
		TBOTP99Ms:           tbot99,
		ErrorRate:           ratio(float64(c.errors), c.requests),
		CacheHitRatio:       ratio(float64(c.cachedPrompt), c.prompt),
		PromptTokensMean:    ratio(float64(c.okPrompt), c.requests-c.errors),
		OutputTokensMean:    ratio(float64(c.okOutput), c.requests-c.errors),
		UncachedSqMean:      ratio(c.okUncachedSq, c.requests-c.errors),
	}
}

func ratio(sum float64, n uint64) float64 {
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

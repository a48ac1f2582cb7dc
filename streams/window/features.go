package window

import (
	"fmt"
	"maps"

	"github.com/ilb-router/ilb/schemas"
)

// FeaturesConfig sets up feature accumulation (Features).
type FeaturesConfig struct {
	Window Config
	// MaxBatchPerReplica maps an engine to the most requests one replica
	// runs at once (the fleet file's max_batch). Utilization is the mean of
	// running / (max batch x max(ready replicas, 1)) over status events.
	// For an engine missing here Utilization is 0: running+waiting is not
	// a batch limit, and a guess would read like a measurement.
	MaxBatchPerReplica map[string]int
	// MaxClustersPerEngine bounds the (cluster, class, engine) rows of one
	// engine in one window. Completions from further clusters (or
	// classes) count in the engine row only, and in
	// FeatureStats.ClusterOverflow.
	MaxClustersPerEngine int
	// Classify returns the request class of a completion (the Class of
	// its pair row: a key of the fleet's model and prompt band, e.g.
	// services/internal/routing.Rows.Label). nil, or "" from it, puts
	// the completion in its cluster's row without a class, as in a fleet
	// of one class. It is called once per completion with a cluster (its
	// arguments are values so that the event does not escape).
	Classify func(engine, model string, promptTokens uint32) string
}

// DefaultFeaturesConfig returns DefaultConfig windows, no known batch
// sizes and up to 256 clusters per engine.
func DefaultFeaturesConfig() FeaturesConfig {
	return FeaturesConfig{Window: DefaultConfig(), MaxClustersPerEngine: 256}
}

// Validate reports the first problem with c.
func (c FeaturesConfig) Validate() error {
	if err := c.Window.Validate(); err != nil {
		return err
	}
	if c.MaxClustersPerEngine <= 0 {
		return fmt.Errorf("%w: max clusters per engine %d must be positive", ErrConfig, c.MaxClustersPerEngine)
	}
	for e, b := range c.MaxBatchPerReplica {
		if b <= 0 {
			return fmt.Errorf("%w: max batch %d of engine %q must be positive", ErrConfig, b, e)
		}
	}
	return nil
}

// FeatureStats adds feature counters to the Windower's.
type FeatureStats struct {
	Stats
	ClusterOverflow uint64 // window updates whose cluster exceeded MaxClustersPerEngine
	UnknownKind     uint64 // events of no known kind (not passed to the Windower)
}

// Features turns signal events into feature rows (schemas.Feature): per
// window, one row per engine and one per (cluster, class, engine) seen in
// completions (the class from FeaturesConfig.Classify; none without it). It is a Windower keyed by engine, so late events are counted
// on engine rows (pair rows carry LateEvents 0), and status-derived fields
// (InFlight, Utilization, KVCacheUtil, ReadyReplicas, Healthy,
// StatusEvents) are on engine rows only. Latency quantiles exclude failed
// requests; TBOT also excludes requests with fewer than two output tokens.
// A row's identity is its window bounds, engine and cluster.
type Features struct {
	w           *Windower[engineAcc]
	wcfg        Config // fixed at NewFeatures (Reconfigure checks it)
	maxBatch    map[string]int
	maxClusters int
	classify    func(engine, model string, promptTokens uint32) string
	sizeSec     float64
	stats       FeatureStats
	out         []schemas.Feature // rows being drained
	all         cellAcc           // scratch for engine rows
}

// NewFeatures returns an empty Features.
func NewFeatures(cfg FeaturesConfig) (*Features, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w, err := New(cfg.Window, (*engineAcc).reset)
	if err != nil {
		return nil, err
	}
	return &Features{
		w:           w,
		wcfg:        cfg.Window,
		maxBatch:    maps.Clone(cfg.MaxBatchPerReplica),
		maxClusters: cfg.MaxClustersPerEngine,
		classify:    cfg.Classify,
		sizeSec:     cfg.Window.Size.Seconds(),
	}, nil
}

// Add accumulates one event, keyed by its engine and timed by its event
// time (a completion's finish time, a status's time). The event should have
// passed schemas validation; Add never panics on one that has not.
func (f *Features) Add(pos Position, ev *schemas.Event) Outcome {
	switch ev.Kind {
	case schemas.KindCompletion:
		c := &ev.Completion
		s := prepareCompletion(c)
		if f.classify != nil && c.Cluster != "" {
			s.class = f.classify(c.Engine, c.Model, c.PromptTokens)
		}
		return f.w.Add(pos, c.TimeUnixNano, c.Engine, func(a *engineAcc) {
			if !a.addCompletion(c, &s, f.maxClusters) {
				f.stats.ClusterOverflow++
			}
		})
	case schemas.KindStatus:
		st := &ev.Status
		mb := f.maxBatch[st.Engine]
		return f.w.Add(pos, st.TimeUnixNano, st.Engine, func(a *engineAcc) { a.status.add(st, mb) })
	}
	f.stats.UnknownKind++
	f.w.Skip(pos)
	return Invalid
}

// Skip is Windower.Skip.
func (f *Features) Skip(pos Position) { f.w.Skip(pos) }

// Drain appends the rows of every closed window to dst, sorted by window
// end, engine, then cluster (the engine row, with an empty cluster, first).
func (f *Features) Drain(dst []schemas.Feature) []schemas.Feature {
	f.out = dst
	f.w.Drain(f.emit)
	dst, f.out = f.out, nil
	return dst
}

// Flush appends the rows of every window, open or not (Windower.Flush).
func (f *Features) Flush(dst []schemas.Feature) []schemas.Feature {
	f.out = dst
	f.w.Flush(f.emit)
	dst, f.out = f.out, nil
	return dst
}

func (f *Features) emit(e Entry[engineAcc]) { f.out = e.Acc.appendRows(f.out, e, &f.all, f.sizeSec) }

// Stats returns the counters.
func (f *Features) Stats() FeatureStats {
	s := f.stats
	s.Stats = f.w.Stats()
	return s
}

// AdvanceWatermark is Windower.AdvanceWatermark.
func (f *Features) AdvanceWatermark(wmNs int64) { f.w.AdvanceWatermark(wmNs) }

// Watermark is Windower.Watermark.
func (f *Features) Watermark() (int64, bool) { return f.w.Watermark() }

// Ready is Windower.Ready.
func (f *Features) Ready() bool { return f.w.Ready() }

// Commits is Windower.Commits.
func (f *Features) Commits(dst []Commit) []Commit { return f.w.Commits(dst) }

// Checkpoint is Windower.Checkpoint.
func (f *Features) Checkpoint() Checkpoint { return f.w.Checkpoint() }

// Restore is Windower.Restore.
func (f *Features) Restore(cp Checkpoint) error { return f.w.Restore(cp) }

// Replaying is Windower.Replaying.
func (f *Features) Replaying() bool { return f.w.Replaying() }

// EndReplay is Windower.EndReplay.
func (f *Features) EndReplay() { f.w.EndReplay() }

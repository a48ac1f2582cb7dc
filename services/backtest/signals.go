package backtest

import (
	"fmt"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/engine"
	"github.com/ilb-router/ilb/streams/window"
)

// enableSignals makes the simulation feed engine status and completion
// events to a feature Windower, as engines feed the aggregator.
func (s *sim) enableSignals() error {
	fc := window.DefaultFeaturesConfig()
	fc.Window.Size, fc.Window.Hop = s.cfg.Window, s.cfg.WindowHop
	fc.MaxBatchPerReplica = make(map[string]int, len(s.fi.engines))
	for e, p := range s.fi.params {
		fc.MaxBatchPerReplica[s.fi.engines[e]] = p.MaxBatch
	}
	if !s.fi.rows.Single {
		fc.Classify = s.fi.rows.Label // as the aggregator does (ConfigFromFleet)
	}
	f, err := window.NewFeatures(fc)
	if err != nil {
		return fmt.Errorf("backtest: features: %w", err)
	}
	s.features = f
	return nil
}

func (s *sim) signalCompletion(e, i int, d *engine.Done) {
	s.ev = schemas.Event{Kind: schemas.KindCompletion, Completion: schemas.Completion{
		Engine:             s.fi.engines[e],
		TimeUnixNano:       d.FinishNs,
		ConversationID:     s.w.convKey[s.w.conv[i]],
		Cluster:            s.fi.clusters[s.w.cluster[i]],
		Model:              s.w.models[s.w.model[i]],
		PromptTokens:       uint32(d.PromptTokens),
		CachedPromptTokens: uint32(d.CachedTokens),
		OutputTokens:       uint32(d.OutputTokens),
		TTFTMs:             d.TTFTMs,
		TBOTMs:             d.TBOTMs,
		Error:              d.Error,
	}}
	s.features.Add(window.Untracked, &s.ev)
}

func (s *sim) signalStatus(e int, t int64, st engine.Status) {
	h := schemas.HealthHealthy
	if !s.healthy[e] {
		h = schemas.HealthUnhealthy
	}
	s.ev = schemas.Event{Kind: schemas.KindStatus, Status: schemas.EngineStatus{
		Engine:             s.fi.engines[e],
		TimeUnixNano:       t,
		Health:             h,
		ReadyReplicas:      uint32(st.ReadyReplicas),
		TotalReplicas:      uint32(st.TotalReplicas),
		Running:            uint32(st.Running),
		Waiting:            uint32(st.Waiting),
		KVCacheUtilization: st.KVUtilization,
	}}
	s.features.Add(window.Untracked, &s.ev)
}

// signalView is what a controller knows from the feature windows: for
// each closed window, in order, the engine rows and the (cluster, engine)
// rows. It is fed by draining the sim's Windower at each control tick.
type signalView struct {
	rows []schemas.Feature // scratch for Drain
}

// windowRows is one closed window's rows. They point into the view's
// scratch, valid until the next drain.
type windowRows struct {
	endNs   int64
	rows    []schemas.Feature  // every row of the window, in Drain order
	engines []*schemas.Feature // by engine index; nil when the engine had no row
}

// drain returns the windows closed since the last call, oldest first.
func (v *signalView) drain(s *sim) []windowRows {
	v.rows = s.features.Drain(v.rows[:0])
	var out []windowRows
	for i := range v.rows {
		r := &v.rows[i]
		if len(out) == 0 || out[len(out)-1].endNs != r.WindowEndUnixNano {
			out = append(out, windowRows{endNs: r.WindowEndUnixNano, rows: v.rows[i:i], engines: make([]*schemas.Feature, len(s.fi.engines))})
		}
		w := &out[len(out)-1]
		w.rows = w.rows[:len(w.rows)+1]
		if e, ok := s.fi.engineIndex(r.Engine); ok && r.Cluster == "" {
			w.engines[e] = r
		}
	}
	return out
}

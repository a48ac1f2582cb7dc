package optimizer

import (
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/optimize"
	"github.com/ilb-router/ilb/streams/kv"
)

// State is what the optimizer last did, for `ilb dev`'s page and
// GET /v1/optimizer. A State is immutable once returned.
type State struct {
	ID     string `json:"id"`
	Leader bool   `json:"leader"`
	// Version is the fleet-wide version last published (by any instance,
	// as far as this one knows); 0 before the first.
	Version     uint64    `json:"version"`
	PublishedAt time.Time `json:"published_at,omitzero"`
	SolvedAt    time.Time `json:"solved_at,omitzero"`
	SolveMs     float64   `json:"solve_ms"`
	ObjectiveMs float64   `json:"objective_ms"`
	Gap         float64   `json:"gap"`
	// WeightChurn is the solver's mean total variation from the previous
	// solution.
	WeightChurn  float64 `json:"weight_churn"`
	InputsDigest string  `json:"inputs_digest,omitempty"`
	// Clock is the configured clock (event or wall); InputsAsOf the end
	// of the newest feature window the last solve saw; LateRows counts
	// rows that arrived after the event clock had solved their window.
	Clock      string         `json:"clock"`
	InputsAsOf time.Time      `json:"inputs_as_of,omitzero"`
	LateRows   uint64         `json:"late_rows"`
	Clusters   []ClusterState `json:"clusters"`
	Engines    []EngineState  `json:"engines"`
	// History holds the last Config.HistoryLen published versions, oldest
	// first.
	History []HistoryPoint `json:"history"`

	Solves    uint64 `json:"solves"`
	Publishes uint64 `json:"publishes"`
	Conflicts uint64 `json:"conflicts"`
	Rejected  uint64 `json:"rejected"`
	LastError string `json:"last_error,omitempty"`
}

// ClusterState is one demand row in the last solve: a cluster, or in a
// fleet of more than one request class a cluster's class (Name is then
// CLUSTER/CLASS, and Cluster, Model and Class say which).
type ClusterState struct {
	Name    string `json:"name"`
	Cluster string `json:"cluster,omitempty"`
	Model   string `json:"model,omitempty"`
	Class   string `json:"class,omitempty"`
	// DemandRPS is the smoothed demand estimate the solve used;
	// ObservedRPS the latest window's served traffic scaled up by the shed
	// fraction then in force.
	DemandRPS    float64            `json:"demand_rps"`
	ObservedRPS  float64            `json:"observed_rps"`
	ShedFraction float64            `json:"shed_fraction"`
	Weights      map[string]float64 `json:"weights"`
	// Kept is true when the cluster was idle and kept its previous weights.
	Kept bool `json:"kept,omitempty"`
}

// EngineState is one engine in the last solve.
type EngineState struct {
	Name   string `json:"name"`
	Region string `json:"region"`
	SKU    string `json:"sku"`
	// Profile says where the latency profile came from: fitted, sku or
	// prior.
	Profile         string  `json:"profile"`
	BaseCapacityRPS float64 `json:"base_capacity_rps"`
	// CapacityRPS is after derating; Derate lists why it is lower.
	CapacityRPS float64  `json:"capacity_rps"`
	Derate      []string `json:"derate,omitempty"`
	LoadRPS     float64  `json:"load_rps"`
	// Utilization is LoadRPS / CapacityRPS (0 without capacity).
	Utilization float64 `json:"utilization"`
	// Model is the latency model the solve used for this engine (its
	// profile at the derated capacity, and max_load_rps, the load it was
	// capped at to serve within the TBOT SLO, routing.SLOLoad, when that
	// lies below max_utilization); PredictedTTFTMs and
	// PredictedTBOTMs are what it predicts at LoadRPS, without the
	// network (optimize.Engine.Predict). Compared with what the engine
	// then does, they are the model's calibration error (`ilb dev`'s page).
	Model           *optimize.Engine `json:"model,omitempty"`
	PredictedTTFTMs float64          `json:"predicted_ttft_ms"`
	PredictedTBOTMs float64          `json:"predicted_tbot_ms"`
}

// HistoryPoint is one published version.
type HistoryPoint struct {
	Version      uint64                        `json:"version"`
	Time         time.Time                     `json:"time"`
	Weights      map[string]map[string]float64 `json:"weights"`
	ShedFraction map[string]float64            `json:"shed_fraction"`
	DemandRPS    map[string]float64            `json:"demand_rps"`
}

// appendHistory returns h with p appended, keeping at most n points. It
// copies, so States already handed out keep their own slice.
func appendHistory(h []HistoryPoint, p HistoryPoint, n int) []HistoryPoint {
	start := max(0, len(h)+1-n)
	out := make([]HistoryPoint, 0, len(h)-start+1)
	out = append(out, h[start:]...)
	return append(out, p)
}

// storeState publishes a new State built from the loop's own fields.
func (o *Optimizer) storeState() {
	st := &State{
		ID: o.cfg.ID, Leader: o.leading(), Version: o.prev.version, PublishedAt: o.prev.at,
		History: o.history, Solves: o.counts.Solves, Publishes: o.counts.Publishes,
		Conflicts: o.counts.Conflicts, Rejected: o.counts.Rejected, LastError: o.counts.LastError,
		Clusters: []ClusterState{}, Engines: []EngineState{}, Clock: o.cfg.Clock, LateRows: o.ticks.late,
	}
	if st.History == nil {
		st.History = []HistoryPoint{}
	}
	if o.deps.NATS != nil {
		if err := kv.ConnError(o.deps.NATS); err != nil {
			o.health.SetReason("optimizer nats", false, err.Error())
		} else {
			o.health.Set("optimizer nats", true)
		}
	}
	if r := o.lastSolve; r != nil {
		st.SolvedAt, st.SolveMs, st.InputsDigest = r.at, r.solveMs, r.digest
		if r.asOf > 0 {
			st.InputsAsOf = time.Unix(0, r.asOf).UTC()
		}
		st.ObjectiveMs, st.Gap, st.WeightChurn = r.sol.ObjectiveMs, r.sol.Gap, r.sol.WeightChurn
		st.Clusters = clusterStates(o.cfg.Fleet, r)
		st.Engines = engineStates(r)
	}
	o.state.Store(st)
}

func clusterStates(f *schemas.Fleet, r *solveResult) []ClusterState {
	out := make([]ClusterState, 0, len(r.plans))
	for _, pl := range r.plans {
		cs := ClusterState{Name: pl.row, DemandRPS: r.demand[pl.row],
			ObservedRPS: r.observed[pl.row], ShedFraction: pl.shed, Weights: pl.weights, Kept: pl.kept}
		if !r.rows.Single {
			rw, _ := r.rows.ByName(pl.row)
			k := r.rows.Classes[r.rows.Rows[rw].Class]
			cs.Cluster, cs.Model, cs.Class = f.Clusters[pl.cluster].Name, k.Model, k.Key()
		}
		out = append(out, cs)
	}
	return out
}

func engineStates(r *solveResult) []EngineState {
	out := make([]EngineState, 0, len(r.caps))
	capped := make(map[string]float64, len(r.problem.Engines))
	for _, e := range r.problem.Engines {
		capped[e.Name] = e.MaxLoadRps
	}
	for _, c := range r.caps {
		e := EngineState{Name: c.fleet.Name, Region: c.fleet.Region, SKU: c.fleet.SKU, Profile: c.profile.source,
			BaseCapacityRPS: c.profile.engine.CapacityRps, CapacityRPS: c.capacity(), Derate: c.reasons,
			LoadRPS: r.sol.EngineLoadRps[c.fleet.Name]}
		if e.CapacityRPS > 0 {
			e.Utilization = e.LoadRPS / e.CapacityRPS
			m := c.profile.engine
			m.CapacityRps = e.CapacityRPS
			m.MaxLoadRps = capped[c.fleet.Name]
			e.Model = &m
			e.PredictedTTFTMs, e.PredictedTBOTMs = m.Predict(e.LoadRPS)
		}
		out = append(out, e)
	}
	return out
}

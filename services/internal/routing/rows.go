package routing

import (
	"errors"
	"fmt"

	"github.com/ilb-router/ilb/schemas"
)

// Demand rows. The optimizer's demand, the solver's clusters and the
// selection tables are per (front-end cluster, request class), a class
// being a model and a band of prompt lengths (schemas.ModelClass). A
// cluster has a row for each class some engine it may use serves. A fleet
// of one class (every fleet without models or context limits) has one row
// per cluster, named like the cluster, so its problems, snapshots and
// features are exactly what they were before classes; otherwise a row is
// named CLUSTER/CLASS (schemas.ModelClass.Key).

// Row is one demand row.
type Row struct {
	Name    string // the solver's cluster name
	Cluster int    // fleet cluster index
	Class   int    // index into Rows.Classes
}

// Rows are a fleet's demand rows. Immutable once built.
type Rows struct {
	Classes []schemas.ModelClass
	Rows    []Row // by cluster (fleet order), then class
	// Single: the fleet has one class; rows are the clusters.
	Single bool

	explicit bool
	keys     []string          // by class: ModelClass.Key
	sole     map[string]string // engine -> the model it serves, for engines serving one
	fallback string            // the model of events naming none, beyond sole
	byCell   []int             // [cluster*len(Classes)+class] -> row, -1 when none
	serves   []bool            // [class*engines+engine]
	engines  int
	byName   map[string]int
	byKey    map[rowKey]int
}

type rowKey struct{ cluster, class string }

// NewRows returns the demand rows of a validated fleet.
func NewRows(f *schemas.Fleet) *Rows {
	classes := f.Classes()
	nc, nk, ne := len(f.Clusters), len(classes), len(f.Engines)
	r := &Rows{Classes: classes, Single: nk == 1, explicit: f.ExplicitModels(), byCell: make([]int, nc*nk),
		serves: make([]bool, nk*ne), engines: ne, byName: map[string]int{}, byKey: map[rowKey]int{},
		sole: map[string]string{}, fallback: f.DefaultModel}
	for _, fe := range f.Engines {
		if ms := f.EngineModels(fe); len(ms) == 1 {
			r.sole[fe.Name] = ms[0]
		}
	}
	for k, class := range classes {
		r.keys = append(r.keys, class.Key())
		for e, fe := range f.Engines {
			r.serves[k*ne+e] = f.Serves(fe, class)
		}
	}
	for c, fc := range f.Clusters {
		for k := range classes {
			r.byCell[c*nk+k] = -1
			if !r.reachable(f, fc, k) {
				continue
			}
			name := fc.Name
			if !r.Single {
				name += "/" + classes[k].Key()
			}
			r.byCell[c*nk+k] = len(r.Rows)
			r.byName[name] = len(r.Rows)
			r.byKey[rowKey{fc.Name, r.classKey(k)}] = len(r.Rows)
			r.Rows = append(r.Rows, Row{Name: name, Cluster: c, Class: k})
		}
	}
	return r
}

// reachable reports whether cluster fc may use an engine serving class k.
func (r *Rows) reachable(f *schemas.Fleet, fc schemas.FleetCluster, k int) bool {
	for e, fe := range f.Engines {
		if r.serves[k*r.engines+e] && f.Eligible(fc, fe) {
			return true
		}
	}
	return false
}

// classKey is the class label of feature rows and completion events: ""
// for a fleet of one class (its features carry none), else the key.
func (r *Rows) classKey(k int) string {
	if r.Single {
		return ""
	}
	return r.keys[k]
}

// Label is the class label of a completion of engine for model with
// promptTokens (window.FeaturesConfig.Classify): "" in a fleet of one
// class; else the key of its class, the model being the event's, else the
// engine's only model, else default_model; "" when the fleet has no such
// class. It allocates nothing for a known class.
func (r *Rows) Label(engine, model string, promptTokens uint32) string {
	if r.Single {
		return ""
	}
	if model == "" {
		if m, ok := r.sole[engine]; ok {
			model = m
		} else {
			model = r.fallback
		}
	}
	k, err := r.Classify(model, int(promptTokens))
	if err != nil {
		return ""
	}
	return r.keys[k]
}

// ClassKey is the class label feature rows carry for class k (""
// for a fleet of one class).
func (r *Rows) ClassKey(k int) string { return r.classKey(k) }

// Len is the number of rows.
func (r *Rows) Len() int { return len(r.Rows) }

// Row returns the row of cluster c (fleet index) and class k.
func (r *Rows) Row(c, k int) (int, bool) {
	i := r.byCell[c*len(r.Classes)+k]
	return i, i >= 0
}

// ByName returns the row with the given solver name.
func (r *Rows) ByName(name string) (int, bool) {
	i, ok := r.byName[name]
	return i, ok
}

// ByKey returns the row of a feature row's cluster and class label.
func (r *Rows) ByKey(cluster, class string) (int, bool) {
	i, ok := r.byKey[rowKey{cluster, class}]
	return i, ok
}

// Serves reports whether engine e (fleet index) serves class k.
func (r *Rows) Serves(k, e int) bool { return r.serves[k*r.engines+e] }

// ClusterRows returns the rows of cluster c, in class order.
func (r *Rows) ClusterRows(c int) []int {
	var out []int
	for k := range r.Classes {
		if i, ok := r.Row(c, k); ok {
			out = append(out, i)
		}
	}
	return out
}

// Classify returns the class of a request for model (after the fleet's
// default, schemas.Fleet.RequestModel) with a prompt of promptTokens:
// schemas.ErrUnknownModel or schemas.ErrContextLength when the fleet has
// none. A fleet without explicit models ignores the model.
func (r *Rows) Classify(model string, promptTokens int) (int, error) {
	if !r.explicit {
		model = r.Classes[0].Model
	}
	return schemas.ClassOf(r.Classes, model, promptTokens)
}

// ErrNoRow: the cluster may use no engine that serves the request's model
// (schemas.ErrUnknownModel for the cluster) or none that takes a prompt
// that long (schemas.ErrContextLength).
var ErrNoRow = errors.New("no engine the cluster may use serves the request")

// Lookup returns the row of a request of cluster c (fleet index) for
// model (already resolved with schemas.Fleet.RequestModel) with a prompt
// of promptTokens. The errors wrap schemas.ErrUnknownModel when the
// cluster may use no engine serving the model, and
// schemas.ErrContextLength when none of them accepts the prompt.
func (r *Rows) Lookup(c int, model string, promptTokens int) (int, error) {
	k, err := r.Classify(model, promptTokens)
	if err != nil {
		return -1, err
	}
	if i, ok := r.Row(c, k); ok {
		return i, nil
	}
	m := r.Classes[k].Model
	for j := range r.Classes {
		if r.Classes[j].Model == m {
			if _, ok := r.Row(c, j); ok {
				return -1, fmt.Errorf("%w: %w: model %q, about %d prompt tokens", ErrNoRow, schemas.ErrContextLength, m, promptTokens)
			}
		}
	}
	return -1, fmt.Errorf("%w: %w: %q", ErrNoRow, schemas.ErrUnknownModel, m)
}

// RowShares is each row's share of the fleet's demand before any is
// observed: its cluster's demand fraction, split by the cluster's model
// mix (model_shares, else all to the default model; a fleet that cannot
// tell splits evenly over the models the cluster has rows for), all of a
// model's share on its shortest band (prompts are mostly short; observed
// demand corrects it within a few windows).
func RowShares(f *schemas.Fleet, rows *Rows) []float64 {
	out := make([]float64, rows.Len())
	for c, fc := range f.Clusters {
		mine := rows.ClusterRows(c)
		first := map[string]int{} // model -> its shortest row
		for _, i := range mine {
			if m := rows.Classes[rows.Rows[i].Class].Model; !has(first, m) {
				first[m] = i
			}
		}
		frac := f.DemandFraction(fc.Name)
		mix, err := f.ModelMix(fc)
		if err != nil || !rows.explicit {
			mix = nil
			for m := range first {
				mix = append(mix, schemas.ModelShare{Model: m, Share: 1 / float64(len(first))})
			}
		}
		for _, ms := range mix {
			if i, ok := first[ms.Model]; ok {
				out[i] += frac * ms.Share
			}
		}
	}
	return out
}

func has[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}

package dataplane

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/sched"
)

// Routing by model. The fleet says which models each engine serves and
// how long a prompt it accepts (Config.EngineModels, EngineMaxContext);
// from that the data plane derives the fleet's request classes exactly as
// the optimizer does (schemas.Fleet.Classes: a model and a band of prompt
// lengths). A request's class comes from its model (the body's "model",
// else the X-Ilb-Model header, else DefaultModel) and its prompt length,
// estimated as body bytes / 4. Each class is picked within its own
// selection table: the snapshot's table of that class (Snapshot.Classes),
// or, for a class the snapshot does not list (an optimizer without
// classes, a fleet edited since), the top-level weights restricted to the
// engines serving the class. Whatever a snapshot says, an engine that
// does not serve a class per the fleet never takes its requests: its
// entries are left out of the class's table or, in a table the snapshot
// sent, its slots are unavailable (fallback reason "ineligible"), and the
// entries are counted (ilb_dataplane_snapshot_ineligible_entries_total).

// HeaderModel names the request's model for routing on headers alone: a
// request with X-Conversation-Id, a cluster and this header is routed
// without parsing its body. The body's "model" wins when the body is
// parsed.
const HeaderModel = "X-Ilb-Model"

// promptBytesPerToken is the data plane's estimate of a prompt's length:
// a request body of n bytes is taken as n/4 tokens (JSON overhead and
// other fields included, so it errs long).
const promptBytesPerToken = 4

// EstimatePromptTokens is the estimated prompt length of a request body
// of n bytes (n/4; 0 for an unknown length).
func EstimatePromptTokens(n int64) int {
	if n <= 0 {
		return 0
	}
	return int(n / promptBytesPerToken)
}

// catalog is what the fleet says the engines serve. Immutable.
type catalog struct {
	fleet    schemas.Fleet // Engines (name, models, max_context_tokens) and DefaultModel only
	explicit bool          // some engine lists its models
	classes  []schemas.ModelClass
	models   []string          // every model, sorted
	index    map[string]int    // engine name -> index in fleet.Engines
	serves   map[string][]bool // engine name -> by class
}

// newCatalog builds the catalogue of engine model lists (engines of a
// fleet with explicit models must all be listed: one that is not serves
// nothing) and context limits.
func newCatalog(engineModels map[string][]string, maxContext map[string]int, defaultModel string) *catalog {
	k := &catalog{index: map[string]int{}, serves: map[string][]bool{}}
	k.fleet.DefaultModel = defaultModel
	names := slices.Collect(maps.Keys(engineModels))
	for n := range maxContext {
		if _, ok := engineModels[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		k.index[n] = len(k.fleet.Engines)
		k.fleet.Engines = append(k.fleet.Engines, schemas.FleetEngine{Name: n,
			Models: slices.Clone(engineModels[n]), MaxContextTokens: max(0, maxContext[n])})
	}
	k.explicit = k.fleet.ExplicitModels()
	k.classes = k.fleet.Classes()
	if len(k.classes) == 0 {
		k.classes = []schemas.ModelClass{{Model: defaultModel}}
	}
	k.models = k.fleet.Models()
	if !k.explicit {
		k.models = []string{defaultModel}
	}
	for n, i := range k.index {
		row := make([]bool, len(k.classes))
		for c, cl := range k.classes {
			row[c] = k.fleet.Serves(k.fleet.Engines[i], cl)
		}
		k.serves[n] = row
	}
	return k
}

// single reports whether the fleet has one class.
func (k *catalog) single() bool { return len(k.classes) == 1 }

// multiModel reports whether requests must say their model to be routed:
// the fleet serves more than one.
func (k *catalog) multiModel() bool { return k.explicit && len(k.models) > 1 }

// serve reports whether engine name serves class c per the fleet. An
// engine the catalogue does not list serves nothing in a fleet with
// explicit models, and everything (no context limit) otherwise, as
// before models existed.
func (k *catalog) serve(name string, c int) bool {
	if row, ok := k.serves[name]; ok {
		return row[c]
	}
	return !k.explicit
}

// classify returns the class of a request for model (""; the default)
// with a prompt of about tokens: schemas.ErrUnknownModel or
// schemas.ErrContextLength when the fleet has none. It allocates only for
// an error.
func (k *catalog) classify(model string, tokens int) (int, error) {
	switch {
	case !k.explicit:
		model = k.classes[0].Model
	case model == "" && slices.Contains(k.models, k.fleet.DefaultModel):
		model = k.fleet.DefaultModel
	case model == "" && len(k.models) == 1:
		model = k.models[0]
	case model == "":
		return -1, fmt.Errorf("%w: the request names no model and the fleet serves several (%s); name one in \"model\" or %s",
			schemas.ErrUnknownModel, strings.Join(k.models, ", "), HeaderModel)
	}
	return schemas.ClassOf(k.classes, model, tokens)
}

// snapshotClass returns s's class matching catalogue class c: by model
// and band end, or by band end alone in a fleet with one implicit model
// (whose name the optimizer and this process may spell differently).
func (k *catalog) snapshotClass(s *schemas.Snapshot, c int) (*schemas.SnapshotClass, bool) {
	cl := k.classes[c]
	if k.explicit {
		return s.Class(cl.Model, cl.MaxPromptTokens)
	}
	for i := range s.Classes {
		if s.Classes[i].MaxPromptTokens == cl.MaxPromptTokens {
			return &s.Classes[i], true
		}
	}
	return nil, false
}

// classRoute is one class's routing state in a cluster (guarded by
// DataPlane.mu): its table (nil when nothing may serve it) and shed
// fraction.
type classRoute struct {
	table *sched.Table
	shed  float64
}

// classRoutes returns the per-class routing of snapshot s under
// catalogue k, prev being the previous
// routes (for minimal churn), and how many weight entries name an engine
// that does not serve their class; up is the updates' working memory.
// nil routes mean the picker of the top
// level serves every request: one class and a snapshot without classes.
func classRoutes(up *sched.Updater, k *catalog, s *schemas.Snapshot, prev []classRoute) ([]classRoute, int, error) {
	if k.single() && len(s.Classes) == 0 {
		bad := 0
		for n, w := range s.Weights {
			if w > 0 && !k.serve(n, 0) {
				bad++
			}
		}
		return nil, bad, nil
	}
	out := make([]classRoute, len(k.classes))
	bad := 0
	for c := range k.classes {
		var old *sched.Table
		if c < len(prev) {
			old = prev[c].table
		}
		weights, shed := s.Weights, s.ShedFraction
		sc, listed := k.snapshotClass(s, c)
		if listed {
			weights, shed = sc.Weights, sc.ShedFraction
		}
		names := make([]string, 0, len(weights))
		ws := make([]float64, 0, len(weights))
		for _, n := range sortedKeys(weights) {
			switch {
			case !(weights[n] > 0):
			case !k.serve(n, c):
				if listed {
					bad++
				}
			default:
				names, ws = append(names, n), append(ws, weights[n])
			}
		}
		out[c].shed = shed
		switch {
		case listed && sc.Table != nil:
			t, err := sched.Decode(sc.Table.Slots, sc.Table.Engines, sc.Table.Encoding, sc.Table.Data)
			if err != nil {
				return nil, 0, fmt.Errorf("classes (%s): %w", k.classes[c].Key(), err)
			}
			if err := tableMatchesWeights(t, sc.Weights); err != nil {
				return nil, 0, fmt.Errorf("classes (%s): %w", k.classes[c].Key(), err)
			}
			out[c].table = t // ineligible engines' slots are unavailable (buildLocked)
		case len(names) > 0:
			t, err := up.Rebalance(old, names, ws)
			if err != nil {
				return nil, 0, fmt.Errorf("classes (%s): %w", k.classes[c].Key(), err)
			}
			out[c].table = t
		}
	}
	return out, bad, nil
}

// modelError maps a classify error to its status, OpenAI code and message.
func modelError(err error, models []string) (int, string, string) {
	if errors.Is(err, schemas.ErrContextLength) {
		return http.StatusBadRequest, codeContext, fmt.Sprintf(
			"%v: no engine of this fleet accepts a prompt that long (the data plane estimates prompt tokens as request body bytes / %d)",
			err, promptBytesPerToken)
	}
	return http.StatusNotFound, codeModel, fmt.Sprintf("%v: the model does not exist here; GET /v1/models lists %s",
		err, strings.Join(models, ", "))
}

// all returns p and its class pickers.
func (p *picker) all() []*picker {
	return append([]*picker{p}, p.sub...)
}

// UpdateModels applies a new fleet file's model lists (Config.EngineModels)
// and, when defaultModel is not empty, its default model: requests are
// routed by them at once (every cluster's class routes are rebuilt from
// its snapshot in use), and GET /v1/models lists the models of an added
// engine, and no longer those only a removed engine served.
func (d *DataPlane) UpdateModels(models map[string][]string, defaultModel string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cfg.EngineModels = maps.Clone(models)
	if defaultModel != "" {
		d.cfg.DefaultModel = defaultModel
	}
	d.recatalogLocked()
}

// UpdateContextLimits applies a new fleet file's context limits
// (Config.EngineMaxContext), as UpdateModels does its model lists.
func (d *DataPlane) UpdateContextLimits(maxContext map[string]int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cfg.EngineMaxContext = maps.Clone(maxContext)
	d.recatalogLocked()
}

// UpdateFleetModels applies a new fleet file's model lists, context
// limits and, when defaultModel is not empty, default model together
// (UpdateModels and UpdateContextLimits at once): the class routes are
// rebuilt once, and no request is routed under one without the other.
func (d *DataPlane) UpdateFleetModels(models map[string][]string, maxContext map[string]int, defaultModel string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cfg.EngineModels, d.cfg.EngineMaxContext = maps.Clone(models), maps.Clone(maxContext)
	if defaultModel != "" {
		d.cfg.DefaultModel = defaultModel
	}
	d.recatalogLocked()
}

// recatalogLocked rebuilds the catalogue from the config, then every
// cluster's class routes and pickers.
func (d *DataPlane) recatalogLocked() {
	k := newCatalog(d.cfg.EngineModels, d.cfg.EngineMaxContext, d.cfg.DefaultModel)
	d.cat.Store(k)
	for _, c := range d.order {
		if c.snap == nil {
			continue
		}
		routes, bad, err := classRoutes(&d.updater, k, c.snap, nil)
		if err != nil { // the tables decoded when the snapshot came: cannot happen
			d.log.Error("request classes of the snapshot in use under the new fleet", "cluster", c.name, "err", err)
			routes = nil
		}
		c.routes = routes
		if bad > c.skipped { // the same entries are not counted again
			c.ineligible.Add(int64(bad - c.skipped))
		}
		c.skipped = bad
	}
	d.rebuildLocked(d.now())
}

// Models returns the names of the models this data plane serves, sorted:
// in a fleet whose engines list models, those of the engines in its
// clusters' snapshots (every model of the fleet before any snapshot);
// else the one implicit model, Config.DefaultModel.
func (d *DataPlane) Models() []string {
	k := d.cat.Load()
	if !k.explicit {
		return []string{k.fleet.DefaultModel}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	seen := map[string]bool{}
	for _, c := range d.order {
		for _, p := range c.cur.Load().all() {
			for i := range p.slots {
				if j, ok := k.index[p.slots[i].eng.name]; ok {
					for _, m := range k.fleet.EngineModels(k.fleet.Engines[j]) {
						seen[m] = true
					}
				}
			}
		}
	}
	if len(seen) == 0 {
		return slices.Clone(k.models)
	}
	return slices.Sorted(maps.Keys(seen))
}

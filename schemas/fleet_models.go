package schemas

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// Models and request classes.
//
// An engine serves the models its `models` field lists; one that lists
// none serves the fleet's default_model. A fleet in which no engine lists
// models has one implicit model (named default_model, or unnamed) and
// routes every request whatever model it names, as before models existed
// (ExplicitModels is false).
//
// A request class is a model and a band of prompt lengths. A model's
// bands come from the distinct max_context_tokens of the engines serving
// it: with limits 8192 and 32768 and one engine without a limit, they are
// [0, 8192], (8192, 32768] and (32768, ∞). A prompt belongs to the
// smallest band that holds it, and an engine serves a class when it
// serves the model and accepts the band's longest prompt. So the engines
// of a model's short band include those of its longer bands: short
// requests may go anywhere the model is, long ones only where they fit.

// Errors of ClassOf (and the data plane's answers: 404 model_not_found,
// 400 context_length_exceeded).
var (
	ErrUnknownModel  = errors.New("model not served by the fleet")
	ErrContextLength = errors.New("prompt longer than any engine of the model accepts")
)

// ModelClass is a request class: a model and the band of prompt lengths
// (MinPromptTokens, MaxPromptTokens] (the first band also holds 0).
type ModelClass struct {
	Model           string
	MinPromptTokens int // lower bound, exclusive; 0 for a model's first band
	MaxPromptTokens int // upper bound, inclusive; 0: none
}

// Key names the class in feature rows and solver rows: the model alone
// when the band is unbounded on both sides (the model's only band), else
// model/MIN-MAX with MAX "inf" for the last band of a limited model. The
// implicit model without a name is "*".
func (k ModelClass) Key() string {
	m := k.Model
	if m == "" {
		m = "*"
	}
	if k.MinPromptTokens == 0 && k.MaxPromptTokens == 0 {
		return m
	}
	hi := "inf"
	if k.MaxPromptTokens > 0 {
		hi = strconv.Itoa(k.MaxPromptTokens)
	}
	return m + "/" + strconv.Itoa(k.MinPromptTokens) + "-" + hi
}

// Holds reports whether a prompt of n tokens lies in the class's band.
func (k ModelClass) Holds(n int) bool {
	return (n > k.MinPromptTokens || k.MinPromptTokens == 0) && (k.MaxPromptTokens == 0 || n <= k.MaxPromptTokens)
}

// ExplicitModels reports whether some engine lists its models. Without,
// the fleet has one implicit model and routes requests whatever model
// they name.
func (f *Fleet) ExplicitModels() bool {
	return slices.ContainsFunc(f.Engines, func(e FleetEngine) bool { return len(e.Models) > 0 })
}

// EngineModels returns the models engine e serves: its models, else the
// fleet's default_model (empty for the unnamed implicit model).
func (f *Fleet) EngineModels(e FleetEngine) []string {
	if len(e.Models) > 0 {
		return e.Models
	}
	return []string{f.DefaultModel}
}

// Models returns every model the fleet serves, sorted; a fleet without
// explicit models gives its implicit one (default_model, or "").
func (f *Fleet) Models() []string {
	set := map[string]bool{}
	for _, e := range f.Engines {
		for _, m := range f.EngineModels(e) {
			set[m] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// ServesModel reports whether engine e serves model m.
func (f *Fleet) ServesModel(e FleetEngine, m string) bool {
	return slices.Contains(f.EngineModels(e), m)
}

// Serves reports whether engine e serves class k: it serves the model and
// accepts the band's longest prompt.
func (f *Fleet) Serves(e FleetEngine, k ModelClass) bool {
	if !f.ServesModel(e, k.Model) {
		return false
	}
	return e.MaxContextTokens == 0 || k.MaxPromptTokens != 0 && e.MaxContextTokens >= k.MaxPromptTokens
}

// Classes returns the fleet's request classes, by model name and then
// band (shortest first).
func (f *Fleet) Classes() []ModelClass {
	var out []ModelClass
	for _, m := range f.Models() {
		limits, open := []int{}, false
		for _, e := range f.Engines {
			if !f.ServesModel(e, m) {
				continue
			}
			if e.MaxContextTokens <= 0 {
				open = true
			} else if !slices.Contains(limits, e.MaxContextTokens) {
				limits = append(limits, e.MaxContextTokens)
			}
		}
		slices.Sort(limits)
		if open {
			limits = append(limits, 0)
		}
		lo := 0
		for _, hi := range limits {
			out = append(out, ModelClass{Model: m, MinPromptTokens: lo, MaxPromptTokens: hi})
			lo = hi
		}
	}
	return out
}

// RequestModel is the model a request naming model is for: model itself,
// else default_model, else the fleet's only model. In a fleet without
// explicit models it is always the implicit model.
func (f *Fleet) RequestModel(model string) (string, error) {
	switch {
	case !f.ExplicitModels():
		return f.DefaultModel, nil
	case model != "":
		return model, nil
	case f.DefaultModel != "":
		return f.DefaultModel, nil
	}
	if ms := f.Models(); len(ms) == 1 {
		return ms[0], nil
	}
	return "", fmt.Errorf("%w: the request names no model and the fleet has no default_model", ErrUnknownModel)
}

// ClassOf returns the index in classes (Fleet.Classes) of the class of a
// request for model with a prompt of promptTokens: the model's smallest
// band that holds it. ErrUnknownModel when no class has the model,
// ErrContextLength when every band of it is too short. Classes of one
// model are contiguous and in band order, as Classes returns them.
func ClassOf(classes []ModelClass, model string, promptTokens int) (int, error) {
	i, ok := slices.BinarySearchFunc(classes, model, func(k ModelClass, m string) int { return cmp.Compare(k.Model, m) })
	if !ok {
		return -1, fmt.Errorf("%w: %q", ErrUnknownModel, model)
	}
	for j := i; j < len(classes) && classes[j].Model == model; j++ {
		if k := classes[j]; k.MaxPromptTokens == 0 || promptTokens <= k.MaxPromptTokens {
			return j, nil
		}
	}
	return -1, fmt.Errorf("%w: model %q, about %d prompt tokens", ErrContextLength, model, promptTokens)
}

// ModelShare is one model's part of a cluster's demand.
type ModelShare struct {
	Model string
	Share float64 // fraction of the cluster's demand, summing to 1
}

// ModelAt is the model of mix (shares summing to 1, as ModelMix gives)
// that u, uniform in [0, 1), draws: the first whose cumulative share
// exceeds u, the last one for what rounding leaves over.
func ModelAt(mix []ModelShare, u float64) string {
	k := 0
	for acc := mix[0].Share; k < len(mix)-1 && u >= acc; acc += mix[k].Share {
		k++
	}
	return mix[k].Model
}

// ModelMix is how cluster c's requests without a model divide over
// models: its model_shares normalised (by model name), else all to
// RequestModel(""). An error says the fleet cannot tell.
func (f *Fleet) ModelMix(c FleetCluster) ([]ModelShare, error) {
	total := 0.0
	for _, v := range c.ModelShares {
		total += v
	}
	if total > 0 {
		var out []ModelShare
		for _, m := range sortedKeys(c.ModelShares) {
			if v := c.ModelShares[m]; v > 0 {
				out = append(out, ModelShare{Model: m, Share: v / total})
			}
		}
		return out, nil
	}
	m, err := f.RequestModel("")
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w; give it model_shares", c.Name, err)
	}
	return []ModelShare{{Model: m, Share: 1}}, nil
}

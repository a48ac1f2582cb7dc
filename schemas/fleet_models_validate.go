package schemas

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// validateModels checks the model fields (fleet_models.go): valid,
// unique model names per engine, max_context_tokens >= 0 (0: no limit),
// a default_model wherever an engine of a fleet with explicit models
// lists none, and model_shares that name models some engine the cluster
// may use serves. Errors give the field path.
func (f *Fleet) validateModels() error {
	explicit := f.ExplicitModels()
	if f.DefaultModel != "" {
		if err := checkModelName(f.DefaultModel); err != nil {
			return fmt.Errorf("default_model: %w", err)
		}
	}
	for i, e := range f.Engines {
		if err := f.validateEngineModels(e, explicit); err != nil {
			return fmt.Errorf("engines[%d] (%s): %w", i, e.Name, err)
		}
	}
	if explicit && f.DefaultModel != "" && !slices.Contains(f.Models(), f.DefaultModel) {
		return fmt.Errorf("default_model %q: no engine serves it", f.DefaultModel)
	}
	for i, c := range f.Clusters {
		if err := f.validateModelShares(c, explicit); err != nil {
			return fmt.Errorf("clusters[%d] (%s): model_shares: %w", i, c.Name, err)
		}
	}
	return nil
}

func (f *Fleet) validateEngineModels(e FleetEngine, explicit bool) error {
	if e.MaxContextTokens < 0 {
		return fmt.Errorf("max_context_tokens %d must be > 0 (leave it out for no limit)", e.MaxContextTokens)
	}
	if explicit && len(e.Models) == 0 && f.DefaultModel == "" {
		return errors.New("models: none listed while other engines list theirs; list its models or set default_model")
	}
	seen := map[string]bool{}
	for j, m := range e.Models {
		if err := checkModelName(m); err != nil {
			return fmt.Errorf("models[%d]: %w", j, err)
		}
		if seen[m] {
			return fmt.Errorf("models[%d]: %q listed twice", j, m)
		}
		seen[m] = true
	}
	return nil
}

func (f *Fleet) validateModelShares(c FleetCluster, explicit bool) error {
	if len(c.ModelShares) == 0 {
		return nil
	}
	if !explicit {
		return errors.New("no engine lists models")
	}
	total := 0.0
	for _, m := range sortedKeys(c.ModelShares) {
		v := c.ModelShares[m]
		if err := checkNonNegative(m, v); err != nil {
			return err
		}
		if !slices.ContainsFunc(f.Engines, func(e FleetEngine) bool { return f.Eligible(c, e) && f.ServesModel(e, m) }) {
			return fmt.Errorf("%s: no engine the cluster may use serves it", m)
		}
		total += v
	}
	if !(total > 0) || math.IsInf(total, 1) {
		return fmt.Errorf("shares sum to %v, want a finite value > 0", total)
	}
	return nil
}

// checkModelName accepts a non-empty name of at most MaxNameLen bytes
// without spaces or control characters (OpenAI model ids have none; a
// stray space in a hand-written file is a typo).
func checkModelName(m string) error {
	if m == "" {
		return errors.New("empty model name")
	}
	if err := checkText("model", m, MaxNameLen); err != nil {
		return err
	}
	if strings.IndexFunc(m, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return fmt.Errorf("model %q contains a space or control character", m)
	}
	return nil
}

// checkModelNodes rejects, in the YAML itself, what the decoded Fleet can
// no longer tell from an absent field: an explicit empty models list and
// an explicit max_context_tokens of 0 (absent means no limit).
func checkModelNodes(doc *yaml.Node) error {
	engines := mappingValue(topMapping(doc), "engines")
	if engines == nil || engines.Kind != yaml.SequenceNode {
		return nil
	}
	for i, e := range engines.Content {
		if m := mappingValue(e, "models"); m != nil && m.Kind == yaml.SequenceNode && len(m.Content) == 0 {
			return fmt.Errorf("line %d: engines[%d].models: empty list; list the models the engine serves, or leave the field out to serve default_model", m.Line, i)
		}
		if v := mappingValue(e, "max_context_tokens"); v != nil && v.Kind == yaml.ScalarNode && strings.TrimSpace(v.Value) == "0" {
			return fmt.Errorf("line %d: engines[%d].max_context_tokens: 0 must be > 0 (leave it out for no limit)", v.Line, i)
		}
	}
	return nil
}

func topMapping(doc *yaml.Node) *yaml.Node {
	if doc != nil && doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		return doc.Content[0]
	}
	return doc
}

// mappingValue returns the value of key in mapping node n, nil if absent.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

package optimize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
)

// Problem is one allocation problem, in the JSON form of `ilb solve`
// (DESIGN.md). Units are in the field names: rps, ms, tokens.
type Problem struct {
	// MeanOutputTokens multiplies the time between output tokens.
	MeanOutputTokens float64 `json:"mean_output_tokens"`
	// MaxUtilization caps every engine's load at this fraction of its
	// capacity; it lies in (0, 1).
	MaxUtilization float64 `json:"max_utilization"`
	// ShedPenaltyMs is the cost of refusing one request, in ms. 0 (or
	// absent) is automatic: refusing costs more than serving anywhere below
	// the utilisation caps, so only demand the engines cannot take within
	// their caps is shed (autoPenalty).
	ShedPenaltyMs float64                       `json:"shed_penalty_ms,omitempty"`
	Clusters      []Cluster                     `json:"clusters"`
	Engines       []Engine                      `json:"engines"`
	NetworkMs     map[string]map[string]float64 `json:"network_ms"`
	// Eligible, when it has cluster c, lists the only engines c may use.
	Eligible map[string][]string `json:"eligible,omitempty"`
	// Demands, when given, split the clusters' demand into request
	// classes (classes.go): ParseProblem expands each into a cluster of
	// its own that may use only the engines serving its class.
	Demands []Demand `json:"demands,omitempty"`
}

// Cluster is a front-end cluster and the traffic it sends.
type Cluster struct {
	Name      string  `json:"name"`
	DemandRps float64 `json:"demand_rps"`
}

// Engine is one inference engine and its latency-versus-load profile.
type Engine struct {
	Name        string  `json:"name"`
	CapacityRps float64 `json:"capacity_rps"`
	TTFT        TTFT    `json:"ttft"`
	TBOT        TBOT    `json:"tbot"`
	// MaxLoadRps, when positive, caps the engine's load below
	// max_utilization × capacity_rps: the load at which it still serves
	// within an SLO (services/internal/routing, SLOLoad). 0 (absent): the
	// cap is max_utilization × capacity_rps alone.
	MaxLoadRps float64 `json:"max_load_rps,omitempty"`
	// Models the engine serves (none listed: every model) and the longest
	// prompt it accepts (0: no limit), for Demands (classes.go).
	Models           []string `json:"models,omitempty"`
	MaxContextTokens int      `json:"max_context_tokens,omitempty"`
}

// LoadCap is the most load the engine may take at maxUtilization, in rps:
// maxUtilization × CapacityRps, or MaxLoadRps if positive and lower.
func (e Engine) LoadCap(maxUtilization float64) float64 {
	u := maxUtilization * e.CapacityRps
	if e.MaxLoadRps > 0 && e.MaxLoadRps < u {
		return e.MaxLoadRps
	}
	return u
}

// TTFT is time to first token: BaseMs + QueueMs·ρ/(1−ρ) at utilisation ρ.
type TTFT struct {
	BaseMs  float64 `json:"base_ms"`
	QueueMs float64 `json:"queue_ms"`
}

// TBOT is time between output tokens: BaseMs + SlopeMs·ρ.
type TBOT struct {
	BaseMs  float64 `json:"base_ms"`
	SlopeMs float64 `json:"slope_ms"`
}

// MaxValue bounds every number of a Problem, so that sums and products of
// them stay far from overflow.
const MaxValue = 1e12

// ErrInvalid is wrapped by every error that Validate and ParseProblem
// return for a malformed problem.
var ErrInvalid = errors.New("invalid problem")

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
}

// ParseProblem decodes and validates a problem, and expands its demands
// (Expand). It is strict: unknown fields, trailing data and every
// violation Validate or Expand finds are errors with a one-line reason.
func ParseProblem(data []byte) (*Problem, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Problem
	if err := dec.Decode(&p); err != nil {
		return nil, invalid("bad JSON: %s", oneLine(err.Error()))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, invalid("bad JSON: data after the problem object")
	}
	return p.Expand()
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// Validate reports the first thing wrong with p, or nil.
func (p *Problem) Validate() error {
	clusters, engines, err := p.validateHead()
	if err != nil {
		return err
	}
	if err := p.validateNetwork(clusters, engines); err != nil {
		return err
	}
	return p.validateEligible(clusters, engines)
}

// validateAllButNetwork is Validate without the check of network_ms,
// which Solve makes while it builds its model (buildModel). On an error
// Solve asks Validate, whose order of checks says which error comes first.
func (p *Problem) validateAllButNetwork() error {
	clusters, engines, err := p.validateHead()
	if err != nil {
		return err
	}
	return p.validateEligible(clusters, engines)
}

// validateHead checks the numbers, clusters and engines.
func (p *Problem) validateHead() (clusters, engines map[string]bool, err error) {
	if err := checkNumber("mean_output_tokens", p.MeanOutputTokens); err != nil {
		return nil, nil, err
	}
	if err := checkNumber("shed_penalty_ms", p.ShedPenaltyMs); err != nil {
		return nil, nil, err
	}
	if !(p.MaxUtilization > 0 && p.MaxUtilization < 1) {
		return nil, nil, invalid("max_utilization is %v, want a number in (0, 1)", p.MaxUtilization)
	}
	if len(p.Clusters) == 0 {
		return nil, nil, invalid("no clusters")
	}
	if len(p.Demands) > 0 {
		return nil, nil, invalid("demands are not expanded: call Expand (ParseProblem does)")
	}
	if len(p.Engines) == 0 {
		return nil, nil, invalid("no engines")
	}
	if clusters, err = p.validateClusters(); err != nil {
		return nil, nil, err
	}
	if engines, err = p.validateEngines(); err != nil {
		return nil, nil, err
	}
	return clusters, engines, nil
}

// inRange reports whether checkNumber accepts v. Callers test it first
// and name the field only for an error: formatting every field's name
// costs more than the rest of a solve's validation.
func inRange(v float64) bool { return v >= 0 && v <= MaxValue } // false for NaN

func checkNumber(what string, v float64) error {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return invalid("%s is not a finite number", what)
	case v < 0:
		return invalid("%s is negative (%v)", what, v)
	case v > MaxValue:
		return invalid("%s is %v, above the limit %v", what, v, MaxValue)
	}
	return nil
}

func (p *Problem) validateClusters() (map[string]bool, error) {
	seen := make(map[string]bool, len(p.Clusters))
	for i, c := range p.Clusters {
		if c.Name == "" {
			return nil, invalid("clusters[%d] has no name", i)
		}
		if seen[c.Name] {
			return nil, invalid("duplicate cluster name %q", c.Name)
		}
		seen[c.Name] = true
		if !inRange(c.DemandRps) {
			return nil, checkNumber(fmt.Sprintf("cluster %q demand_rps", c.Name), c.DemandRps)
		}
	}
	return seen, nil
}

func (p *Problem) validateEngines() (map[string]bool, error) {
	seen := make(map[string]bool, len(p.Engines))
	for i, e := range p.Engines {
		if e.Name == "" {
			return nil, invalid("engines[%d] has no name", i)
		}
		if seen[e.Name] {
			return nil, invalid("duplicate engine name %q", e.Name)
		}
		seen[e.Name] = true
		fields := []struct {
			name string
			v    float64
		}{
			{"capacity_rps", e.CapacityRps}, {"max_load_rps", e.MaxLoadRps},
			{"ttft.base_ms", e.TTFT.BaseMs}, {"ttft.queue_ms", e.TTFT.QueueMs},
			{"tbot.base_ms", e.TBOT.BaseMs}, {"tbot.slope_ms", e.TBOT.SlopeMs},
		}
		for _, f := range fields {
			if !inRange(f.v) {
				return nil, checkNumber(fmt.Sprintf("engine %q %s", e.Name, f.name), f.v)
			}
		}
	}
	return seen, nil
}

func (p *Problem) validateNetwork(clusters, engines map[string]bool) error {
	// Keys are visited in sorted order so the first error reported does not
	// depend on map order.
	for _, c := range sortedKeys(p.NetworkMs) {
		if !clusters[c] {
			return invalid("network_ms: unknown cluster %q", c)
		}
		row := p.NetworkMs[c]
		for e, v := range row {
			if !engines[e] || !inRange(v) {
				return firstBadEntry(c, row, engines)
			}
		}
	}
	return nil
}

// firstBadEntry reports the first (in key order) bad entry of a row that
// has one.
func firstBadEntry(c string, row map[string]float64, engines map[string]bool) error {
	for _, e := range sortedKeys(row) {
		if !engines[e] {
			return invalid("network_ms[%q]: unknown engine %q", c, e)
		}
		if v := row[e]; !inRange(v) {
			return checkNumber(fmt.Sprintf("network_ms[%q][%q]", c, e), v)
		}
	}
	return nil
}

func (p *Problem) validateEligible(clusters, engines map[string]bool) error {
	for _, c := range sortedKeys(p.Eligible) {
		if !clusters[c] {
			return invalid("eligible: unknown cluster %q", c)
		}
		seen := make(map[string]bool, len(p.Eligible[c]))
		for _, e := range p.Eligible[c] {
			if !engines[e] {
				return invalid("eligible[%q]: unknown engine %q", c, e)
			}
			if seen[e] {
				return invalid("eligible[%q]: engine %q listed twice", c, e)
			}
			seen[e] = true
		}
	}
	return nil
}

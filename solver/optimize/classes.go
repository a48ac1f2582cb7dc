package optimize

import (
	"fmt"
	"slices"
	"strconv"
)

// Request classes. A fleet serving several models, on engines that accept
// prompts of different lengths, has demand per (cluster, class): a class
// is a model and a band of prompt lengths, and only the engines that serve
// the model and accept the band's longest prompt may take it. The solver
// itself knows clusters only; Expand turns each demand row into a cluster
// of its own, named CLUSTER/CLASS, with the cluster's network times and
// its eligibility cut down to the engines serving the class. All rows
// share the engines' capacity, so one solve balances the classes jointly:
// a class that only some engines serve gets them, and classes that could
// go elsewhere move off them as its demand grows.

// Demand is one demand row: the requests per second cluster Cluster sends
// for model Model with prompts in (MinPromptTokens, MaxPromptTokens].
type Demand struct {
	Cluster string `json:"cluster"`
	Model   string `json:"model"`
	// MinPromptTokens is the band's lower end (exclusive; 0: from 0).
	// With MaxPromptTokens 0 and MinPromptTokens > 0 the band is
	// unbounded above: only engines without a context limit serve it.
	MinPromptTokens int `json:"min_prompt_tokens,omitempty"`
	// MaxPromptTokens is the band's upper end: engines whose
	// max_context_tokens is below it do not serve the row. 0 with
	// MinPromptTokens 0: no length requirement.
	MaxPromptTokens int     `json:"max_prompt_tokens,omitempty"`
	DemandRps       float64 `json:"demand_rps"`
}

// ClassKey names a class: the model alone when the band is unbounded on
// both sides, else MODEL/MIN-MAX, MAX "inf" when unbounded above; the
// empty model is "*". It is schemas.ModelClass.Key (solver imports
// nothing of ours, so the rule is kept equal by hand and tested).
func ClassKey(model string, minPromptTokens, maxPromptTokens int) string {
	if model == "" {
		model = "*"
	}
	if minPromptTokens == 0 && maxPromptTokens == 0 {
		return model
	}
	hi := "inf"
	if maxPromptTokens > 0 {
		hi = strconv.Itoa(maxPromptTokens)
	}
	return model + "/" + strconv.Itoa(minPromptTokens) + "-" + hi
}

// RowName is the expanded cluster name of a demand row: CLUSTER/CLASS.
func (d Demand) RowName() string {
	return d.Cluster + "/" + ClassKey(d.Model, d.MinPromptTokens, d.MaxPromptTokens)
}

// Serves reports whether engine e may take demand row d: it lists d's
// model (or lists none) and accepts d's longest prompt.
func (e *Engine) Serves(d *Demand) bool {
	if len(e.Models) > 0 && !slices.Contains(e.Models, d.Model) {
		return false
	}
	switch {
	case e.MaxContextTokens == 0:
		return true
	case d.MaxPromptTokens > 0:
		return e.MaxContextTokens >= d.MaxPromptTokens
	}
	return d.MinPromptTokens == 0 // no length requirement
}

// Expand returns the problem with its demand rows as clusters (p itself,
// validated, when it has none). Clusters with demand rows must give no
// demand_rps of their own; a cluster without rows stays as it is. Rows are
// kept in the order given, each after the clusters without rows; a row's
// network times are its cluster's, and it may use the engines its cluster
// may use that serve its class. An error names the first bad row.
func (p *Problem) Expand() (*Problem, error) {
	if len(p.Demands) == 0 {
		if err := p.Validate(); err != nil {
			return nil, err
		}
		return p, p.validateModels()
	}
	base := *p
	base.Demands = nil
	if err := base.Validate(); err != nil {
		return nil, err
	}
	if err := p.validateModels(); err != nil {
		return nil, err
	}
	rows, err := p.checkDemands()
	if err != nil {
		return nil, err
	}
	q := base
	q.Clusters, q.NetworkMs, q.Eligible = nil, map[string]map[string]float64{}, map[string][]string{}
	for _, c := range p.Clusters {
		if !rows[c.Name] {
			q.Clusters = append(q.Clusters, c)
			q.NetworkMs[c.Name], q.Eligible[c.Name] = p.NetworkMs[c.Name], p.Eligible[c.Name]
		}
	}
	for i := range p.Demands {
		p.expandRow(&q, &p.Demands[i])
	}
	if err := q.Validate(); err != nil {
		return nil, err
	}
	return &q, nil
}

// expandRow appends demand row d to q as a cluster.
func (p *Problem) expandRow(q *Problem, d *Demand) {
	name := d.RowName()
	q.Clusters = append(q.Clusters, Cluster{Name: name, DemandRps: d.DemandRps})
	allowed, restricted := p.Eligible[d.Cluster]
	row := map[string]float64{}
	elig := []string{}
	for i := range p.Engines {
		e := &p.Engines[i]
		ms, ok := p.NetworkMs[d.Cluster][e.Name]
		if !ok || !e.Serves(d) || restricted && !slices.Contains(allowed, e.Name) {
			continue
		}
		row[e.Name] = ms
		elig = append(elig, e.Name)
	}
	q.NetworkMs[name], q.Eligible[name] = row, elig
}

// checkDemands validates the rows: a known cluster without demand_rps of
// its own, a demand in range, a valid band, a model some engine serves,
// and no row (or row name) twice. It returns the clusters with rows.
func (p *Problem) checkDemands() (map[string]bool, error) {
	clusters := make(map[string]float64, len(p.Clusters))
	for _, c := range p.Clusters {
		clusters[c.Name] = c.DemandRps
	}
	names := map[string]bool{}
	for _, c := range p.Clusters {
		names[c.Name] = true
	}
	rows := map[string]bool{}
	for i := range p.Demands {
		d := &p.Demands[i]
		if err := p.checkDemand(d, clusters, names); err != nil {
			return nil, invalid("demands[%d] (%s): %s", i, d.RowName(), err)
		}
		rows[d.Cluster] = true
	}
	return rows, nil
}

func (p *Problem) checkDemand(d *Demand, clusters map[string]float64, names map[string]bool) error {
	own, ok := clusters[d.Cluster]
	switch {
	case !ok:
		return fmt.Errorf("unknown cluster %q", d.Cluster)
	case own != 0:
		return fmt.Errorf("cluster %q has demand_rps %v of its own: give all of its demand as demands rows", d.Cluster, own)
	case !inRange(d.DemandRps):
		return checkNumber("demand_rps", d.DemandRps)
	case d.MinPromptTokens < 0 || d.MaxPromptTokens < 0:
		return fmt.Errorf("prompt token bounds must be >= 0")
	case d.MaxPromptTokens > 0 && d.MinPromptTokens >= d.MaxPromptTokens:
		return fmt.Errorf("min_prompt_tokens %d must be below max_prompt_tokens %d", d.MinPromptTokens, d.MaxPromptTokens)
	case names[d.RowName()]:
		return fmt.Errorf("row listed twice, or named like a cluster")
	}
	names[d.RowName()] = true
	if !slices.ContainsFunc(p.Engines, func(e Engine) bool { return e.Serves(d) }) {
		return fmt.Errorf("no engine serves model %q with prompts up to %d tokens", d.Model, d.MaxPromptTokens)
	}
	return nil
}

// validateModels checks the engines' model lists (non-empty unique names)
// and context limits (>= 0).
func (p *Problem) validateModels() error {
	for _, e := range p.Engines {
		if e.MaxContextTokens < 0 {
			return invalid("engine %q max_context_tokens %d is negative", e.Name, e.MaxContextTokens)
		}
		seen := make(map[string]bool, len(e.Models))
		for _, m := range e.Models {
			if m == "" {
				return invalid("engine %q lists an empty model name", e.Name)
			}
			if seen[m] {
				return invalid("engine %q lists model %q twice", e.Name, m)
			}
			seen[m] = true
		}
	}
	return nil
}

// Package console is ilb's live page: a self-contained HTML page served at
// "/" (embedded, vanilla JavaScript and inline SVG, no build step and no
// CDN) that polls GET /api/state every second and draws, per front-end
// cluster, the weights the data plane serves and how they moved over time,
// the snapshot version and age, the shed traffic by reason and the SLO
// attainment and goodput of the traffic; per engine the load, in-flight
// requests, TTFT and prefix-cache hit ratio, and the optimizer's model of
// it against what it did (calibration); and the traffic generator's
// demand.
//
// The console imports no other service. Its inputs are four small
// interfaces declared here (PlanSource, RoutingSource, EngineSource,
// TrafficSource) that `ilb dev` satisfies with adapters over the
// optimizer, the data plane, the aggregator and the traffic generator;
// any of them may be nil, and a source that fails shows its error on the
// page instead of stopping the others. The sampler keeps its own history
// of weights, demand and shed, so the page needs nothing from the
// services but their current state.
//
// # Concurrency
//
// Run owns the sampling loop: one goroutine reads the sources every
// SampleInterval, appends to the history and publishes the encoded state
// with an atomic pointer. HTTP handlers only load that pointer, so a slow
// page never delays sampling and sampling never blocks a page. The
// sources are called from Run's goroutine only.
package console

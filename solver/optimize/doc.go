// Package optimize solves ilb's global allocation: given demand per
// front-end cluster, network latency per cluster-engine pair, each engine's
// capacity and TTFT/TBOT-versus-load profile, and eligibility, it finds the
// fraction of each cluster's traffic to send to each engine (and to shed)
// that minimises mean end-to-end latency, exactly as DESIGN.md's
// `ilb solve` contract states the model.
//
// The method exploits the problem's structure instead of handing a dense LP
// to a generic routine: engine costs are separable and convex, network
// costs linear, and each cluster's flows lie on a simplex. Solve runs a
// proximal point method whose subproblems are solved in the dual over
// per-cluster prices with Newton's method: for fixed prices the Lagrangian
// separates by engine (a one-dimensional root) and by cluster shed, so the
// dual is smooth with an explicit Hessian; arcs far from an engine's price
// are pruned in one pass. Every Solution carries a certificate: a dual
// lower bound, the relative duality gap and the KKT residual.
//
// Anti-oscillation is part of the objective, not a filter: with
// Options.Previous and ChurnMs > 0 the objective gains
// (ChurnMs/2)·‖w_c − w_prev,c‖² per request of each cluster, so a route Δ ms
// better per request wins at most a fraction Δ/(2·ChurnMs) of a cluster in
// one solve; ChurnMs = 0 gives the exact optimum. Shedding is part of the
// optimum: shed traffic costs shed_penalty_ms per request, so when eligible
// capacity is short the cheapest traffic to drop is dropped.
//
// The package is pure: no I/O, no clock, no randomness; the same problem
// and options give a bit-identical solution. See README.md for measured
// speed and accuracy.
//
// # Concurrency
//
// Solve is safe to call from several goroutines at once: all solve state
// is local to the call (the package's debug counters are atomics).
package optimize

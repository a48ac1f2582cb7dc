// Package optimize owns ilb's allocation problem: given each front-end
// cluster's demand, the network time from each cluster to each engine,
// each engine's capacity and latency-versus-load profile, and eligibility,
// it finds the fraction of each cluster's traffic to send to each engine
// (or to shed) that minimises mean end-to-end latency, exactly, with a
// certificate. The problem and its JSON form are DESIGN.md's `ilb solve`
// contract; [Solve] is a pure function (no I/O, clock, globals or logging)
// and deterministic: the same problem and options give a bit-identical
// [Solution]. A [Solver] keeps the model between the solves of a running
// optimizer (its Resolve reads only the values that change, not the
// network times and eligibility) and gives Solve's solutions bit for bit.
//
// # The problem
//
// With flows x_ce ≥ 0 (rps), shed s_c ≥ 0, Σ_e x_ce + s_c = d_c and engine
// loads λ_e = Σ_c x_ce ≤ u_e = max_utilization·capacity, minimise
//
//	Σ x_ce·n_ce + Σ_e F_e(λ_e) + P·Σ s_c,   F_e(λ) = λ·L_e(λ),
//
// where L_e is DESIGN.md's per-request latency (TTFT plus output tokens
// times TBOT at utilisation ρ = λ/capacity) and P the shed penalty. F_e is
// convex and increasing on [0, u_e], its marginal F'_e(λ) = L + λ·L' the
// latency one more request adds to all of the engine's requests. At the
// optimum every route a cluster uses has the same marginal cost, its price
// π_c = n_ce + μ_e with engine price μ_e = F'_e(λ_e) (plus the load cap's
// shadow price at the cap), no unused route is cheaper, and a cluster sheds
// exactly when its price reaches P: shedding is part of the optimum, not a
// fallback, and falls on the traffic that costs most to serve.
//
// # The algorithm
//
// Solve works on the dual over cluster prices π, where the problem
// separates: for fixed π each engine's part is a one-dimensional root
// (its price μ at which the flows x = w·max(0, π − n + y/w − μ) from all
// clusters add up to the load at which F' = μ). Three stages:
//
//  1. Proximal point rounds. Each round adds (κ/2d_c)·‖x_c − y_c‖² per
//     cluster, centred on the last round's flows y, which makes the dual
//     smooth and concave; Newton's method (Cholesky over clusters, block
//     by block: clusters no engine couples form separate systems, so
//     fleets of separate parts, such as models with their own engines,
//     cost the sum of their cubes; Armijo/regula-falsi line search on the
//     concave dual) maximises it. κ starts at 300 ms and falls tenfold a
//     round. The Hessian counts arcs a few ms short of flowing with a
//     decaying weight (the four nearest an engine, twice as many after
//     each step the line search cut below a tenth, up to 64, and half as
//     many after a full step), and groups of clusters
//     whose flows do not respond to a common price move (they feed only
//     engines at their cap) jump straight to their next breakpoint, groups
//     that meet there moving the same way together: real fleets hold many
//     routes within a few ms of each other, and without both the line
//     search cuts every step to a sliver. Exact rounds bound each price's
//     move by a trust region (κ at first, four times the last move after
//     a step the line search cut below a tenth, doubling after full
//     steps), so that a few prices the Hessian barely holds do not cut
//     every other cluster's step short. A cold solve starts from the
//     market-clearing engine prices (every engine at the price at which
//     all of them together carry the demand, a capped one included, and
//     every cluster at its cheapest route), or, when the demand is at
//     least the fleet's load cap, with every cluster at the shed penalty,
//     near which all optimal prices then lie.
//  2. The exact finish, once a round's duality gap is below 1e-2 (usually
//     after the first round): the tie method (ties.go). Its state is a
//     point of the unregularised dual that is always dual feasible: every
//     engine is priced at the best bid max_c(π_c − n_ce) for it and owned
//     by the bidder. The engines two or more clusters share (ties), and the
//     clusters that shed (tied to a ground node priced at P), form a forest
//     over clusters, and a tree's clusters move their prices together, by
//     one level. A move takes one tree to the level where the dual is
//     largest along it: where its demand equals the load of the engines it
//     owns (a one-dimensional root), or a kink, where it would take or give
//     up an engine another tree bids for equally, which joins the trees
//     (the engine becomes a tie), or reach P, which ties it to the ground.
//     When every tree balances, flows follow by pruning leaves (owned
//     engines send their load to their owner, shared ones split theirs
//     along the tree); a negative flow cuts its arc and each side moves on
//     its own. Every move raises the dual; the method ends when every tree
//     balances with non-negative flows, where the optimality conditions
//     hold to rounding. It starts from the round's prices and the engines
//     its flows share; moves look only at the bids within 40 ms of each
//     engine's best (bidLists), and first only at the engines a move of
//     1 ms can reach (most moves are shorter), smaller trees first. The
//     crossover of earlier versions (crossover.go: the same forest with
//     every used route in it, one change at a time) remains the fallback,
//     tried once the gap is below 1e-6 if the tie method ran out of moves.
//  3. The certificate: the flows are repaired to exact feasibility and
//     costed (the objective), and the Lagrangian dual at the final prices,
//     Σ_c π_c·d_c − Σ_e F*_e(max_c(π_c − n_ce)) with F* the convex conjugate
//     over [0, u], is a lower bound on the optimum for any prices.
//     [Solution] reports both, their relative gap, and the largest KKT
//     violation in ms. With an exact finish the gap is about 1e-15.
//
// Evaluations visit, per engine, only the arcs within 30 ms of its price at
// the last rebuild (an arc's b and the engine's price each move at most as
// far as any cluster price, so a drift under 15 ms cannot make another arc
// carry flow); rebuilds, the certificate and the crossover's final check
// scan every arc. Per-cluster water-filling as a start and a plain
// proximal point method at a fixed κ were measured here and dropped: the
// first costs more than it saves, the second stalls near 1e-8 on the many
// near-ties of a real fleet.
//
// # Warm starts and churn
//
// [Options.Previous] starts from the last solution: its prices, and the
// engines its routes (scaled to today's demand) share, are usually the new
// optimum's ties or a few changes from them, so the tie method is tried
// first, then the crossover, before any Newton round. [Options.ChurnMs] > 0 makes
// the previous solution the proximal centre of one exactly solved round:
// the objective gains (ChurnMs/2)·‖w_c − w_prev,c‖² ms per request of each
// cluster (the shed fraction counts as a weight). Moving all of a cluster's
// traffic from one engine to another costs ChurnMs per request, and a
// route Δ ms better per request wins at most a fraction Δ/(2·ChurnMs) of
// the cluster in one solve: weights move only as far as the gain justifies,
// which damps the oscillation of feedback routing and keeps conversations,
// and their KV caches, on their engines. Re-solving a steady fleet, each
// solve centred on the last, is the proximal point method itself: latency
// falls every solve and converges to the optimum (tested). A linear (L1)
// switching cost was considered: it models re-prefill per moved request
// directly, but leaves a dead zone where weights stay put for good and
// makes the solution non-unique; the quadratic term keeps it unique,
// smooth and convergent. The certificate then covers the regularised
// problem; ObjectiveMs still reports latency alone, ChurnCostMs the term.
//
// # Figures
//
// See README.md for benchmark figures, the comparison with COIN-OR CLP and
// GLPK on the tangent-cut LP, and how time grows with fleet size.
//
// # Concurrency
//
// Solve keeps all its state in the call: any number of solves may run at
// once. Problems and solutions are plain data; Solve does not modify its
// Problem or Options.Previous.
package optimize

// Package backtest replays a request trace over a fleet, in virtual time,
// under each of several routing policies, and reports what each would have
// given: TTFT and end-to-end latency, KV cache hits, utilisation, weight
// churn and how often a conversation's next turn changed engine. It is the
// engine behind `ilb backtest` and `ilb trace convert`.
//
// The simulation is a discrete-event loop over arrivals, engine iterations
// and controller ticks. Engines are solver/engine's model, the one the
// engine simulator drives in real time. The optimizer policy runs ilb's
// own signal and weight path on the simulated signals: streams/window
// features, solver/regress profiles, the solver/prior cold-start
// profile, the optimizer service's demand estimate, derating and problem
// (services/internal/routing), solver/optimize anchored on what is
// published, solver/sched tables and the data plane's guardrails (routing
// again), at the cadence production would run them and without knowledge
// of the future.
// The legacy controller (pid) and the simple policies (round-robin,
// random, nearest, least-loaded, hash) run in the same loop. README.md
// describes the policies, the trace mapping and the output.
//
// Trace readers (ReadTrace) take ilb's CSV, Mooncake JSONL and the Azure
// LLM inference CSV, plain or gzip-compressed, validate every line, and map requests to clusters and
// conversations deterministically (AssignConversations, AssignClusters).
//
// # Concurrency
//
// A Backtest's Run simulates its policies on up to Config.Parallel
// goroutines, one simulation each; simulations share only read-only
// inputs, and Run returns when every one has ended. The result does not
// depend on the order or parallelism in which they ran: every source of
// randomness is seeded from Config.Seed and the policy name. Traces and
// results are plain values, not safe for concurrent mutation.
package backtest

// Package routing holds the routing rules that more than one service runs,
// so that production and the backtester run one code, not two: the
// optimizer's demand estimate (Demand), capacity derating (Derate),
// problem building and solution checks (BuildProblem, CheckSolution,
// Normalize, Change), and the data plane's pick guardrails (Shed, Over,
// Shares, Choose, Sticky, Spilled). The optimizer service and the data
// plane call them on live signals and requests, the backtester on
// simulated ones in virtual time; whatever differs between the two (time,
// the mean request, the configuration) is a parameter.
//
// The rules are pure: no I/O, no clock (times are window ends passed in),
// no randomness, no logging. Every sum runs in fleet order, so results do
// not depend on map order or on the order rows arrive in.
//
// # Concurrency
//
// The functions are safe for concurrent use. A Demand is owned by one
// goroutine (the optimizer's solve loop, or one simulation), and so are a
// Builder (BuildProblem keeping the routes between problems) and a Tabler
// (Table keeping a sched.Updater between updates).
package routing

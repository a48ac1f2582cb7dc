// Package regress owns ilb's latency-versus-load fits: from per-window
// features of one engine (or of one SKU) it estimates the profile the
// solver consumes (DESIGN.md, ilb solve):
//
//	ttft = TTFTBaseMs + TTFTQueueMs * ρ/(1-ρ)
//	tbot = TBOTBaseMs + TBOTSlopeMs * ρ          ρ = load / CapacityRPS
//
// # Method
//
// The capacity is unknown and enters non-linearly; for a fixed capacity c
// the TTFT model is linear in (base, queue). Fit therefore profiles c out:
// for each candidate c above the largest load seen, a weighted least-squares
// fit of TTFT against ρ/(1-ρ) (base and queue constrained non-negative)
// gives the residual sum of squares, and Fit takes the c that minimises it,
// by a grid over ln(c/maxLoad - 1) refined by golden-section search. The
// TBOT line is then fitted against ρ with the same c.
//
// The target is each window's median (Feature.TTFTP50Ms, TBOTP50Ms), not its
// mean: per-window latencies are heavy-tailed, a median of a window's
// requests is robust to a few stragglers, and it is what the feature table
// carries. The queue term then describes the median's growth, which is
// smaller than the mean's under heavy queueing; the solver sees a somewhat
// optimistic TTFT near saturation (README.md).
//
// CapacityRPS is the saturation load c, and is what the solver's
// capacity_rps must be, because its queueing term uses ρ = λ/capacity_rps.
// SLOCapacityRPS, where the fitted TTFT reaches Config.TTFTSLOMs, is an
// upper bound on useful load: an optimizer applies it as a utilisation cap
// (Profile.MaxUtilization), not by derating capacity_rps, which would
// distort the queueing curve.
//
// Fit refuses rather than guesses: too few windows (ErrTooFewSamples), a
// load range too narrow against the capacity (ErrNarrowRange), no sign of
// saturation so that the capacity is not identifiable (ErrNoSaturation: the
// best fit runs to the search bound, or TTFT does not rise with load), a
// poor TTFT fit (ErrPoorFit), non-finite or negative parameters
// (ErrBadFit), and NaN, infinite or negative inputs (ErrInvalidPoint).
// FitCapacity fits the other terms when the capacity is known.
//
// README.md reports fits of real measurements (llm-d on H100, published
// serving curves) kept in testdata/.
//
// # Concurrency
//
// Fit and FitCapacity are pure functions, safe for concurrent use; they
// allocate their scratch space per call. A Fitter keeps that space
// between fits (Fitter.Fit is Fit, bit for bit) and is owned by one
// goroutine, as the aggregator's profile loop and the backtester's
// optimizer policy own theirs. No clock, no randomness, no I/O:
// the same input gives bit-identical output.
package regress

// Package fleetmodel maps a fleet file's engines to the engine model's
// parameters, so that the engine simulator and the backtester model the
// same engines from the same fleet file.
//
// # Concurrency
//
// Params is pure and safe for concurrent use.
package fleetmodel

import (
	"fmt"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/engine"
)

// Params returns the engine model parameters of fleet engine fe: the
// fleet's numbers, with zero ones taken from engine.DefaultParams of fe's
// SKU, and its scheduler (schemas.DefaultScheduler when empty). KV
// admission is on, as in vLLM: a request waits while the KV memory
// reserved by the running ones would not hold it. The error names the
// engine and, when its SKU has no defaults, says so.
func Params(f *schemas.Fleet, fe schemas.FleetEngine) (engine.Params, error) {
	name := fe.Scheduler
	if name == "" {
		name = schemas.DefaultScheduler
	}
	sched, err := engine.ParseScheduler(name)
	if err != nil {
		return engine.Params{}, fmt.Errorf("engine %q: %w", fe.Name, err)
	}
	p := engine.Params{
		PrefillTokensPerS: fe.PrefillTokensPerS,
		DecodeBaseMs:      fe.DecodeStepMs.Base,
		DecodePerSeqMs:    fe.DecodeStepMs.PerSeq,
		MaxBatch:          fe.MaxBatch,
		KVCacheTokens:     fe.KVCacheTokens,
		BlockTokens:       f.BlockTokens,
		Replicas:          fe.Replicas,
		KVAdmission:       true,
		Scheduler:         sched,
		// 0 takes the SKU's budget in WithDefaults.
		MaxNumBatchedTokens: fe.MaxNumBatchedTokens,
	}
	p, known := p.WithDefaults(fe.SKU)
	if err := p.Validate(); err != nil {
		hint := ""
		if !known {
			hint = fmt.Sprintf(" (sku %q has no defaults; give every number)", fe.SKU)
		}
		return engine.Params{}, fmt.Errorf("engine %q: %w%s", fe.Name, err, hint)
	}
	return p, nil
}

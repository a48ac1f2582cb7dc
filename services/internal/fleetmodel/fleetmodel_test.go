package fleetmodel

import (
	"strings"
	"testing"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/engine"
)

func TestParams(t *testing.T) {
	a100, _ := engine.DefaultParams("a100")
	a100.KVAdmission, a100.BlockTokens = true, 64
	chunked := func(p engine.Params, budget int) engine.Params {
		p.Scheduler, p.MaxNumBatchedTokens = engine.SchedulerChunked, budget
		return p
	}
	for _, tc := range []struct {
		name  string
		block int
		fe    schemas.FleetEngine
		want  engine.Params
		err   string // substring; "" = valid
	}{
		{"zeros from the sku", 64, schemas.FleetEngine{Name: "e", SKU: "A100"}, a100, ""},
		{"block tokens from the sku", 0, schemas.FleetEngine{Name: "e", SKU: "a100"},
			func() engine.Params { p := a100; p.BlockTokens = 512; return p }(), ""},
		{"fleet numbers win", 64, schemas.FleetEngine{Name: "e", SKU: "h100", PrefillTokensPerS: 100,
			DecodeStepMs: schemas.DecodeStep{Base: 10, PerSeq: 1}, MaxBatch: 3, KVCacheTokens: 640, Replicas: 4},
			chunked(engine.Params{PrefillTokensPerS: 100, DecodeBaseMs: 10, DecodePerSeqMs: 1, MaxBatch: 3,
				KVCacheTokens: 640, BlockTokens: 64, Replicas: 4, KVAdmission: true}, 8192), ""},
		{"whole scheduler", 64, schemas.FleetEngine{Name: "e", SKU: "a100", Scheduler: "whole"},
			func() engine.Params {
				p := a100
				p.Scheduler, p.MaxNumBatchedTokens = engine.SchedulerWhole, 0
				return p
			}(), ""},
		{"fleet budget", 64, schemas.FleetEngine{Name: "e", SKU: "a100", Scheduler: "chunked", MaxNumBatchedTokens: 4096},
			chunked(a100, 4096), ""},
		{"bad scheduler", 64, schemas.FleetEngine{Name: "e", SKU: "a100", Scheduler: "fifo"}, engine.Params{},
			`engine "e": engine: invalid: scheduler "fifo"`},
		{"unknown sku with every number", 16, schemas.FleetEngine{Name: "e", SKU: "small", PrefillTokensPerS: 20000,
			DecodeStepMs: schemas.DecodeStep{Base: 20, PerSeq: 1}, MaxBatch: 4, KVCacheTokens: 100000},
			chunked(engine.Params{PrefillTokensPerS: 20000, DecodeBaseMs: 20, DecodePerSeqMs: 1, MaxBatch: 4,
				KVCacheTokens: 100000, BlockTokens: 16, Replicas: 1, KVAdmission: true}, 8192), ""},
		{"unknown sku without numbers", 16, schemas.FleetEngine{Name: "tpu-0", SKU: "tpu"}, engine.Params{},
			`engine "tpu-0": `},
		{"unknown sku hint", 16, schemas.FleetEngine{Name: "tpu-0", SKU: "tpu"}, engine.Params{},
			`(sku "tpu" has no defaults; give every number)`},
		{"known sku, bad number", 16, schemas.FleetEngine{Name: "e", SKU: "h100", MaxBatch: -1}, engine.Params{},
			`engine "e": `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Params(&schemas.Fleet{BlockTokens: tc.block}, tc.fe)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			case tc.err != "" && tc.fe.SKU == "h100" && strings.Contains(err.Error(), "no defaults"):
				t.Fatalf("error %v blames the sku, which has defaults", err)
			}
			if got != tc.want {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// Every engine of the built-in example fleet maps to valid parameters.
func TestParamsExampleFleet(t *testing.T) {
	f := schemas.ExampleFleet()
	for _, fe := range f.Engines {
		p, err := Params(f, fe)
		if err != nil {
			t.Fatalf("%s: %v", fe.Name, err)
		}
		if p.BlockTokens == 0 || p.Replicas == 0 || !p.KVAdmission {
			t.Fatalf("%s: defaults not filled: %+v", fe.Name, p)
		}
	}
}

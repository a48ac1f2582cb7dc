package fleetmodel_test

import (
	"fmt"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/fleetmodel"
)

func ExampleParams() {
	f := &schemas.Fleet{BlockTokens: 16}
	p, err := fleetmodel.Params(f, schemas.FleetEngine{Name: "h100-0", SKU: "h100", MaxBatch: 32})
	if err != nil {
		panic(err)
	}
	fmt.Printf("prefill %v tok/s, decode %v+%v·b ms, batch %d, kv %d tokens in blocks of %d, %d replica, kv admission %v\n",
		p.PrefillTokensPerS, p.DecodeBaseMs, p.DecodePerSeqMs, p.MaxBatch, p.KVCacheTokens, p.BlockTokens, p.Replicas, p.KVAdmission)
	_, err = fleetmodel.Params(f, schemas.FleetEngine{Name: "tpu-0", SKU: "tpu"})
	fmt.Println(err != nil)
	// Output:
	// prefill 9282 tok/s, decode 28.91+0.3343·b ms, batch 32, kv 500000 tokens in blocks of 16, 1 replica, kv admission true
	// true
}

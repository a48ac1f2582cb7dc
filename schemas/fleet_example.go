package schemas

import (
	"bytes"
	_ "embed"
	"fmt"
)

// exampleFleetYAML is fleets/example.yaml; its comments say where every
// number comes from.
//
//go:embed fleets/example.yaml
var exampleFleetYAML []byte

// ExampleFleet returns a fresh copy of the built-in example fleet that
// `ilb dev` runs when --fleet is absent: three Azure regions (east-us,
// west-us, west-europe) with measured inter-region RTTs, Llama-2-70B on
// H100 and A100 engines calibrated from SplitwiseSim measurements, three
// front-end clusters (fe-eu with residency eu), and west-us short of
// capacity for its demand. See fleets/example.yaml.
func ExampleFleet() *Fleet {
	f, err := ParseFleet(exampleFleetYAML)
	if err != nil {
		// The file is compiled in and tested; this is a build defect.
		panic(fmt.Sprintf("schemas: built-in example fleet is invalid: %v", err))
	}
	return f
}

// ExampleFleetOneModel is ExampleFleet with its models taken out (no
// engine lists models, no default_model, no model_shares): one implicit
// model, so one request class and demand rows named like the clusters,
// as every fleet was before models. For tests of single-class behaviour
// on the example's engines and clusters.
func ExampleFleetOneModel() *Fleet {
	f := ExampleFleet()
	f.DefaultModel = ""
	for i := range f.Engines {
		f.Engines[i].Models = nil
	}
	for i := range f.Clusters {
		f.Clusters[i].ModelShares = nil
	}
	return f
}

// ExampleFleetYAML returns the example fleet's YAML, comments included,
// for `ilb dev` to show or write out as a starting point.
func ExampleFleetYAML() []byte {
	return bytes.Clone(exampleFleetYAML)
}

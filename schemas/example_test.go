package schemas_test

import (
	"errors"
	"fmt"

	"github.com/ilb-router/ilb/schemas"
)

// Encode a status event to its protobuf wire form and decode it back.
func Example() {
	ev := schemas.Event{Kind: schemas.KindStatus, Status: schemas.EngineStatus{
		Engine: "eng-a", TimeUnixNano: 1795989600000000000, Health: schemas.HealthHealthy,
		ReadyReplicas: 1, TotalReplicas: 1, Running: 12, KVCacheUtilization: 0.5,
	}}
	wire, err := schemas.AppendEvent(nil, &ev)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d bytes: %x\n", len(wire), wire)

	var got schemas.Event
	if err := schemas.DecodeEvent(wire, &got); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(got.Status.Engine, got.Status.Running, got.Status.KVCacheUtilization)

	// A truncated record is reported, never a panic.
	err = schemas.DecodeEvent(wire[:10], &got)
	fmt.Println(errors.Is(err, schemas.ErrMalformed))
	// Output:
	// 37 bytes: 080112210a05656e672d611100c04b9006a3ec18180120012801300c41000000000000e03f
	// eng-a 12 0.5
	// true
}

// Decode the snapshot from DESIGN.md, then one whose weights do not add up.
func ExampleDecodeSnapshot() {
	s, err := schemas.DecodeSnapshot([]byte(`{"version": 42, "cluster": "fe-a",
		"created_at": "2026-11-29T22:00:00Z", "weights": {"eng-a": 0.7, "eng-b": 0.3},
		"shed_fraction": 0.0}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.Version, s.Cluster, s.Weights["eng-a"], s.CreatedAt.Format("15:04"))

	_, err = schemas.DecodeSnapshot([]byte(`{"version": 43, "cluster": "fe-a",
		"weights": {"eng-a": 0.7}, "shed_fraction": 0.2}`))
	fmt.Println(err)
	// Output:
	// 42 fe-a 0.7 22:00
	// schemas: snapshot: invalid: weights sum to 0.7, want 1 - shed_fraction = 0.8
}

// The built-in example fleet: which engines fe-eu may use, and at what
// network cost.
func ExampleFleet_EligibleEngines() {
	f := schemas.ExampleFleet()
	eu, _ := f.Cluster("fe-eu")
	for _, e := range f.EligibleEngines(eu) {
		ms, _ := f.NetworkMsBetween(eu.Region, e.Region)
		fmt.Println(e.Name, e.SKU, ms)
	}
	key, _ := schemas.ClusterKey(eu.Name)
	fmt.Println(schemas.BucketWeights, key)
	// Output:
	// eu-h100-0 h100 1
	// eu-a100-0 a100 1
	// ilb-weights fe-eu
}

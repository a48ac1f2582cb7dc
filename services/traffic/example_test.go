package traffic_test

import (
	"fmt"
	"time"

	"github.com/ilb-router/ilb/services/traffic"
)

func ExampleParseSwings() {
	swings, err := traffic.ParseSwings("fe-east*3@60s-180s/5m")
	if err != nil {
		panic(err)
	}
	for _, at := range []time.Duration{30 * time.Second, 90 * time.Second, 200 * time.Second, 6 * time.Minute} {
		fmt.Printf("at %v: fe-east ×%g, fe-eu ×%g\n", at, traffic.Multiplier(swings, "fe-east", at), traffic.Multiplier(swings, "fe-eu", at))
	}
	// Output:
	// at 30s: fe-east ×1, fe-eu ×1
	// at 1m30s: fe-east ×3, fe-eu ×1
	// at 3m20s: fe-east ×1, fe-eu ×1
	// at 6m0s: fe-east ×3, fe-eu ×1
}

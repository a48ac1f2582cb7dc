package optimizer_test

import (
	"fmt"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/optimizer"
)

// An engine the aggregator has not fitted yet gets a profile from its fleet
// parameters: here the example fleet's H100 and A100 for 1000-token prompts
// and 200 output tokens.
func ExamplePriorProfile() {
	f := schemas.ExampleFleetOneModel()
	for _, name := range []string{"east-h100-0", "east-a100-0"} {
		e, _ := f.Engine(name)
		p := optimizer.PriorProfile(e, 1000, 200)
		fmt.Printf("%s: capacity %.2f rps, ttft %.0f + %.0f·ρ/(1−ρ) ms, tbot %.1f + %.1f·ρ ms\n",
			p.Name, p.CapacityRps, p.TTFT.BaseMs, p.TTFT.QueueMs, p.TBOT.BaseMs, p.TBOT.SlopeMs)
	}
	// Output:
	// east-h100-0: capacity 3.60 rps, ttft 160 + 35·ρ/(1−ρ) ms, tbot 30.0 + 44.5·ρ ms
	// east-a100-0: capacity 1.95 rps, ttft 352 + 64·ρ/(1−ρ) ms, tbot 45.4 + 89.5·ρ ms
}

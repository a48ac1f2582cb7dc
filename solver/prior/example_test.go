package prior_test

import (
	"fmt"

	"github.com/ilb-router/ilb/solver/engine"
	"github.com/ilb-router/ilb/solver/prior"
)

// The prior of a calibrated h100 for 4000-token prompts and 200 output
// tokens, without and with the prompts' second moment (here exponential
// prompt sizes, E[p²] = 2·E[p]²).
func ExampleProfile() {
	p, _ := engine.DefaultParams("h100")
	for _, sh := range []prior.Shape{
		{PromptTokens: 4000, OutputTokens: 200},
		{PromptTokens: 4000, OutputTokens: 200, UncachedSq: 2 * 4000 * 4000},
	} {
		e := prior.Profile("h100", p, sh)
		fmt.Printf("capacity %.2f rps, ttft %.0f + %.0f·ρ/(1−ρ) ms, tbot %.1f + %.1f·ρ ms\n",
			e.CapacityRps, e.TTFT.BaseMs, e.TTFT.QueueMs, e.TBOT.BaseMs, e.TBOT.SlopeMs)
	}
	// Output:
	// capacity 1.70 rps, ttft 474 + 73·ρ/(1−ρ) ms, tbot 29.2 + 119.7·ρ ms
	// capacity 1.70 rps, ttft 474 + 431·ρ/(1−ρ) ms, tbot 29.2 + 119.7·ρ ms
}

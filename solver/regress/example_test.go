package regress_test

import (
	"errors"
	"fmt"

	"github.com/ilb-router/ilb/solver/regress"
)

// Fit an engine's profile from ten windows of features, and use it.
func ExampleFit() {
	// Windows seen from an engine with base 150 ms, queue 40 ms, capacity
	// 100 rps, TBOT 20 + 15ρ ms, with a little alternating noise.
	var pts []regress.Point
	for i, load := range []float64{10, 20, 30, 40, 50, 60, 70, 80, 85, 90} {
		rho := load / 100
		noise := 1 + 0.01*float64(i%2*2-1)
		pts = append(pts, regress.Point{
			LoadRPS: load,
			TTFTMs:  (150 + 40*rho/(1-rho)) * noise,
			TBOTMs:  (20 + 15*rho) * noise,
		})
	}
	p, err := regress.Fit(pts, regress.DefaultConfig())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("capacity %.0f rps, TTFT %.0f + %.0f·ρ/(1-ρ) ms, TBOT %.0f + %.0f·ρ ms\n",
		p.CapacityRPS, p.TTFTBaseMs, p.TTFTQueueMs, p.TBOTBaseMs, p.TBOTSlopeMs)
	fmt.Printf("TTFT at 75 rps: %.0f ms; 1 s SLO reached at %.0f rps (max utilization %.2f)\n",
		p.TTFTMs(75), p.SLOCapacityRPS, p.MaxUtilization())

	// Loads that never approach saturation cannot tell the capacity.
	flat := pts[:8]
	for i := range flat {
		flat[i].TTFTMs = 150 + flat[i].LoadRPS/10
	}
	_, err = regress.Fit(flat, regress.DefaultConfig())
	fmt.Println(errors.Is(err, regress.ErrNoSaturation))
	// Output:
	// capacity 100 rps, TTFT 150 + 39·ρ/(1-ρ) ms, TBOT 20 + 15·ρ ms
	// TTFT at 75 rps: 269 ms; 1 s SLO reached at 95 rps (max utilization 0.96)
	// true
}

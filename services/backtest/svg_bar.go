package backtest

import (
	"fmt"
	"html"
	"strings"
)

// outcomeBars renders, per policy, one horizontal bar of all its requests
// split into served within the SLO, served late, shed and failed, labelled
// with its SLO attainment and goodput: the chart the report leads with.
func outcomeBars(res *Result) string {
	const rowH, barX, barW, labelW = 22, 170, 520, 200
	h := padT + rowH*len(res.Policies) + 40
	w := barX + barW + labelW
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="goodput per policy">`, w, h, w, h)
	fmt.Fprintf(&b, `<text x="8" y="18" class="t">Goodput: share of all requests served within the SLO (TTFT &le; %g ms, TBOT &le; %g ms)</text>`,
		res.sloTTFT(), res.sloTBOT())
	parts := []struct {
		name, col string
		frac      func(p *PolicyResult) float64
	}{
		{"within SLO", "#009E73", func(p *PolicyResult) float64 { return p.SLOAttainment }},
		{"served late", "#BBBBBB", func(p *PolicyResult) float64 { return p.ServedFraction - p.SLOAttainment }},
		{"shed", "#E69F00", func(p *PolicyResult) float64 { return p.ShedFraction }},
		{"failed", "#D55E00", func(p *PolicyResult) float64 { return p.FailedFraction }},
	}
	for i := range res.Policies {
		p := &res.Policies[i]
		y := padT + rowH*i
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`, barX-6, y+14, html.EscapeString(p.Policy))
		x := float64(barX)
		for _, part := range parts {
			wd := max(part.frac(p), 0) * barW
			if wd > 0 {
				fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s %.2f%%</title></rect>`,
					x, y+2, wd, rowH-6, part.col, part.name, 100*part.frac(p))
			}
			x += wd
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d">%.2f%% · %.3f rps · shed %.2f%%</text>`, barX+barW+8, y+14,
			100*p.SLOAttainment, p.GoodputRPS, 100*p.ShedFraction)
	}
	ly := padT + rowH*len(res.Policies) + 16
	for k, part := range parts {
		x := barX + 130*k
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="14" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`, x, ly, part.col, x+18, ly+9, part.name)
	}
	b.WriteString("</svg>")
	return b.String()
}

func (r *Result) sloTTFT() float64 {
	if len(r.Policies) == 0 {
		return 0
	}
	return r.Policies[0].SLO.TTFTMs
}

func (r *Result) sloTBOT() float64 {
	if len(r.Policies) == 0 {
		return 0
	}
	return r.Policies[0].SLO.TBOTMs
}

// shedChart is each policy's requests shed per series step, over time.
func shedChart(res *Result) *chart {
	c := &chart{title: "Requests shed per step, by policy", xLabel: "simulated time (s)", yLabel: "shed requests"}
	for _, p := range res.Policies {
		if p.Series == nil {
			continue
		}
		y := make([]float64, len(p.Series.Shed))
		for k, n := range p.Series.Shed {
			y[k] = float64(n)
		}
		c.series = append(c.series, chartSeries{name: p.Policy, x: p.Series.TimeS[:len(y)], y: y})
	}
	return c
}

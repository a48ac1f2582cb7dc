package backtest

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// chartSeries is one line of a chart.
type chartSeries struct {
	name string
	x, y []float64
}

// chart is a line chart rendered as inline SVG: no script, no external
// resources, so the report opens from disk.
type chart struct {
	title, xLabel, yLabel string
	logX                  bool
	yMin, yMax            float64 // yMax 0: from the data
	series                []chartSeries
}

const (
	chartW, chartH = 640, 300
	padL, padR     = 64, 150
	padT, padB     = 28, 44
)

// palette is a colour-blind-safe set (Okabe-Ito), repeated if needed.
var palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442", "#999999"}

func (c *chart) svg() string {
	x0, x1, y0, y1, ok := c.bounds()
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`,
		chartW, chartH, chartW, chartH, html.EscapeString(c.title))
	fmt.Fprintf(&b, `<text x="%d" y="18" class="t">%s</text>`, padL, html.EscapeString(c.title))
	if !ok {
		b.WriteString(`<text x="100" y="150">no data</text></svg>`)
		return b.String()
	}
	scale := func(x float64) float64 {
		if c.logX {
			return math.Log10(x)
		}
		return x
	}
	sx0, sx1 := scale(x0), scale(x1)
	px := func(x float64) float64 { return padL + (scale(x)-sx0)/(sx1-sx0)*(chartW-padL-padR) }
	py := func(y float64) float64 { return chartH - padB - (y-y0)/(y1-y0)*(chartH-padT-padB) }
	c.axes(&b, x0, x1, y0, y1, px, py)
	for i, s := range c.series {
		col := palette[i%len(palette)]
		var pts strings.Builder
		for k := range s.x {
			if c.logX && s.x[k] <= 0 || math.IsNaN(s.y[k]) {
				continue
			}
			fmt.Fprintf(&pts, "%.1f,%.1f ", px(s.x[k]), py(min(max(s.y[k], y0), y1)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s"/>`, col, pts.String())
		ly := padT + 14*i + 8
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/><text x="%d" y="%d">%s</text>`,
			chartW-padR+10, ly, chartW-padR+28, ly, col, chartW-padR+32, ly+4, html.EscapeString(s.name))
	}
	b.WriteString("</svg>")
	return b.String()
}

// bounds returns the data range, widened to the chart's fixed limits.
func (c *chart) bounds() (x0, x1, y0, y1 float64, ok bool) {
	x0, x1, y0, y1 = math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range c.series {
		for k := range s.x {
			if c.logX && s.x[k] <= 0 || math.IsNaN(s.y[k]) || math.IsInf(s.x[k], 0) || math.IsInf(s.y[k], 0) {
				continue
			}
			x0, x1 = min(x0, s.x[k]), max(x1, s.x[k])
			y0, y1 = min(y0, s.y[k]), max(y1, s.y[k])
		}
	}
	if math.IsInf(x0, 1) {
		return 0, 0, 0, 0, false
	}
	y0 = min(y0, c.yMin)
	if c.yMax > 0 {
		y1 = c.yMax
	}
	if x1 <= x0 {
		x1 = x0 + 1
	}
	if y1 <= y0 {
		y1 = y0 + 1
	}
	return x0, x1, y0, y1, true
}

func (c *chart) axes(b *strings.Builder, x0, x1, y0, y1 float64, px, py func(float64) float64) {
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" class="frame"/>`, padL, padT, chartW-padL-padR, chartH-padT-padB)
	for _, v := range ticks(y0, y1, false) {
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" class="grid"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`,
			padL, py(v), chartW-padR, py(v), padL-4, py(v)+4, tickLabel(v))
	}
	for _, v := range ticks(x0, x1, c.logX) {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" class="grid"/><text x="%.1f" y="%d" text-anchor="middle">%s</text>`,
			px(v), padT, px(v), chartH-padB, px(v), chartH-padB+14, tickLabel(v))
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`, padL+(chartW-padL-padR)/2, chartH-8, html.EscapeString(c.xLabel))
	fmt.Fprintf(b, `<text x="14" y="%d" transform="rotate(-90 14 %d)" text-anchor="middle">%s</text>`,
		padT+(chartH-padT-padB)/2, padT+(chartH-padT-padB)/2, html.EscapeString(c.yLabel))
}

// ticks returns round tick values in [lo, hi]: powers of ten on a log
// axis, else steps of 1, 2 or 5 times a power of ten.
func ticks(lo, hi float64, log bool) []float64 {
	var out []float64
	if log {
		for p := math.Floor(math.Log10(lo)); p <= math.Ceil(math.Log10(hi)); p++ {
			if v := math.Pow(10, p); v >= lo*0.999 && v <= hi*1.001 {
				out = append(out, v)
			}
		}
		return out
	}
	raw := (hi - lo) / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{2, 5, 10} {
		if raw/step <= 1.5 {
			break
		}
		step = mag * m
	}
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		out = append(out, v)
	}
	return out
}

func tickLabel(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case a >= 1e3:
		return fmt.Sprintf("%gk", v/1e3)
	}
	return fmt.Sprintf("%g", math.Round(v*1000)/1000)
}

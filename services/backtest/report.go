package backtest

import (
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// WriteReport writes res as dir/index.html: the policy table and charts
// (latency CDFs, per-engine load and weights over time, cache hit ratio
// over time) as inline SVG, readable from disk without a server.
func WriteReport(dir string, res *Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("backtest: report: %w", err)
	}
	path := filepath.Join(dir, "index.html")
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("backtest: report: %w", err)
	}
	err = writeHTML(f, res)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("backtest: report: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("backtest: report: %w", err)
	}
	return nil
}

const reportStyle = `body{font:14px system-ui,sans-serif;margin:24px;max-width:1400px;color:#222}
table{border-collapse:collapse;margin:12px 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
svg{margin:6px;font-size:11px}svg .t{font-size:13px;font-weight:600}
svg .frame{fill:none;stroke:#888}svg .grid{stroke:#e4e4e4}
.charts{display:flex;flex-wrap:wrap}h2{margin-top:28px}`

func writeHTML(w io.Writer, res *Result) error {
	var b strings.Builder
	b.WriteString("<!doctype html><html><head><meta charset=\"utf-8\"><title>ilb backtest</title><style>")
	b.WriteString(reportStyle)
	b.WriteString("</style></head><body><h1>ilb backtest</h1>")
	t := res.Trace
	fmt.Fprintf(&b, "<p>Trace: %s, %d requests, %d conversations over %.0f s (speed %g, seed %d",
		html.EscapeString(t.Format), t.Requests, t.Conversations, t.DurationS, res.Speed, res.Seed)
	if t.SwingCopies+t.SwingDropped > 0 {
		fmt.Fprintf(&b, "; swings added %d and dropped %d requests", t.SwingCopies, t.SwingDropped)
	}
	b.WriteString(").</p>")
	b.WriteString("<h2>Goodput</h2>")
	b.WriteString(outcomeBars(res))
	b.WriteString("<div class=\"charts\">")
	b.WriteString(shedChart(res).svg())
	b.WriteString("</div>")
	policyTable(&b, res)
	b.WriteString("<h2>Latency</h2><div class=\"charts\">")
	b.WriteString(cdfChart("TTFT CDF", res, func(p *PolicyResult) []float64 { return p.TTFTCDF }).svg())
	b.WriteString(cdfChart("End-to-end latency CDF", res, func(p *PolicyResult) []float64 { return p.E2ECDF }).svg())
	b.WriteString("</div><h2>Cache hits over time</h2><div class=\"charts\">")
	b.WriteString(cacheChart(res).svg())
	b.WriteString("</div>")
	calibrationTables(&b, res)
	b.WriteString("<h2>Per-engine load and weights over time</h2>")
	for i := range res.Policies {
		p := &res.Policies[i]
		if p.Series == nil {
			continue
		}
		fmt.Fprintf(&b, "<h3>%s</h3><div class=\"charts\">", html.EscapeString(p.Policy))
		b.WriteString(engineChart(p.Policy+": requests in flight", "requests", p.Series, p.Series.InFlight).svg())
		if p.Series.Weights != nil {
			b.WriteString(engineChart(p.Policy+": share of fleet traffic (weights)", "share", p.Series, p.Series.Weights).svg())
		}
		b.WriteString("</div>")
	}
	b.WriteString("<p>Latencies include the network time between a request's cluster and its engine. " +
		"Weight churn is the mean total variation distance between consecutive weight vectors; " +
		"moved is the share of follow-up turns sent to another engine than the previous turn.</p></body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// calibrationTables shows, for each policy with a model (the optimizer),
// the model's predictions against what the engines did.
func calibrationTables(b *strings.Builder, res *Result) {
	for _, p := range res.Policies {
		if len(p.Calibration) == 0 {
			continue
		}
		fmt.Fprintf(b, "<h2>Model calibration: %s</h2><p>Predicted by the profile in force at each request's arrival, "+
			"at the engine's load over the surrounding minute; observed on the simulated engine (TTFT without network). "+
			"Measured capacity: the engine model saturated with a sample of this trace's requests.</p>", html.EscapeString(p.Policy))
		b.WriteString("<table><tr><th>engine</th><th>requests</th><th>load rps</th><th>TTFT predicted ms</th><th>observed</th><th>error</th>" +
			"<th>TBOT predicted ms</th><th>observed</th><th>error</th><th>capacity model rps</th><th>measured</th><th>error</th></tr>")
		for _, c := range p.Calibration {
			fmt.Fprintf(b, "<tr><td>%s</td><td>%d</td><td>%.3f</td><td>%.0f</td><td>%.0f</td><td>%+.0f%%</td><td>%.1f</td><td>%.1f</td><td>%+.0f%%</td>"+
				"<td>%.3f</td><td>%.3f</td><td>%+.0f%%</td></tr>",
				html.EscapeString(c.Name), c.Requests, c.MeanLoadRPS, c.PredictedTTFTMs, c.ObservedTTFTMs, 100*c.TTFTErrorRatio,
				c.PredictedTBOTMs, c.ObservedTBOTMs, 100*c.TBOTErrorRatio, c.ModelCapacityRPS, c.MeasuredCapacityRPS, 100*c.CapacityErrorRatio)
		}
		b.WriteString("</table>")
	}
}

func policyTable(b *strings.Builder, res *Result) {
	b.WriteString("<table><tr><th>policy</th><th>SLO attainment</th><th>goodput rps</th><th>served</th><th>shed</th><th>failed</th>" +
		"<th>TTFT p50 ms</th><th>p90</th><th>p99</th><th>TBOT p50 ms</th><th>p99</th>" +
		"<th>e2e p50 ms</th><th>p99</th><th>cache hit</th><th>max util</th><th>weight churn</th><th>follow-ups moved</th></tr>")
	for _, p := range res.Policies {
		fmt.Fprintf(b, "<tr><td>%s</td><td>%.4f</td><td>%.3f</td><td>%d</td><td>%d</td><td>%d</td><td>%.0f</td><td>%.0f</td><td>%.0f</td>"+
			"<td>%.1f</td><td>%.1f</td><td>%.0f</td><td>%.0f</td><td>%.3f</td><td>%.2f</td><td>%.4f</td><td>%.3f</td></tr>",
			html.EscapeString(p.Policy), p.SLOAttainment, p.GoodputRPS, p.Served, p.Shed, p.Failed, p.TTFTMs.P50, p.TTFTMs.P90, p.TTFTMs.P99,
			p.TBOTMs.P50, p.TBOTMs.P99, p.E2EMs.P50, p.E2EMs.P99, p.CacheHitRatio, p.MaxUtilization, p.WeightChurn, p.FollowupMovedRatio)
	}
	b.WriteString("</table>")
}

func cdfChart(title string, res *Result, get func(*PolicyResult) []float64) *chart {
	c := &chart{title: title, xLabel: "ms (log scale)", yLabel: "fraction of requests", logX: true, yMax: 1}
	for i := range res.Policies {
		p := &res.Policies[i]
		c.series = append(c.series, chartSeries{name: p.Policy, x: get(p), y: CDFQuantiles})
	}
	return c
}

// cacheSmoothing is how many series steps the cache hit chart sums over.
const cacheSmoothing = 6

func cacheChart(res *Result) *chart {
	c := &chart{title: "Cache hit ratio of prompt tokens (sliding 6 steps)", xLabel: "simulated time (s)", yLabel: "hit ratio"}
	for _, p := range res.Policies {
		if p.Series == nil {
			continue
		}
		s := p.Series
		y := make([]float64, len(s.TimeS))
		for k := range y {
			var prompt, cached int64
			for j := max(0, k-cacheSmoothing+1); j <= k; j++ {
				prompt += s.PromptTokens[j]
				cached += s.CachedTokens[j]
			}
			y[k] = math.NaN()
			if prompt > 0 {
				y[k] = float64(cached) / float64(prompt)
			}
		}
		c.series = append(c.series, chartSeries{name: p.Policy, x: s.TimeS, y: y})
	}
	return c
}

func engineChart(title, yLabel string, s *Series, rows [][]float64) *chart {
	c := &chart{title: title, xLabel: "simulated time (s)", yLabel: yLabel}
	for e, name := range s.Engines {
		y := make([]float64, len(rows))
		for k, row := range rows {
			y[k] = row[e]
		}
		c.series = append(c.series, chartSeries{name: name, x: s.TimeS[:len(rows)], y: y})
	}
	return c
}

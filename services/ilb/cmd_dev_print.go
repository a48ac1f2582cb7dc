package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/traffic"
)

// printDevBanner tells the user where everything is and what to try.
func printDevBanner(e *env, d *devFleet) {
	w := e.stdout
	page := "http://" + reachable(d.srv.Addr())
	kafkaAddr, natsURL := d.brokers.KafkaAddrs()[0], d.brokers.NATSURL()
	f := d.plan.fleet
	fmt.Fprintln(w, "ilb dev: local fleet up")
	fmt.Fprintf(w, "  page      %s/\n", page)
	fmt.Fprintf(w, "  kafka     %-22s (kcat -b %s -C -t %s)\n", kafkaAddr, kafkaAddr, schemas.TopicSignals)
	fmt.Fprintf(w, "  nats      %-22s (nats --server %s kv get %s %s)\n", natsURL, natsURL, schemas.BucketWeights, f.Clusters[0].Name)
	if n := len(d.brokers.NATSURLs()); n > 1 {
		fmt.Fprintf(w, "  nats      cluster of %d nodes; bucket %s with %d replicas (nats --server %s stream info KV_%s)\n",
			n, schemas.BucketWeights, d.plan.natsReplicas, natsURL, schemas.BucketWeights)
	}
	fmt.Fprintf(w, "  metrics   %s/metrics\n", page)
	fmt.Fprintf(w, "  engines   %s at http://%s/engines\n", engineSummary(f), d.sim.Addr())
	fmt.Fprintf(w, "  models    %s\n", modelSummary(f))
	fmt.Fprintf(w, "  clusters  %s\n", clusterSummary(f))
	fmt.Fprintf(w, "  traffic   %s\n", trafficSummary(d.plan))
	fmt.Fprintf(w, "  api       %s/v1/chat/completions  /v1/pick  /v1/routing  /v1/features  /v1/profiles  /v1/optimizer  /healthz\n", page)
	fmt.Fprintln(w, "Ctrl-C stops everything.")
}

// engineSummary is e.g. "6 in 3 regions (3× h100, 3× a100)".
func engineSummary(f *schemas.Fleet) string {
	skus := map[string]int{}
	var order []string
	for _, e := range f.Engines {
		if skus[e.SKU] == 0 {
			order = append(order, e.SKU)
		}
		skus[e.SKU]++
	}
	parts := make([]string, 0, len(order))
	for _, s := range order {
		parts = append(parts, fmt.Sprintf("%d× %s", skus[s], s))
	}
	return fmt.Sprintf("%d in %d regions (%s)", len(f.Engines), len(f.Regions()), strings.Join(parts, ", "))
}

// modelSummary is e.g. "llama-2-70b (6 engines), llama-2-70b-code (3
// engines); name one with "model" in the body or X-Ilb-Model".
func modelSummary(f *schemas.Fleet) string {
	if !f.ExplicitModels() {
		return "one (the fleet lists no models): every request is routed whatever model it names"
	}
	models := f.Models()
	parts := make([]string, 0, len(models))
	for _, m := range models {
		n := 0
		for _, e := range f.Engines {
			if f.ServesModel(e, m) {
				n++
			}
		}
		parts = append(parts, fmt.Sprintf("%s (%d engines)", m, n))
	}
	return strings.Join(parts, ", ") + "; name one with \"model\" in the body or X-Ilb-Model"
}

func clusterSummary(f *schemas.Fleet) string {
	parts := make([]string, 0, len(f.Clusters))
	for _, c := range f.Clusters {
		parts = append(parts, fmt.Sprintf("%s (%s, %.0f%%)", c.Name, c.Region, 100*f.DemandFraction(c.Name)))
	}
	return strings.Join(parts, ", ")
}

func trafficSummary(p devPlan) string {
	s := fmt.Sprintf("%g req/s of multi-turn conversations, seed %d", p.rateRPS, p.seed)
	if len(p.swings) == 0 {
		return s + "; no demand swing"
	}
	parts := make([]string, 0, len(p.swings))
	for _, sw := range p.swings {
		parts = append(parts, describeSwing(sw))
	}
	return s + "; " + strings.Join(parts, "; ")
}

// describeSwing is e.g. "fe-east demand ×2 from 1m0s to 3m0s, every 5m0s".
func describeSwing(s traffic.Swing) string {
	out := fmt.Sprintf("%s demand ×%g from %v to %v", s.Cluster, s.Factor, s.From, s.To)
	if s.Every > 0 {
		out += fmt.Sprintf(", every %v", s.Every)
	}
	return out
}

// reportProgress prints a one-line summary every plan.progress.
func (d *devFleet) reportProgress(ctx context.Context, e *env) error {
	t := time.NewTicker(d.plan.progress)
	defer t.Stop()
	var prev traffic.ClusterStats
	prevAt := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			st := d.gen.Stats()
			writeProgress(e.stderr, d, st, prev, now.Sub(prevAt), now)
			prev, prevAt = st.Total, now
		}
	}
}

func writeProgress(w io.Writer, d *devFleet, st traffic.Stats, prev traffic.ClusterStats, dt time.Duration, now time.Time) {
	sec := dt.Seconds()
	cur := st.Total
	sent, ok, shed := float64(cur.Sent-prev.Sent)/sec, float64(cur.OK-prev.OK)/sec, float64(cur.Shed-prev.Shed)/sec
	shedPct := 0.0
	if sent > 0 {
		shedPct = 100 * shed / sent
	}
	line := fmt.Sprintf("ilb dev: %6s  %5.1f req/s sent, %5.1f ok, %4.1f shed (%4.1f%%)", st.Elapsed.Round(time.Second),
		sent, ok, shed, shedPct)
	if cur.LatencyMs.N > 0 {
		line += fmt.Sprintf(", p50 %.1fs", cur.LatencyMs.P50/1000)
	}
	if cur.Errors > prev.Errors {
		line += fmt.Sprintf(", %d errors", cur.Errors-prev.Errors)
	}
	os := d.opt.State()
	if os.Version == 0 {
		line += "; no snapshot yet"
	} else {
		line += fmt.Sprintf("; snapshot v%d (%s old)", os.Version, now.Sub(os.PublishedAt).Round(time.Second))
	}
	var swung []string
	for _, c := range st.Clusters {
		if c.Multiplier != 1 {
			swung = append(swung, fmt.Sprintf("%s ×%g", c.Cluster, c.Multiplier))
		}
	}
	sort.Strings(swung)
	if len(swung) > 0 {
		line += "; demand swing " + strings.Join(swung, ", ")
	}
	fmt.Fprintln(w, line)
}

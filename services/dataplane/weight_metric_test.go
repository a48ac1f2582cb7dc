package dataplane

import "testing"

// ilb_dataplane_weight follows the snapshot in use, per cluster and
// engine (the Grafana dashboard's weights panel reads it).
func TestWeightMetric(t *testing.T) {
	deps, tel := withTelemetry(t)
	d := newDP(t, testConfig("fe-a"), deps)
	h := tel.MetricsHandler()
	if got := metricValue(t, h, metricWeight, nil); got != 0 {
		t.Fatalf("before a snapshot: %v", got)
	}
	mustSet(t, d, snap("fe-a", 1, map[string]float64{"eng-a": 0.7, "eng-b": 0.3}))
	mustSet(t, d, snap("fe-a", 2, map[string]float64{"eng-a": 0.25, "eng-b": 0.75}))
	for eng, want := range map[string]float64{"eng-a": 0.25, "eng-b": 0.75} {
		if got := metricValue(t, h, metricWeight, map[string]string{"cluster": "fe-a", "engine": eng}); got != want {
			t.Errorf("%s weight %v, want %v", eng, got, want)
		}
	}
}

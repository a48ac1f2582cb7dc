package console

import (
	"testing"
	"time"
)

// BenchmarkSample measures one sampling round with a full history (600
// points of the example fleet): reading the sources, building the state
// and encoding it, once per second in `ilb dev`.
func BenchmarkSample(b *testing.B) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := newFakeFleet(start)
	c, err := New(DefaultConfig(f.fleet), f.sources())
	if err != nil {
		b.Fatal(err)
	}
	for f.step = 0; f.step < 600; f.step++ {
		c.sampleAndPublish(b.Context(), start.Add(time.Duration(f.step)*time.Second))
	}
	b.ReportAllocs()
	for b.Loop() {
		f.step++
		c.sampleAndPublish(b.Context(), start.Add(time.Duration(f.step)*time.Second))
	}
	b.ReportMetric(float64(len(*c.state.Load()))/1024, "KiB/state")
}

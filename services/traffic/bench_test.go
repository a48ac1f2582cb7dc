package traffic

import (
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkUserMessage measures writing one turn's text (600 tokens,
// 2,400 bytes): done once per request.
func BenchmarkUserMessage(b *testing.B) {
	cfg := DefaultConfig()
	s := newScript(&cfg, "fe-east", 1, rand.New(rand.NewPCG(1, 1)))
	s.Turns[0].UserTokens = 600
	b.ReportAllocs()
	for b.Loop() {
		_ = s.UserMessage(0)
	}
	b.ReportMetric(float64(600*bytesPerToken)*float64(b.N)/b.Elapsed().Seconds()/1e6, "MB/s")
}

// BenchmarkArrivals measures drawing an arrival and its script.
func BenchmarkArrivals(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Swings = []Swing{{"fe-east", 3, time.Minute, 3 * time.Minute, 5 * time.Minute}}
	p := newArrivalProcess(&cfg, 0, 100)
	b.ReportAllocs()
	for b.Loop() {
		p.next()
	}
}

package window

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// benchEvents returns a mix of nine completions to one status event over
// the given engines and clusters, with lognormal latencies; times are set
// by the caller (setTime).
func benchEvents(n, engines, clusters int) []schemas.Event {
	r := rand.New(rand.NewPCG(42, 42))
	names := make([]string, engines)
	for i := range names {
		names[i] = fmt.Sprintf("engine-%03d", i)
	}
	cl := make([]string, clusters)
	for i := range cl {
		cl[i] = fmt.Sprintf("fe-%02d", i)
	}
	evs := make([]schemas.Event, n)
	for i := range evs {
		e := names[r.IntN(engines)]
		if i%10 == 9 {
			evs[i] = status(e, 0, uint32(r.IntN(64)), uint32(r.IntN(8)), 1, r.Float64(), schemas.HealthHealthy)
			continue
		}
		failure := ""
		if r.IntN(100) == 0 {
			failure = "overloaded"
		}
		evs[i] = completion(e, cl[r.IntN(clusters)], 0,
			math.Exp(math.Log(300)+r.NormFloat64()), math.Exp(math.Log(30)+0.3*r.NormFloat64()),
			uint32(1+r.IntN(500)), uint32(100+r.IntN(4000)), uint32(r.IntN(100)), failure)
	}
	return evs
}

func setTime(ev *schemas.Event, ns int64) {
	ev.Completion.TimeUnixNano = ns
	ev.Status.TimeUnixNano = ns
}

// BenchmarkAggregate measures Features.Add per event (decoding excluded)
// on a stream of 100 engines x 8 clusters arriving at 100k events/s of
// event time, up to 0.5 s out of order, drained every 4096 events.
func BenchmarkAggregate(b *testing.B) {
	for _, c := range []struct {
		name string
		hop  time.Duration
	}{{"tumbling10s", 10 * time.Second}, {"hopping10s/5s", 5 * time.Second}} {
		b.Run(c.name, func(b *testing.B) {
			cfg := DefaultFeaturesConfig()
			cfg.Window.Hop = c.hop
			f, err := NewFeatures(cfg)
			if err != nil {
				b.Fatal(err)
			}
			evs := benchEvents(1<<16, 100, 8)
			r := rand.New(rand.NewPCG(1, 2))
			jitter := make([]int64, len(evs))
			for i := range jitter {
				jitter[i] = -r.Int64N(int64(500 * time.Millisecond))
			}
			var rows []schemas.Feature
			offsets := make([]int64, 16)
			b.ReportAllocs()
			i := 0
			cpu0 := cpuTime()
			for b.Loop() {
				k := i & (len(evs) - 1)
				ev := &evs[k]
				setTime(ev, int64(time.Hour)+int64(i)*10_000+jitter[k])
				p := k & 15
				f.Add(Position{Partition: int32(p), Offset: offsets[p]}, ev)
				offsets[p]++
				if i&4095 == 4095 {
					rows = f.Drain(rows[:0])
				}
				i++
			}
			reportRates(b, cpu0, "events")
		})
	}
}

// BenchmarkWindowerAdd is the windowing core alone, with a counter as the
// accumulator.
func BenchmarkWindowerAdd(b *testing.B) {
	w, err := New[int](DefaultConfig(), nil)
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = fmt.Sprintf("engine-%03d", i)
	}
	b.ReportAllocs()
	i := 0
	cpu0 := cpuTime()
	for b.Loop() {
		w.Add(Position{Partition: int32(i & 15), Offset: int64(i >> 4)}, int64(time.Hour)+int64(i)*10_000, keys[i%100], func(n *int) { *n++ })
		if i&4095 == 4095 {
			w.Drain(func(Entry[int]) {})
		}
		i++
	}
	reportRates(b, cpu0, "events")
}

// reportRates reports items per wall second and per CPU second of this
// process (GC included) since cpu0.
func reportRates(b *testing.B, cpu0 time.Duration, unit string) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit+"/s")
	if d := cpuTime() - cpu0; cpu0 > 0 && d > 0 {
		b.ReportMetric(float64(b.N)/d.Seconds(), unit+"/cpu-s")
	}
}

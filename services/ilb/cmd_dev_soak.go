package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/services/traffic"
)

// soak is `ilb dev --duration`: it runs the fleet unattended for a while,
// samples what a leak or a stuck weight path would show, and reports it
// at the end.
type soak struct {
	duration time.Duration
	every    time.Duration // heap and goroutine samples; ages are sampled every second
	d        *devFleet
	adm      *kadm.Client // reads the embedded broker's log size
	// profilePrefix, when set, names the heap profiles written at the end
	// of the warm-up and at the end.
	profilePrefix string

	mu      sync.Mutex
	start   time.Time
	ages    []float64 // snapshot age, seconds, per cluster per second
	load    []float64 // engine load over capacity in the optimizer's last solve, per engine per second
	slots   []float64 // engine batch slots busy in the aggregator's latest window, per engine per second
	samples []soakSample
}

// soakSample is the process's live heap and goroutines at one time, and
// the bytes the embedded Kafka broker holds (it keeps its log in memory
// and, like a broker with no retention, keeps every record: part of the
// heap that grows by design).
type soakSample struct {
	at         time.Duration // since the soak started
	heapBytes  uint64        // live heap after a GC
	goroutines int
	kafkaBytes int64 // -1: not known
}

// soakSampleEvery is the period of the heap and goroutine samples: a
// forced GC each time costs little at this pace.
const soakSampleEvery = 10 * time.Second

func newSoak(d *devFleet, duration time.Duration) *soak {
	return &soak{duration: duration, every: soakSampleEvery, d: d}
}

// run samples until the duration has passed (it returns nil, which stops
// the fleet) or ctx ends.
func (s *soak) run(ctx context.Context) error {
	opts, err := s.d.kafkaConfig("ilb-dev-soak").Opts()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("soak: kafka client: %w", err)
	}
	defer cl.Close()
	s.adm = kadm.NewClient(cl)
	s.mu.Lock()
	s.start = time.Now()
	s.mu.Unlock()
	s.sample()
	end := time.NewTimer(s.duration)
	defer end.Stop()
	warm := time.NewTimer(s.slopeFrom())
	defer warm.Stop()
	sec := time.NewTicker(time.Second)
	defer sec.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-warm.C:
			s.heapProfile("warm")
		case <-end.C:
			s.sample()
			s.heapProfile("end")
			return nil
		case now := <-sec.C:
			s.sampleAges(ctx)
			if now.Sub(last) >= s.every {
				s.sample()
				last = now
			}
		}
	}
}

// slopeFrom is when the warm-up ends: the first 5 minutes, or the first
// sixth of a shorter soak.
func (s *soak) slopeFrom() time.Duration { return min(5*time.Minute, s.duration/6) }

// heapProfile writes a heap profile to PREFIX-which.pb.gz when asked
// (--heap-profile): `go tool pprof -top -base PREFIX-warm.pb.gz
// PREFIX-end.pb.gz` then says what grew after the warm-up.
func (s *soak) heapProfile(which string) {
	if s.profilePrefix == "" {
		return
	}
	runtime.GC()
	path := s.profilePrefix + "-" + which + ".pb.gz"
	f, err := os.Create(path)
	if err == nil {
		err = errors.Join(pprof.Lookup("heap").WriteTo(f, 0), f.Close())
	}
	if err != nil {
		s.d.log.Warn("soak: heap profile", "path", path, "err", err)
	}
}

func (s *soak) sample() {
	smp := soakSample{kafkaBytes: -1}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if dirs, err := s.adm.DescribeAllLogDirs(ctx, nil); err == nil {
		smp.kafkaBytes = 0
		for _, ds := range dirs {
			smp.kafkaBytes += ds.Size()
		}
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	smp.heapBytes, smp.goroutines = ms.HeapAlloc, runtime.NumGoroutine()
	s.mu.Lock()
	defer s.mu.Unlock()
	smp.at = time.Since(s.start)
	s.samples = append(s.samples, smp)
}

// sampleAges records every cluster's snapshot age at the data plane, and
// how busy the engines are: load over capacity as the optimizer's last
// solve saw it, and batch slots in use in the aggregator's latest window.
func (s *soak) sampleAges(ctx context.Context) {
	rs, err := dataplaneRouting{s.d.dp}.Routing(ctx)
	if err != nil {
		return
	}
	es, _ := aggregatorEngines{s.d.agg}.Engines(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rs {
		if r.Ready {
			s.ages = append(s.ages, r.AgeSeconds)
		}
	}
	for _, e := range es {
		s.slots = append(s.slots, e.Utilization)
	}
	for _, e := range s.d.opt.State().Engines {
		if e.CapacityRPS > 0 {
			s.load = append(s.load, e.Utilization)
		}
	}
}

// soakReport is what a soak found.
type soakReport struct {
	Duration               time.Duration
	Traffic                traffic.ClusterStats
	AgeP50, AgeP99, AgeMax float64
	MeanLoad, MeanSlots    float64
	First, Last            soakSample
	SlopeFrom              time.Duration // the slopes are fitted on samples from here on
	HeapSlope              float64       // bytes per minute
	GoroutineSlope         float64       // goroutines per minute
	KafkaSlope             float64       // bytes per minute the broker's log grew
	HeapAt                 []soakSample  // samples at sixths of the duration
}

// report summarises the soak; the slopes leave out the warm-up (the first
// 5 minutes, or the first sixth of a shorter soak).
func (s *soak) report() soakReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := soakReport{Duration: s.duration, Traffic: s.d.gen.Stats().Total}
	ages := slices.Clone(s.ages)
	slices.Sort(ages)
	r.AgeP50, r.AgeP99 = quantile(ages, 0.5), quantile(ages, 0.99)
	if len(ages) > 0 {
		r.AgeMax = ages[len(ages)-1]
	}
	r.MeanLoad, r.MeanSlots = mean(s.load), mean(s.slots)
	if len(s.samples) == 0 {
		return r
	}
	r.First, r.Last = s.samples[0], s.samples[len(s.samples)-1]
	r.SlopeFrom = s.slopeFrom()
	var ts, heap, gr, kb, kts []float64
	for _, smp := range s.samples {
		if smp.at >= r.SlopeFrom {
			ts = append(ts, smp.at.Minutes())
			heap = append(heap, float64(smp.heapBytes))
			gr = append(gr, float64(smp.goroutines))
			if smp.kafkaBytes >= 0 {
				kts, kb = append(kts, smp.at.Minutes()), append(kb, float64(smp.kafkaBytes))
			}
		}
	}
	r.HeapSlope, r.GoroutineSlope, r.KafkaSlope = slope(ts, heap), slope(ts, gr), slope(kts, kb)
	for i := 1; i <= 6; i++ {
		at := s.duration * time.Duration(i) / 6
		j := sort.Search(len(s.samples), func(k int) bool { return s.samples[k].at >= at-s.every/2 })
		if j < len(s.samples) {
			r.HeapAt = append(r.HeapAt, s.samples[j])
		}
	}
	return r
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// slope is the least-squares slope of y over x; 0 with fewer than two
// points.
func slope(x, y []float64) float64 {
	if len(x) < 2 {
		return 0
	}
	mx, my := mean(x), mean(y)
	var num, den float64
	for i := range x {
		num += (x[i] - mx) * (y[i] - my)
		den += (x[i] - mx) * (x[i] - mx)
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// write prints the report, one fact a line.
func (r soakReport) write(w io.Writer) {
	t := r.Traffic
	const mib = 1 << 20
	fmt.Fprintf(w, "ilb dev: soak of %v done\n", r.Duration)
	fmt.Fprintf(w, "  requests     %d sent, %d ok, %d shed (%.2f%%), %d failed picks, %d not sent (bounds)\n",
		t.Sent, t.OK, t.Shed, pct(t.Shed, t.Sent), t.Errors, t.Dropped)
	fmt.Fprintf(w, "  engines      mean load %.0f%% of capacity (optimizer), %.0f%% of batch slots busy (aggregator)\n",
		100*r.MeanLoad, 100*r.MeanSlots)
	fmt.Fprintf(w, "  snapshot age p50 %.1f s, p99 %.1f s, max %.1f s (data plane, every cluster, every second)\n",
		r.AgeP50, r.AgeP99, r.AgeMax)
	fmt.Fprintf(w, "  heap         start %.1f MiB, end %.1f MiB; slope from %v: %+.3f MiB/min\n",
		float64(r.First.heapBytes)/mib, float64(r.Last.heapBytes)/mib, r.SlopeFrom, r.HeapSlope/mib)
	fmt.Fprintf(w, "  kafka log    start %.1f MiB, end %.1f MiB; slope %+.3f MiB/min (the embedded broker keeps every record in memory); heap slope net of it %+.3f MiB/min\n",
		float64(max(r.First.kafkaBytes, 0))/mib, float64(max(r.Last.kafkaBytes, 0))/mib, r.KafkaSlope/mib, (r.HeapSlope-r.KafkaSlope)/mib)
	fmt.Fprintf(w, "  goroutines   start %d, end %d; slope from %v: %+.2f/min\n",
		r.First.goroutines, r.Last.goroutines, r.SlopeFrom, r.GoroutineSlope)
	var parts []string
	for _, smp := range r.HeapAt {
		parts = append(parts, fmt.Sprintf("%v %.1f MiB/%d", smp.at.Round(time.Second), float64(smp.heapBytes)/mib, smp.goroutines))
	}
	fmt.Fprintf(w, "  over time    heap/goroutines at %s\n", strings.Join(parts, ", "))
}

func pct(n, of int64) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

package window_test

import (
	"fmt"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/window"
)

// Count events per key in 10-second windows that accept events up to 2 s
// out of order; an event for a window already emitted is counted as late.
func Example() {
	cfg := window.DefaultConfig()
	cfg.OutOfOrder, cfg.AllowedLateness = 2*time.Second, 0
	w, err := window.New[int](cfg, nil)
	if err != nil {
		panic(err)
	}
	emit := func(e window.Entry[int]) {
		fmt.Printf("[%ds,%ds) %s: %d events, %d late\n", e.Window.StartNs/1e9, e.Window.EndNs/1e9, e.Key, *e.Acc, e.Late)
	}
	count := func(n *int) { *n++ }
	for i, ev := range []struct {
		sec float64
		key string
	}{{1, "a"}, {4, "b"}, {11, "a"}, {9, "a"}, {12.5, "b"}, {3, "a"}, {23, "a"}} {
		pos := window.Position{Partition: 0, Offset: int64(i)}
		out := w.Add(pos, int64(ev.sec*1e9), ev.key, count)
		if out != window.Applied {
			fmt.Printf("event at %vs: %v\n", ev.sec, out)
		}
		w.Drain(emit)
	}
	fmt.Println("commit:", w.Commits(nil))
	w.Flush(emit)
	// Output:
	// [0s,10s) a: 2 events, 0 late
	// [0s,10s) b: 1 events, 0 late
	// event at 3s: late
	// [10s,20s) a: 1 events, 1 late
	// [10s,20s) b: 1 events, 0 late
	// commit: [{0 6}]
	// [20s,30s) a: 1 events, 0 late
}

// Features turns signal events into feature rows: one per engine and one
// per (cluster, engine) pair, per window.
func ExampleFeatures() {
	cfg := window.DefaultFeaturesConfig()
	cfg.MaxBatchPerReplica = map[string]int{"h100-a": 64}
	f, err := window.NewFeatures(cfg)
	if err != nil {
		panic(err)
	}
	at := func(sec int) int64 { return int64(sec) * 1e9 }
	events := []schemas.Event{
		{Kind: schemas.KindStatus, Status: schemas.EngineStatus{Engine: "h100-a", TimeUnixNano: at(1),
			Health: schemas.HealthHealthy, ReadyReplicas: 1, TotalReplicas: 1, Running: 32, Waiting: 4, KVCacheUtilization: 0.5}},
		{Kind: schemas.KindCompletion, Completion: schemas.Completion{Engine: "h100-a", Cluster: "fe-east", TimeUnixNano: at(2),
			PromptTokens: 1000, CachedPromptTokens: 600, OutputTokens: 100, TTFTMs: 180, TBOTMs: 30}},
		{Kind: schemas.KindCompletion, Completion: schemas.Completion{Engine: "h100-a", Cluster: "fe-eu", TimeUnixNano: at(3),
			PromptTokens: 1000, OutputTokens: 100, TTFTMs: 420, TBOTMs: 31}},
	}
	for i := range events {
		f.Add(window.Untracked, &events[i])
	}
	for _, r := range f.Flush(nil) {
		fmt.Printf("%-6s %-7s requests=%d rps=%.1f ttft_p50=%.0fms cache=%.2f util=%.2f\n",
			r.Engine, r.Cluster, r.Requests, r.ArrivalRPS, r.TTFTP50Ms, r.CacheHitRatio, r.Utilization)
	}
	// Output:
	// h100-a         requests=2 rps=0.2 ttft_p50=180ms cache=0.30 util=0.50
	// h100-a fe-east requests=1 rps=0.1 ttft_p50=180ms cache=0.60 util=0.00
	// h100-a fe-eu   requests=1 rps=0.1 ttft_p50=420ms cache=0.00 util=0.00
}

func ExampleSketch() {
	var s window.Sketch
	for v := 1; v <= 1000; v++ {
		s.Add(float64(v))
	}
	fmt.Printf("p50=%.0f p90=%.0f p99=%.0f (exact 500, 900, 990; within 1%%)\n",
		s.Quantile(0.5), s.Quantile(0.9), s.Quantile(0.99))
	// Output:
	// p50=498 p90=907 p99=983 (exact 500, 900, 990; within 1%)
}

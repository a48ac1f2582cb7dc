package enginesim

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ilb-router/ilb/solver/engine"
)

// BenchmarkChatCompletion measures chat completions over in-process HTTP
// (loopback TCP) with the engine model running 1,000 times faster than
// real time: a 16-token completion takes ~0.5 s of engine time, 0.5 ms of
// wall time. 16 parallel clients share one engine, so requests batch.
// The rate is bounded by the wall-clock wake-ups, not by CPU: the owner
// sleeps until each model event and Go's timers wake about 1 ms late when
// the process is otherwise idle (harmless at TimeScale 1, where events
// are tens of milliseconds apart). BenchmarkCoreRequest gives the CPU
// cost of the model side alone.
func BenchmarkChatCompletion(b *testing.B) {
	for _, tc := range []struct {
		name   string
		stream bool
	}{{"json", false}, {"stream", true}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := testConfig(b)
			cfg.TimeScale = maxTimeScale
			cfg.StatusInterval = time.Hour
			cfg.ChunkInterval = time.Millisecond
			s, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- s.Run(ctx) }()
			<-s.Ready()
			tr := &http.Transport{MaxIdleConnsPerHost: 64}
			client := &http.Client{Transport: tr}
			body, _ := json.Marshal(chat(16, tc.stream, "system", strings.Repeat("You are a benchmark. ", 20), "user", "Go."))
			url := "http://" + s.Addr() + chatPath("h100-a")
			b.ReportAllocs()
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Post(url, "application/json", bytes.NewReader(body))
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
			b.StopTimer()
			st := s.Stats()
			b.ReportMetric(float64(st.Served)/b.Elapsed().Seconds(), "completions/s")
			cancel()
			<-done
			tr.CloseIdleConnections()
		})
	}
}

// BenchmarkCoreRequest is the owner's model-side cost per request: submit,
// the first-token tracking and the completion, in virtual time, at a
// load that keeps about 25 requests in the batch.
func BenchmarkCoreRequest(b *testing.B) {
	p, _ := engine.DefaultParams("h100")
	p.BlockTokens = 16
	served := 0
	c, err := newCore(p, func(uint64, int64) {}, func(*engine.Done) { served++ })
	if err != nil {
		b.Fatal(err)
	}
	blocks := make([]uint64, 13)
	b.ReportAllocs()
	v := int64(0)
	for i := 0; b.Loop(); i++ {
		v += 20e6 // 50 requests/s, 600 ms each
		for j := range blocks {
			blocks[j] = uint64(i%50)<<32 | uint64(j)
		}
		if err := c.submit(v, engine.Request{Tag: uint64(i), PromptTokens: 220, OutputTokens: 16, Blocks: blocks}); err != nil {
			b.Fatal(err)
		}
		c.advanceTo(v)
	}
	b.ReportMetric(float64(served)/float64(b.N), "served/op")
}

package aggregator

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// benchRecords encodes n signal records over engines (keyed to 3
// partitions) and clusters: nine completions to one status, lognormal
// latencies. It returns them with the byte offset of each one's event
// time, which the benchmark rewrites in place (sfixed64, little endian).
func benchRecords(b *testing.B, n, engines, clusters int) ([]kgo.Record, []int) {
	r := rand.New(rand.NewPCG(42, 42))
	const marker = int64(0x0123456789abcdef)
	var mb [8]byte
	binary.LittleEndian.PutUint64(mb[:], uint64(marker))
	recs := make([]kgo.Record, n)
	offs := make([]int, n)
	for i := range recs {
		e := r.IntN(engines)
		name := fmt.Sprintf("engine-%03d", e)
		ev := status(name, marker, uint32(r.IntN(64)))
		if i%10 != 9 {
			ev = completion(name, fmt.Sprintf("fe-%02d", r.IntN(clusters)), marker,
				math.Exp(math.Log(300)+r.NormFloat64()), math.Exp(math.Log(30)+0.3*r.NormFloat64()))
		}
		recs[i] = *signal(b, int32(e%3), ev)
		offs[i] = bytes.Index(recs[i].Value, mb[:])
		if offs[i] < 0 {
			b.Fatal("event time not found in the encoding")
		}
	}
	return recs, offs
}

// BenchmarkAggregate measures the aggregator's per-record work on one
// goroutine: schema header check, protobuf decode and validation, and the
// window update (Features.Add), with the windows drained (Arrow-encoded)
// and commit points worked out every 4096 records. 100 engines x 8
// clusters over 3 partitions, 100k events per second of event time, up to
// 0.5 s out of order, 10 s tumbling windows.
func BenchmarkAggregate(b *testing.B) {
	cfg := DefaultConfig()
	c := newCore(cfg, nil, newCounters())
	recs, toff := benchRecords(b, 1<<16, 100, 8)
	r := rand.New(rand.NewPCG(1, 2))
	jitter := make([]int64, len(recs))
	for i := range jitter {
		jitter[i] = -r.Int64N(int64(500 * time.Millisecond))
	}
	var next [3]int64
	now := time.Unix(0, base)
	var bc batchCounts
	b.ReportAllocs()
	i := 0
	cpu0 := cpuTime()
	for b.Loop() {
		k := i & (len(recs) - 1)
		rec := &recs[k]
		binary.LittleEndian.PutUint64(rec.Value[toff[k]:], uint64(base+int64(i)*10_000+jitter[k]))
		rec.Offset = next[rec.Partition]
		next[rec.Partition]++
		c.add(rec, now, &bc)
		if i&4095 == 4095 {
			if _, err := c.drain(now); err != nil {
				b.Fatal(err)
			}
			clear(c.outbox)
			c.outbox = c.outbox[:0]
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	if d := cpuTime() - cpu0; cpu0 > 0 && d > 0 {
		b.ReportMetric(float64(b.N)/d.Seconds(), "events/cpu-s")
	}
	if bc.completion+bc.status != uint64(b.N) {
		b.Fatalf("%d of %d events accepted (%+v)", bc.completion+bc.status, b.N, bc)
	}
}

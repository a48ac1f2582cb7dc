package schemas

import (
	"strconv"
	"testing"
)

func reportRate(b *testing.B, n int) {
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
}

func BenchmarkDecodeEvent(b *testing.B) {
	st, _ := AppendEvent(nil, ptr(sampleStatus()))
	b.Run("status", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(st)))
		var ev Event
		n := 0
		for b.Loop() {
			if err := DecodeEvent(st, &ev); err != nil {
				b.Fatal(err)
			}
			n++
		}
		reportRate(b, n)
	})
	// Many engines interleaved, as on a real partition; a Decoder interns.
	statuses := make([][]byte, 64)
	for i := range statuses {
		ev := sampleStatus()
		ev.Status.Engine = "engine-" + strconv.Itoa(i)
		statuses[i], _ = AppendEvent(nil, &ev)
	}
	b.Run("status-64-engines-decoder", func(b *testing.B) {
		benchDecodeMany(b, statuses, NewDecoder(1024))
	})
	// Completions with a fresh conversation id each: one allocation for
	// the id is expected.
	comps := make([][]byte, 1024)
	for i := range comps {
		ev := sampleCompletion()
		ev.Completion.Engine = "engine-" + strconv.Itoa(i%64)
		ev.Completion.ConversationID = "conv-" + strconv.Itoa(i)
		comps[i], _ = AppendEvent(nil, &ev)
	}
	b.Run("completion", func(b *testing.B) {
		benchDecodeMany(b, comps, NewDecoder(1024))
	})
}

func benchDecodeMany(b *testing.B, msgs [][]byte, dec *Decoder) {
	b.ReportAllocs()
	b.SetBytes(int64(len(msgs[0])))
	var ev Event
	n := 0
	for b.Loop() {
		if err := dec.Decode(msgs[n%len(msgs)], &ev); err != nil {
			b.Fatal(err)
		}
		n++
	}
	reportRate(b, n)
}

func BenchmarkEncodeEvent(b *testing.B) {
	for name, ev := range map[string]Event{"status": sampleStatus(), "completion": sampleCompletion()} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 256)
			n := 0
			for b.Loop() {
				var err error
				if buf, err = AppendEvent(buf[:0], &ev); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.SetBytes(int64(len(buf)))
			reportRate(b, n)
		})
	}
}

package dataplane

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/affinity"
)

// fuzzEngines are the engines an overflow fuzz run names: the first five
// may be in a snapshot's table or given a queue limit outside it, the
// last is never in a snapshot (its statuses must change nothing).
var fuzzEngines = [...]string{"eng-a", "eng-b", "eng-c", "eng-d", "eng-e", "eng-x"}

// FuzzOverflowPicks drives one cluster's data plane through any sequence
// of snapshots (table engines, and engines outside the table with queue
// limits: routing.Overflow's candidates), engine statuses, picks of
// repeating conversations (so overflowed conversations come back),
// finishes with any outcome, owner ticks (outlier detection reads the
// routed counts by slot: an overflow slot past the table's counts once
// panicked there) and clock steps, and checks that nothing panics, that
// every pick names an engine the snapshot in force lets the cluster use
// (in its table, or given a queue limit), and that /v1/routing answers
// with JSON throughout.
func FuzzOverflowPicks(f *testing.F) {
	f.Add([]byte{0, 0x03, 0x0c, 9, 1, 0, 5, 1, 1, 2, 3, 0, 4, 2, 3, 1, 3, 0, 200, 4, 5, 20, 6})
	f.Add([]byte{0, 0x01, 0x1e, 1, 1, 0, 40, 2, 1, 1, 0, 2, 7, 1, 2, 7, 0, 4, 3, 1, 255, 4, 6, 2, 7, 1})
	f.Add([]byte{1, 2, 3, 0, 2, 9, 0, 0x1f, 0x1f, 200, 2, 4, 1, 2, 4, 1, 3, 2, 1, 4, 5, 255, 4, 2, 4, 0})
	f.Add([]byte{0, 0x10, 0x0f, 3, 1, 4, 9, 3, 1, 4, 0, 0, 2, 1, 0, 2, 2, 0, 2, 3, 0, 3, 0, 0, 4, 3, 1, 9, 4})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 4096 {
			return
		}
		clk := newClock(t0)
		d := newDP(t, testConfig("fe-a"), Deps{Now: clk.Now})
		var (
			version uint64
			allowed map[string]bool // the snapshot in force: who may be picked
			held    []*ExternalPick
		)
		next := func() byte {
			if len(ops) == 0 {
				return 0
			}
			b := ops[0]
			ops = ops[1:]
			return b
		}
		for len(ops) > 0 {
			switch next() % 7 {
			case 0: // a snapshot: table weights, queue limits, a shed fraction
				inTable, limited, scale := next(), next(), next()
				version++
				s := snap("fe-a", version, map[string]float64{})
				s.QueueLimits = map[string]float64{}
				for i, name := range fuzzEngines[:5] {
					if inTable&(1<<i) != 0 {
						s.Weights[name] = float64(i + 1)
					}
					if limited&(1<<i) != 0 {
						s.QueueLimits[name] = float64(scale%16) / 2 // 0 too: no limit
					}
				}
				s.ShedFraction = float64(scale>>4) / 32
				if d.SetSnapshot(s) == nil {
					allowed = map[string]bool{}
					for name := range s.Weights {
						allowed[name] = true
					}
					for name, l := range s.QueueLimits {
						if l > 0 {
							allowed[name] = true
						}
					}
				}
			case 1: // a status: waiting and running, health, replicas
				e, waiting, health := next(), next(), next()
				d.ObserveStatus(schemas.EngineStatus{Engine: fuzzEngines[int(e)%len(fuzzEngines)],
					TimeUnixNano: clk.Now().UnixNano(), Health: schemas.Health(health % 4),
					ReadyReplicas: uint32(health>>2) % 3, TotalReplicas: 2,
					Waiting: uint32(waiting % 32), Running: uint32(waiting >> 5)})
			case 2: // a pick of one of a few conversations
				key, first := next(), next()
				pk, rerr := d.PickExternal(ExternalRequest{Key: affinity.Key{Hash: uint64(key%8) * 0x9e3779b97f4a7c15,
					Source: affinity.Header, First: first&1 == 1}, PromptTokens: int(first) * 64, Fallbacks: int(first>>1) % 3})
				if rerr != nil {
					continue
				}
				for _, name := range pk.Engines {
					if !allowed[name] {
						t.Fatalf("picked %s (of %v), which snapshot v%d gives neither weight nor a queue limit", name, pk.Engines, version)
					}
				}
				held = append(held, pk)
			case 3: // a held request ends
				i, outcome := next(), next()
				if len(held) == 0 {
					continue
				}
				k := int(i) % len(held)
				pk := held[k]
				held = append(held[:k], held[k+1:]...)
				status := [...]int{0, http.StatusOK, http.StatusOK, http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusServiceUnavailable}[outcome%6]
				d.FinishExternal(pk, "", status, time.Duration(outcome)*10*time.Millisecond)
			case 4: // the owner's sweep: outlier detection, windows
				d.tick()
			case 5: // time passes
				clk.Advance(time.Duration(next()) * 100 * time.Millisecond)
			case 6:
				rec := httptest.NewRecorder()
				d.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/routing?cluster=fe-a", nil))
				var info routingInfo
				if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &info) != nil {
					t.Fatalf("/v1/routing: %d %q", rec.Code, rec.Body.String())
				}
			}
		}
		for _, pk := range held {
			d.FinishExternal(pk, "", http.StatusOK, time.Millisecond)
		}
		d.tick()
	})
}

package dataplane

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/ilb-router/ilb/schemas"
)

// TestLocalAdmission: with the snapshot's queue limits and fresh engine
// statuses, a new conversation goes to an engine that can start it within
// the SLO, is refused (429, counted) when none can, while an ongoing one
// is admitted up to twice the limit; a stale status admits everything.
func TestLocalAdmission(t *testing.T) {
	clk := newClock(t0)
	cfg := testConfig("fe-a")
	d := newDP(t, cfg, Deps{Now: clk.Now})
	s := snap("fe-a", 1, map[string]float64{"eng-a": 0.5, "eng-b": 0.5})
	s.QueueLimits = map[string]float64{"eng-a": 4, "eng-b": 4}
	mustSet(t, d, s)
	status := func(engine string, waiting, at int) {
		d.ObserveStatus(schemas.EngineStatus{Engine: engine, TimeUnixNano: int64(at), Health: schemas.HealthHealthy,
			ReadyReplicas: 1, TotalReplicas: 1, Waiting: uint32(waiting)})
	}
	// An ongoing conversation on eng-a, started before any queue.
	ongoing := ""
	for i := 0; ongoing == ""; i++ {
		if k := "old-" + strconv.Itoa(i); pickName(t, d, "fe-a", k) == "eng-a" {
			ongoing = k
		}
	}
	status("eng-a", 5, 1) // over its limit of 4
	status("eng-b", 3, 1)
	for i := range 200 {
		if got := pickName(t, d, "fe-a", "new-"+strconv.Itoa(i)); got != "eng-b" {
			t.Fatalf("new conversation %d went to %s, over its queue limit", i, got)
		}
	}
	if got := pickName(t, d, "fe-a", ongoing); got != "eng-a" {
		t.Fatalf("ongoing conversation moved to %s (queue 5 < 2 x limit; eng-b not under half its load)", got)
	}
	status("eng-b", 4, 2) // both at or over the limit
	c, _ := d.cluster("fe-a")
	for i := range 50 {
		if _, err := tryPick(d, "fe-a", "late-"+strconv.Itoa(i)); !errors.Is(err, ErrAdmission) {
			t.Fatalf("new conversation %d: %v, want ErrAdmission", i, err)
		}
	}
	if got := c.refused.Load(); got != 50 {
		t.Errorf("refused %d, want 50", got)
	}
	if got := pickName(t, d, "fe-a", ongoing); got != "eng-a" {
		t.Fatalf("ongoing conversation refused or moved (%s) at queue 5 of 2 x 4", got)
	}
	rec := postJSON(d.Handler(), "/v1/pick", `{"cluster":"fe-a","conversation_id":"late-x"}`)
	var env struct {
		Error struct{ Message, Type, Code string } `json:"error"`
	}
	if rec.Code != 429 || rec.Header().Get("Retry-After") == "" || json.Unmarshal(rec.Body.Bytes(), &env) != nil ||
		env.Error.Code != codeShed || env.Error.Message == "" {
		t.Fatalf("/v1/pick refused by admission: %d %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if info := decodeJSON[routingInfo](t, getPath(d.Handler(), "/v1/routing?cluster=fe-a")); info.RefusedTotal != 51 || info.ShedTotal != 0 {
		t.Errorf("/v1/routing refused_total %d, shed_total %d; want 51 and 0", info.RefusedTotal, info.ShedTotal)
	}
	status("eng-a", 8, 3) // 2 x the limit: even the ongoing one goes elsewhere or is refused
	if got, err := tryPick(d, "fe-a", ongoing); err == nil && got == "eng-a" {
		t.Fatalf("ongoing conversation admitted at queue 8 = 2 x limit")
	}
	// An ongoing conversation leaves for a candidate under half its
	// engine's load (routing.Move) and stays there.
	status("eng-a", 0, 4)
	status("eng-b", 0, 4)
	onA := ""
	for i := 0; onA == ""; i++ {
		if k := "conv-" + strconv.Itoa(i); pickName(t, d, "fe-a", k) == "eng-a" {
			onA = k
		}
	}
	status("eng-a", 6, 5)
	status("eng-b", 0, 5)
	moved := ""
	if pickName(t, d, "fe-a", onA) == "eng-b" {
		moved = onA
	}
	if moved == "" {
		t.Fatal("no ongoing conversation left a loaded engine for one under half its load")
	}
	// Statuses older than the TTL: the queues are unknown, so local
	// admission admits everything again.
	clk.Advance(cfg.StatusTTL + cfg.TickInterval)
	d.tick()
	for i := range 50 {
		if _, err := tryPick(d, "fe-a", "after-"+strconv.Itoa(i)); err != nil {
			t.Fatalf("pick with stale statuses: %v", err)
		}
	}
}

// A request sent since the last status and ended since leaves what the
// engine holds for routing.Move (a conversation's next turn does not
// leave its cache to get away from its own finished turn), the queue
// local admission reads and the load the candidates are compared on; a
// status resets them, and an attempt that ends after a newer status is
// not taken off that status's count.
func TestLiveHeld(t *testing.T) {
	var e engine
	l := &e.live
	l.observeStatusLocked(&schemas.EngineStatus{Waiting: 0, Running: 0})
	var p prefill
	p.start(&cluster{}, &e, 400)
	l.sent.Add(1) // send
	l.own.Add(1)
	if got := l.held(); got != 1 {
		t.Fatalf("held while in flight = %v, want 1", got)
	}
	if got, _ := l.busy(); got != 1 {
		t.Fatalf("busy while in flight = %v, want 1", got)
	}
	p.end()
	p.end() // a second end does nothing
	l.own.Add(-1)
	q, _ := l.queue()
	b, _ := l.busy()
	if l.held() != 0 || q != 0 || b != 0 || l.pending.Load() != 0 {
		t.Fatalf("after its end: held %v, queue %v, busy %v, pending %d; want all 0",
			l.held(), q, b, l.pending.Load())
	}
	p.start(&cluster{}, &e, 400)
	l.sent.Add(1)
	l.own.Add(1)
	l.observeStatusLocked(&schemas.EngineStatus{Running: 1}) // the status counts it running
	p.end()
	if got := l.held(); got != 1 {
		t.Fatalf("ended after a newer status: held %v, want the status's 1", got)
	}
}

// TestLiveBusy: the load's request count (live.busy, routing.Busy) is
// the other data planes' requests by the last status plus this process's
// own as they are now. Its own requests that end leave it at once (they
// stayed until the next status when every request sent since counted on
// top of the status), its own that the status counted are not counted
// twice, and the others' stay as the status said until the next one.
func TestLiveBusy(t *testing.T) {
	var e engine
	l := &e.live
	if _, ok := l.busy(); ok {
		t.Fatal("busy known before any status")
	}
	l.own.Add(2) // two of its own in flight
	l.observeStatusLocked(&schemas.EngineStatus{Waiting: 1, Running: 4})
	if got, _ := l.busy(); got != 5 {
		t.Fatalf("busy = %v, want the status's 5 (3 of others, its own 2 counted once)", got)
	}
	l.own.Add(-2) // both end
	if got, _ := l.busy(); got != 3 {
		t.Fatalf("busy after its own ended = %v, want the others' 3", got)
	}
	l.own.Add(1) // a new one
	if got, _ := l.busy(); got != 4 {
		t.Fatalf("busy after a new send = %v, want 4", got)
	}
	l.observeStatusLocked(&schemas.EngineStatus{Running: 0}) // the status has not seen it yet
	if got, _ := l.busy(); got != 1 {
		t.Fatalf("busy when a status missed its own request = %v, want 1 (never below its own)", got)
	}
}

// TestAdmissionForgetsEndedRequests: requests that ended since the
// engine's last status wait nowhere, so back-to-back requests to a
// model's one engine are admitted (they were refused with 429 until the
// next status when every request sent since counted as waiting), while
// requests still in flight count against the queue limit.
func TestAdmissionForgetsEndedRequests(t *testing.T) {
	d, es, h := proxyFixture(t, nil, "eng-a")
	s := snap("fe-a", 8, map[string]float64{"eng-a": 1})
	s.CreatedAt = d.now()
	s.QueueLimits = map[string]float64{"eng-a": 1}
	mustSet(t, d, s)
	d.ObserveStatus(schemas.EngineStatus{Engine: "eng-a", TimeUnixNano: d.now().UnixNano(), Health: schemas.HealthHealthy,
		ReadyReplicas: 1, TotalReplicas: 1})
	for i := range 5 {
		if rec := chat(t, h, "back-to-back-"+strconv.Itoa(i), nil); rec.Code != 200 {
			t.Fatalf("request %d after %d ended ones: %d %s, want 200", i, i, rec.Code, rec.Body)
		}
	}
	if got := es[0].hits.Load(); got != 5 {
		t.Fatalf("engine served %d, want 5", got)
	}
	// One sent and not ended fills the queue of 1: a new conversation is
	// refused until it ends or a status says otherwise.
	c, _ := d.cluster("fe-a")
	p := c.cur.Load()
	e := p.slots[0].eng
	e.live.sent.Add(1)
	if _, err := tryPick(d, "fe-a", "while-one-waits"); !errors.Is(err, ErrAdmission) {
		t.Fatalf("with one request in flight at a queue limit of 1: %v, want ErrAdmission", err)
	}
	e.live.end(e.live.gen.Load())
	if got := pickName(t, d, "fe-a", "after-it-ended"); got != "eng-a" {
		t.Fatalf("after it ended: %s, want eng-a", got)
	}
}

// TestAdmissionByPendingPrefill: with the snapshot's prefill limits, an
// engine whose pending prompt tokens (this process's and the other data
// planes' as shared) would not be prefilled within the SLO takes no new
// conversation: it goes to the other engine, is refused (429) when both
// are over, and an ongoing one is admitted up to twice the limit.
// Without prefill limits the same queues admit everything.
func TestAdmissionByPendingPrefill(t *testing.T) {
	clk := newClock(t0)
	d := newDP(t, testConfig("fe-a"), Deps{Now: clk.Now})
	s := snap("fe-a", 1, map[string]float64{"eng-a": 0.5, "eng-b": 0.5})
	s.QueueLimits = map[string]float64{"eng-a": 100, "eng-b": 100}
	s.PrefillLimits = map[string]float64{"eng-a": 20_000, "eng-b": 20_000}
	mustSet(t, d, s)
	for _, e := range []string{"eng-a", "eng-b"} {
		d.ObserveStatus(schemas.EngineStatus{Engine: e, TimeUnixNano: 1, Health: schemas.HealthHealthy, ReadyReplicas: 1, TotalReplicas: 1})
	}
	ongoing := ""
	for i := 0; ongoing == ""; i++ {
		if k := "old-" + strconv.Itoa(i); pickName(t, d, "fe-a", k) == "eng-a" {
			ongoing = k
		}
	}
	liveOf(d, "eng-a").pending.Store(15_000)
	liveOf(d, "eng-a").remote.Store(10_000) // 25,000 > 20,000
	for i := range 100 {
		if got := pickName(t, d, "fe-a", "new-"+strconv.Itoa(i)); got != "eng-b" {
			t.Fatalf("new conversation %d went to %s, over its prefill limit", i, got)
		}
	}
	if got := pickName(t, d, "fe-a", ongoing); got != "eng-a" {
		t.Fatalf("ongoing conversation moved to %s (25,000 pending < 2 × 20,000)", got)
	}
	liveOf(d, "eng-b").remote.Store(20_000)
	if _, err := tryPick(d, "fe-a", "late"); !errors.Is(err, ErrAdmission) {
		t.Fatalf("both engines over their prefill limits: %v, want ErrAdmission", err)
	}
	// GET /v1/routing shows the limits and the pending prompt tokens, so
	// an operator can see why a 429 came.
	info := decodeJSON[routingInfo](t, getPath(d.Handler(), "/v1/routing?cluster=fe-a"))
	for _, e := range info.Engines {
		if e.Name == "eng-a" && (e.QueueLimit != 100 || e.PrefillLimit != 20_000 || e.PendingTokens != 15_000 || e.RemoteTokens != 10_000) {
			t.Errorf("/v1/routing eng-a: %+v, want limits 100 and 20000, pending 15000 + 10000", e)
		}
	}
	s2 := snap("fe-a", 2, map[string]float64{"eng-a": 0.5, "eng-b": 0.5})
	s2.QueueLimits = s.QueueLimits
	mustSet(t, d, s2)
	if _, err := tryPick(d, "fe-a", "late"); err != nil {
		t.Fatalf("without prefill limits: %v, want admitted", err)
	}
}

// TestOverflowOutsideTheTable: a new conversation whose table engine
// carries at least half of what it can start within the SLO goes to an
// engine the cluster may use outside its table (one the snapshot gives a
// queue limit) under half that load (routing.Overflow), and its next turn
// follows it there while that engine admits it; an engine without a
// queue limit in the snapshot (not the cluster's to use) is never chosen,
// and a table engine lightly loaded, or of unknown load (no status yet),
// keeps its new conversations.
func TestOverflowOutsideTheTable(t *testing.T) {
	clk := newClock(t0)
	cfg := testConfig("fe-a")
	d := newDP(t, cfg, Deps{Now: clk.Now})
	s := snap("fe-a", 1, map[string]float64{"eng-a": 1})
	s.QueueLimits = map[string]float64{"eng-a": 4, "eng-b": 4}
	mustSet(t, d, s)
	status := func(engine string, waiting, at int) {
		d.ObserveStatus(schemas.EngineStatus{Engine: engine, TimeUnixNano: int64(at), Health: schemas.HealthHealthy,
			ReadyReplicas: 1, TotalReplicas: 1, Waiting: uint32(waiting)})
	}
	status("eng-b", 0, 0) // eng-a has no status yet: its load is unknown
	for i := range 5 {
		if got := pickName(t, d, "fe-a", "unknown-"+strconv.Itoa(i)); got != "eng-a" {
			t.Fatalf("new conversation %d went to %s while its table engine's load is unknown, want the plan's eng-a", i, got)
		}
	}
	status("eng-a", 1, 1) // a quarter of its limit: under MoveLoadMin
	status("eng-b", 0, 1)
	status("eng-c", 0, 1) // known, idle, but not the cluster's to use
	d.tick()              // the owner's sweep reads the pickers' slots too
	for i := range 20 {
		if got := pickName(t, d, "fe-a", "light-"+strconv.Itoa(i)); got != "eng-a" {
			t.Fatalf("new conversation %d went to %s while its table engine is at a quarter of its limit", i, got)
		}
	}
	info := decodeJSON[routingInfo](t, getPath(d.Handler(), "/v1/routing?cluster=fe-a"))
	var listed []string
	for _, e := range info.Engines {
		listed = append(listed, e.Name)
		if e.Name == "eng-b" && e.Share != 0 {
			t.Errorf("/v1/routing: eng-b, outside the table, has share %v", e.Share)
		}
	}
	if strings.Join(listed, ",") != "eng-a,eng-b" {
		t.Errorf("/v1/routing engines %v, want the table's eng-a, then eng-b outside it", listed)
	}

	status("eng-a", 3, 2) // three quarters: eng-b, idle, is under half that
	status("eng-b", 0, 2)
	status("eng-c", 0, 2)
	if got := pickName(t, d, "fe-a", "burst"); got != "eng-b" {
		t.Fatalf("new conversation went to %s, want eng-b outside the table (eng-a at 3/4 of its limit)", got)
	}
	if got := pickName(t, d, "fe-a", "burst"); got != "eng-b" {
		t.Fatalf("its next turn went to %s, want eng-b, where it was sent", got)
	}
	status("eng-b", 9, 3) // over twice its limit: the next turn goes back
	status("eng-a", 3, 3)
	if got := pickName(t, d, "fe-a", "burst"); got != "eng-a" {
		t.Fatalf("its next turn went to %s with eng-b over twice its limit, want its table engine eng-a", got)
	}
	status("eng-b", 3, 4) // as loaded as eng-a: not under half its load
	for i := range 20 {
		if got := pickName(t, d, "fe-a", "level-"+strconv.Itoa(i)); got != "eng-a" {
			t.Fatalf("new conversation %d went to %s, not under half the table engine's load", i, got)
		}
	}
}

// TestRoutingShowsLoad: GET /v1/routing shows, per engine, what the
// choice among candidates compares: the requests there (the other data
// planes' by the last status, this process's own now) and the load over
// the queue limit; neither while no status has come.
func TestRoutingShowsLoad(t *testing.T) {
	d := newDP(t, testConfig("fe-a"), Deps{})
	s := snap("fe-a", 1, map[string]float64{"eng-a": 0.5, "eng-b": 0.5})
	s.QueueLimits = map[string]float64{"eng-a": 10, "eng-b": 10}
	mustSet(t, d, s)
	liveOf(d, "eng-a").own.Store(2) // two of its own in flight when the status comes
	d.ObserveStatus(schemas.EngineStatus{Engine: "eng-a", TimeUnixNano: 1, Health: schemas.HealthHealthy,
		ReadyReplicas: 1, TotalReplicas: 1, Waiting: 1, Running: 3})
	liveOf(d, "eng-a").own.Store(3) // one more sent since
	info := decodeJSON[routingInfo](t, getPath(d.Handler(), "/v1/routing?cluster=fe-a"))
	seen := 0
	for _, e := range info.Engines {
		switch e.Name {
		case "eng-a":
			seen++
			if e.Requests == nil || *e.Requests != 5 || e.Load == nil || math.Abs(*e.Load-0.5) > 1e-12 {
				t.Errorf("eng-a: requests %v, load %v; want 5 (2 of others by the status, 3 of its own now) and 5/10", deref(e.Requests), deref(e.Load))
			}
		case "eng-b":
			seen++
			if e.Requests != nil || e.Load != nil {
				t.Errorf("eng-b without a status: requests %v, load %v; want neither", deref(e.Requests), deref(e.Load))
			}
		}
	}
	if seen != 2 {
		t.Fatalf("/v1/routing listed %d of the two engines: %+v", seen, info.Engines)
	}
}

func deref(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}

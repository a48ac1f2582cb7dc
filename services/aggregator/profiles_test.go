package aggregator

import (
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/regress"
	"github.com/ilb-router/ilb/streams/arrowipc"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// truth is a known profile the tests simulate and expect back.
var truth = regress.Profile{CapacityRPS: 100, TTFTBaseMs: 150, TTFTQueueMs: 40, TBOTBaseMs: 20, TBOTSlopeMs: 15}

// windowRow is the engine row of one window at load λ with the truth's
// latencies times (1 + noise).
func windowRow(engine string, k int, load, noise float64, p regress.Profile) schemas.Feature {
	w := int64(10 * time.Second)
	return schemas.Feature{
		WindowStartUnixNano: base + int64(k)*w, WindowEndUnixNano: base + int64(k+1)*w, Engine: engine,
		Requests: uint64(load * 10), ArrivalRPS: load,
		TTFTP50Ms: p.TTFTMs(load) * (1 + noise), TBOTP50Ms: p.TBOTMs(load) * (1 + noise/2),
	}
}

func near(t *testing.T, name string, got, want, relTol float64) {
	t.Helper()
	if math.Abs(got-want) > relTol*math.Abs(want) {
		t.Errorf("%s = %.4g, want %.4g ± %.0f%%", name, got, want, 100*relTol)
	}
}

func profileConfig() Config {
	cfg := DefaultConfig()
	cfg.SKUs = map[string]string{"x1": "h100", "x2": "h100", "solo": "a100"}
	cfg.Replicas = map[string]int{"x1": 1, "x2": 2, "solo": 1}
	return cfg
}

func TestProfilerRecoversKnownProfile(t *testing.T) {
	cfg := profileConfig()
	h := newHistory(cfg.HistoryWindows, cfg.MaxEngines, int64(10*time.Second))
	r := rand.New(rand.NewPCG(3, 4))
	for k := range 40 {
		load := 10 + 75*r.Float64() // 10-85% of capacity
		noise := 0.02 * r.NormFloat64()
		h.addRow(ptr(windowRow("x1", k, load, noise, truth)))
		// x2 has two replicas of the same hardware: twice the load for
		// the same latency.
		h.addRow(ptr(windowRow("x2", k, 2*load, noise, scaled(truth, 2))))
		if k < 5 {
			h.addRow(ptr(windowRow("solo", k, load, noise, truth)))
		}
	}
	pr := newProfiler(cfg)
	now := time.Unix(0, base)
	results, accepted := pr.fit(h.snapshot(math.MaxInt64), now)
	if !accepted {
		t.Fatalf("nothing accepted: %+v", results)
	}
	byKey := map[string]FitResult{}
	for _, r := range results {
		byKey[r.Engine+"/"+r.SKU] = r
	}
	check := func(name string, p regress.Profile, want regress.Profile) {
		near(t, name+" capacity", p.CapacityRPS, want.CapacityRPS, 0.08)
		near(t, name+" ttft base", p.TTFTBaseMs, want.TTFTBaseMs, 0.05)
		near(t, name+" ttft queue", p.TTFTQueueMs, want.TTFTQueueMs, 0.15)
		near(t, name+" tbot base", p.TBOTBaseMs, want.TBOTBaseMs, 0.05)
		near(t, name+" tbot slope", p.TBOTSlopeMs, want.TBOTSlopeMs, 0.15)
	}
	for key, want := range map[string]regress.Profile{"x1/h100": truth, "x2/h100": scaled(truth, 2), "/h100": truth} {
		r := byKey[key]
		if !r.Accepted || r.Samples != 40*(1+btoi(key == "/h100")) {
			t.Errorf("%s: %+v", key, r)
			continue
		}
		check(key, r.Fit, want)
	}
	solo := byKey["solo/a100"]
	if solo.Accepted || solo.Reason != "too_few_samples" || solo.Samples != 5 {
		t.Errorf("solo (5 windows): %+v, want refused for too few samples", solo)
	}
	if _, ok := byKey["/a100"]; ok {
		t.Error("a SKU with one engine was pooled")
	}
	table := pr.table()
	if len(table) != 3 || table[0].Engine != "x1" || table[1].Engine != "x2" || table[2].Engine != "" || table[2].SKU != "h100" {
		t.Fatalf("table %+v", table)
	}
	for _, p := range table {
		if err := p.Validate(); err != nil || p.FittedAtUnixNano != now.UnixNano() {
			t.Errorf("row %+v: %v", p, err)
		}
	}
}

func TestProfilerKeepsLastGoodProfile(t *testing.T) {
	cfg := profileConfig()
	pr := newProfiler(cfg)
	good := map[string][]regress.Point{"x1": nil}
	for k := range 20 {
		load := 10 + 4*float64(k)
		good["x1"] = append(good["x1"], regress.Point{LoadRPS: load, TTFTMs: truth.TTFTMs(load), TBOTMs: truth.TBOTMs(load)})
	}
	t0 := time.Unix(100, 0)
	if _, ok := pr.fit(good, t0); !ok {
		t.Fatal("good data refused")
	}
	// The load now sits in a sliver: not enough to refit.
	narrow := map[string][]regress.Point{"x1": nil}
	for k := range 20 {
		load := 50 + 0.01*float64(k)
		narrow["x1"] = append(narrow["x1"], regress.Point{LoadRPS: load, TTFTMs: truth.TTFTMs(load), TBOTMs: truth.TBOTMs(load)})
	}
	res, ok := pr.fit(narrow, t0.Add(time.Minute))
	if ok || res[0].Reason != "narrow_range" {
		t.Fatalf("narrow data: %+v", res)
	}
	table := pr.table()
	if len(table) != 1 || table[0].FittedAtUnixNano != t0.UnixNano() {
		t.Errorf("after a refused refit the table is %+v, want the first fit", table)
	}
}

func ptr[T any](v T) *T { return &v }

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// scaled is p for an engine of n replicas: n times the capacity.
func scaled(p regress.Profile, n float64) regress.Profile {
	p.CapacityRPS *= n
	return p
}

// TestProfilesPublished drives a known profile through Kafka: completions
// whose per-window count is the load and whose latencies follow the
// profile, windowed, fitted, published on ilb.profiles and served on
// /v1/profiles.
func TestProfilesPublished(t *testing.T) {
	addrs := streamstest.Kafka(t)
	want := regress.Profile{CapacityRPS: 120, TTFTBaseMs: 100, TTFTQueueMs: 40, TBOTBaseMs: 20, TBOTSlopeMs: 10}
	var recs []*kgo.Record
	for k := range 12 {
		load := 10 + 8*k // completions in the 1 s window k
		for i := range load {
			ts := float64(k) + float64(i)/float64(load)
			recs = append(recs, signal(t, 0, completion("fit", "", at(ts), want.TTFTMs(float64(load)), want.TBOTMs(float64(load)))))
		}
	}
	for k := range 3 {
		recs = append(recs, signal(t, 1, completion("few", "", at(float64(k)+0.5), 200, 20)))
	}
	recs = append(recs, signal(t, 0, status("fit", at(20), 0)), signal(t, 1, status("few", at(20), 0)))
	producer(t, addrs)(recs...)

	cfg := testConfig(addrs, "g-profiles")
	cfg.Regress.MinSamples = 8
	r := start(t, cfg, Deps{})
	waitFor(t, 20*time.Second, "windows", func() bool { return caughtUp(r.a, ends(recs)) })
	r.a.Refit()
	msgs := readTopic(t, addrs, TopicProfiles).waitN(t, 1, 20*time.Second)
	if string(msgs[0].Key) != ProfilesKey || header(msgs[0], schemas.HeaderSchema) != schemas.ProfileSchemaVersion {
		t.Errorf("profiles record key %q, headers %v", msgs[0].Key, msgs[0].Headers)
	}
	rows := profileRows(t, msgs[0])
	if len(rows) != 1 || rows[0].Engine != "fit" || rows[0].Samples != 12 {
		t.Fatalf("profiles %+v, want only engine fit from 12 windows", rows)
	}
	p := rows[0]
	near(t, "capacity", p.CapacityRPS, want.CapacityRPS, 0.05)
	near(t, "ttft base", p.TTFTBaseMs, want.TTFTBaseMs, 0.03)
	near(t, "ttft queue", p.TTFTQueueMs, want.TTFTQueueMs, 0.1)
	near(t, "tbot base", p.TBOTBaseMs, want.TBOTBaseMs, 0.03)
	near(t, "tbot slope", p.TBOTSlopeMs, want.TBOTSlopeMs, 0.1)
	if p.TTFTR2 < 0.99 {
		t.Errorf("TTFT R² %v on noiseless data", p.TTFTR2)
	}

	srv := httptest.NewServer(r.a.Handler())
	defer srv.Close()
	var view struct {
		Profiles []struct {
			Engine      string  `json:"engine"`
			CapacityRPS float64 `json:"capacity_rps"`
			TTFTR2      float64 `json:"ttft_r2"`
			Samples     uint64  `json:"samples"`
		} `json:"profiles"`
		Fits []struct {
			Engine, Reason string
			Accepted       bool
			Samples        int
		} `json:"fits"`
	}
	getJSON(t, srv.URL+"/v1/profiles", &view)
	if len(view.Profiles) != 1 || view.Profiles[0].Engine != "fit" || view.Profiles[0].Samples != 12 {
		t.Errorf("/v1/profiles profiles: %+v", view.Profiles)
	}
	if len(view.Fits) != 2 || view.Fits[0].Engine != "few" || view.Fits[0].Accepted || view.Fits[0].Reason != "too_few_samples" ||
		view.Fits[0].Samples != 3 || !view.Fits[1].Accepted {
		t.Errorf("/v1/profiles fits: %+v", view.Fits)
	}
	r.a.cnt.mu.Lock()
	n := r.a.cnt.refused["too_few_samples"]
	r.a.cnt.mu.Unlock()
	if n != 1 {
		t.Errorf("refused counter %d, want 1", n)
	}
}

// TestEventClockRefitsAtBoundaries: with the event clock, the refit at
// each multiple of ProfileInterval happens once every partition with
// events has emitted windows up to it, is stamped with it (fitted_at and
// the ilb-as-of header), and sees only the windows ending by then. A
// partition whose engines all went silent holds the refits back only
// until it has been idle for IdleTimeout.
func TestEventClockRefitsAtBoundaries(t *testing.T) {
	addrs := streamstest.Kafka(t)
	want := regress.Profile{CapacityRPS: 120, TTFTBaseMs: 100, TTFTQueueMs: 40, TBOTBaseMs: 20, TBOTSlopeMs: 10}
	var recs []*kgo.Record
	for k := range 24 { // engine fit on partition 0: 24 one-second windows
		load := 10 + 8*(k%12)
		for i := range load {
			ts := float64(k) + float64(i)/float64(load)
			recs = append(recs, signal(t, 0, completion("fit", "", at(ts), want.TTFTMs(float64(load)), want.TBOTMs(float64(load)))))
		}
	}
	// Engine quiet on partition 1 reports for 3 s, then goes silent.
	for k := range 3 {
		recs = append(recs, signal(t, 1, completion("quiet", "", at(float64(k)+0.5), 200, 20)))
	}
	producer(t, addrs)(recs...)

	clock := &testClock{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	cfg := testConfig(addrs, "g-event-fit")
	cfg.Regress.MinSamples = 8
	cfg.ProfileInterval = 12 * time.Second
	cfg.IdleTimeout = time.Minute
	r := start(t, cfg, Deps{Now: clock.Now})
	profiles := readTopic(t, addrs, TopicProfiles)
	waitFor(t, 20*time.Second, "every record", func() bool { return caughtUp(r.a, ends(recs)) })
	time.Sleep(200 * time.Millisecond) // a few polls: nothing may be fitted while partition 1 lags
	if n := r.a.cnt.profilesPublished.Load(); n != 0 {
		t.Fatalf("%d profiles records while partition 1 has emitted only its first windows", n)
	}
	// Partition 1 idle for IdleTimeout, partition 0 still receiving.
	clock.Advance(cfg.IdleTimeout)
	producer(t, addrs)(signal(t, 0, completion("fit", "", at(24.5), want.TTFTMs(10), want.TBOTMs(10))))
	msgs := profiles.waitN(t, 1, 20*time.Second)
	boundary := (at(0)/int64(cfg.ProfileInterval) + 1) * int64(cfg.ProfileInterval)
	if got := header(msgs[0], schemas.HeaderAsOf); got != strconv.FormatInt(boundary, 10) {
		t.Fatalf("first profiles record as of %s, want the first boundary %d", got, boundary)
	}
	rows := profileRows(t, msgs[0])
	// The fit saw only the windows ending by the boundary.
	wantSamples := uint64((boundary - at(0)) / int64(time.Second))
	if len(rows) != 1 || rows[0].Engine != "fit" || rows[0].FittedAtUnixNano != boundary || rows[0].Samples != wantSamples {
		t.Fatalf("profiles %+v, want engine fit fitted at %d on %d windows", rows, boundary, wantSamples)
	}
	// No features record of a window up to the boundary announces a fit
	// (which records do is TestAnnounceProfiles).
	waitFor(t, 20*time.Second, "the rest published", func() bool { return published(r.a) })
	for _, m := range readTopic(t, addrs, schemas.TopicFeatures).readToEnd(t, schemas.TopicFeatures, 20*time.Second) {
		id := header(m, HeaderWindow)
		end, _ := strconv.ParseInt(id[strings.LastIndexByte(id, '/')+1:], 10, 64)
		if got := header(m, schemas.HeaderProfilesAsOf); end <= boundary && got != "" {
			t.Errorf("window %s announces profiles as of %s, before any fit", id, got)
		}
	}
}

// TestAnnounceProfiles: once a profiles record as of T is queued, every
// features record still in the outbox for a window ending after T, and
// every one emitted later, carries ilb-profiles-as-of T (never lowered);
// records of windows up to T do not.
func TestAnnounceProfiles(t *testing.T) {
	c := newCore(testConfig([]string{"127.0.0.1:1"}, "g"), nil, newCounters())
	rows := func(end int64) []schemas.Feature {
		return []schemas.Feature{{Engine: "e", WindowStartUnixNano: end - int64(time.Second), WindowEndUnixNano: end, Healthy: true}}
	}
	for _, end := range []int64{at(10), at(20), at(30)} {
		if _, err := c.emit(0, rows(end)); err != nil {
			t.Fatal(err)
		}
	}
	c.announceProfiles(at(15))
	c.announceProfiles(at(12)) // an older one changes nothing
	if _, err := c.emit(1, rows(at(40))); err != nil {
		t.Fatal(err)
	}
	want := []string{"", strconv.FormatInt(at(15), 10), strconv.FormatInt(at(15), 10), strconv.FormatInt(at(15), 10)}
	if len(c.outbox) != len(want) {
		t.Fatalf("%d records in the outbox, want %d", len(c.outbox), len(want))
	}
	for i, rec := range c.outbox {
		if got := header(rec, schemas.HeaderProfilesAsOf); got != want[i] {
			t.Errorf("record %d (%s): ilb-profiles-as-of %q, want %q", i, header(rec, HeaderWindow), got, want[i])
		}
	}
}

// profileRows decodes the profile table of an ilb.profiles record.
func profileRows(t *testing.T, m *kgo.Record) []schemas.Profile {
	t.Helper()
	batches, _, err := arrowipc.DecodeStream(m.Value, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	defer arrowipc.Release(batches)
	rows, err := schemas.ProfilesFromRecord(batches[0])
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

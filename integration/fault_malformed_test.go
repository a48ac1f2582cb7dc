package integration

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/arrowipc"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// TestFaultMalformedFlood proves that bad input from outside is rejected
// and counted exactly, crashes nothing, and is never served (DESIGN.md,
// quality bar). With the whole weight path running (aggregator, optimizer,
// data plane on real brokers) and a client picking every 10 ms, the test
// injects, each kind counted:
//
//   - into ilb.signals: random bytes, truncated events, events of a future
//     schema version, events that fail validation, and valid events under a
//     wrong ilb-schema header. The aggregator sends every one to the DLQ
//     (ilb_aggregator_dlq_total and the DLQ topic both equal the number
//     injected); the data plane's status reader counts every value it
//     cannot decode (ilb_dataplane_signals_rejected_total) and skips it.
//   - into ilb.features: random bytes, records under a wrong schema header,
//     rows naming engines that are not in the fleet. The optimizer counts
//     each by reason (ilb_optimizer_inputs_rejected_total).
//   - into the weights bucket, behind the optimizer's back: values that
//     are not JSON, snapshots that fail validation, snapshots for another
//     cluster, older versions, the same version with other weights, tables
//     that disagree with their weights. The data plane rejects each with its
//     reason (ilb_dataplane_snapshots_rejected_total) and keeps serving the
//     last good snapshot, version and weights unchanged.
//   - at the data plane's HTTP API: bodies that are not JSON, too large,
//     missing fields, unknown clusters, wrong methods: each gets its 4xx.
//
// Afterwards a new optimizer starts over the garbage left in the bucket
// and publishes a newer version, which the data plane applies. No pick
// failed and every service is still running. Lost: nothing.
func TestFaultMalformedFlood(t *testing.T) {
	checkLeaks(t)
	fleet := parseFleet(t, smallFleet)
	brokers := streamstest.Kafka(t, allTopics...)
	natsURL := streamstest.NATS(t)
	_, log := newLogSink(t, slog.LevelError)
	am, om, dpm := newMeter(t), newMeter(t), newMeter(t)

	_, agg := startAggregator(t, fastAggregator(fleet, brokers, "agg-malformed", time.Second), am, log)
	opt := startOptimizer(t, fastOptimizer(fleet, "opt-1"), brokers, natsURL, om, log)
	dp := startDataplane(t, fastDataplane(time.Minute, "fe-a"), dataplaneDeps{natsURL: natsURL, brokers: brokers, meter: dpm, log: log, name: "dp"})
	waitUntil(t, 15*time.Second, "the first snapshot at the data plane", func() bool { return dp.ready("fe-a") })
	c := httpClient(t, 5*time.Second)
	waitUntil(t, 10*time.Second, "version 2", func() bool { return routing(t, c, dp.url, "fe-a").Version >= 2 })
	prod := producer(t, brokers)
	statusReaderLive(t, prod, c, dp.url)
	picks := startPicks(t, dp.url, "fe-a", 10*time.Millisecond, 100)

	floodSignals(t, prod, brokers, am, dpm)
	floodFeatures(t, prod, om)

	opt.crash(t) // the snapshots below must meet the data plane alone
	before := routing(t, c, dp.url, "fe-a")
	good := snapshotAt(t, natsURL, "fe-a")
	floodSnapshots(t, natsURL, good, dpm)
	after := routing(t, c, dp.url, "fe-a")
	if after.Version != before.Version || !equalWeights(after.Weights, before.Weights) {
		t.Errorf("after the bad snapshots the data plane serves v%d %v; want v%d %v unchanged", after.Version, after.Weights, before.Version, before.Weights)
	}
	floodHTTP(t, c, dp.url)

	startOptimizer(t, fastOptimizer(fleet, "opt-2"), brokers, natsURL, om, log)
	var recovered uint64
	waitUntil(t, 15*time.Second, "a new optimizer to publish over the garbage", func() bool {
		recovered = routing(t, c, dp.url, "fe-a").Version
		return recovered > before.Version
	})
	if !agg.running() || !dp.s.running() {
		t.Error("a service stopped during the flood")
	}
	picks.stop()
	pc := picks.counts()
	pc.check(t)
	t.Logf("flood: signals, features, snapshots and HTTP requests all rejected and counted; %d picks, %d failed; served v%d throughout, then v%d from a new optimizer",
		pc.Sent, pc.Failed, before.Version, recovered)
}

// producer is a plain Kafka client for injecting records.
func producer(t testing.TB, brokers []string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func produce(t testing.TB, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	if err := cl.ProduceSync(shortCtx(t, 10*time.Second), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// statusRecord is a valid status event of engine.
func statusRecord(t testing.TB, engine string, health schemas.Health, at time.Time) *kgo.Record {
	t.Helper()
	ev := schemas.Event{Kind: schemas.KindStatus, Status: schemas.EngineStatus{Engine: engine, TimeUnixNano: at.UnixNano(),
		Health: health, ReadyReplicas: 1, TotalReplicas: 1}}
	v, err := schemas.AppendEvent(nil, &ev)
	if err != nil {
		t.Fatal(err)
	}
	return &kgo.Record{Topic: schemas.TopicSignals, Key: []byte(engine), Value: v,
		Headers: []kgo.RecordHeader{{Key: schemas.HeaderSchema, Value: []byte(schemas.SchemaSignalV1)}}}
}

// statusReaderLive waits until the data plane's status reader applies a
// status from Kafka (it reads from the end, so injected records before it
// is positioned would be missed), then restores the engine.
func statusReaderLive(t *testing.T, prod *kgo.Client, c *http.Client, base string) {
	t.Helper()
	produce(t, prod, statusRecord(t, "e-2", schemas.HealthUnhealthy, time.Now()))
	waitUntil(t, 10*time.Second, "the data plane to read statuses", func() bool {
		if routing(t, c, base, "fe-a").available("e-2") {
			produce(t, prod, statusRecord(t, "e-2", schemas.HealthUnhealthy, time.Now()))
			return false
		}
		return true
	})
	produce(t, prod, statusRecord(t, "e-2", schemas.HealthHealthy, time.Now()))
	waitUntil(t, 10*time.Second, "e-2 available again", func() bool { return routing(t, c, base, "fe-a").available("e-2") })
}

// rawCompletion hand-encodes a completion event, bypassing validation.
func rawCompletion(version uint64, engine string, at time.Time, prompt, cached uint64) []byte {
	var c []byte
	c = protowire.AppendTag(c, 1, protowire.BytesType)
	c = protowire.AppendString(c, engine)
	c = protowire.AppendTag(c, 2, protowire.Fixed64Type)
	c = protowire.AppendFixed64(c, uint64(at.UnixNano()))
	c = protowire.AppendTag(c, 5, protowire.VarintType)
	c = protowire.AppendVarint(c, prompt)
	c = protowire.AppendTag(c, 6, protowire.VarintType)
	c = protowire.AppendVarint(c, cached)
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, version)
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	return protowire.AppendBytes(b, c)
}

// badSignals makes n records of each malformed kind. Every value but the
// wrong-header ones fails schemas.DecodeEvent (checked), so the data
// plane rejects those and only those.
func badSignals(t testing.TB, n int) (recs []*kgo.Record, undecodable int) {
	t.Helper()
	r := rand.New(rand.NewPCG(8, 1))
	valid := rawCompletion(1, "e-0", time.Now(), 100, 10)
	header := func(schema string) []kgo.RecordHeader {
		return []kgo.RecordHeader{{Key: schemas.HeaderSchema, Value: []byte(schema)}}
	}
	var ev schemas.Event
	add := func(v []byte, schema string, mustFail bool) {
		if err := schemas.DecodeEvent(v, &ev); (err != nil) != mustFail {
			return // a random value that happens to decode (or not): skip it
		}
		if mustFail {
			undecodable++
		}
		recs = append(recs, &kgo.Record{Topic: schemas.TopicSignals, Key: []byte("e-0"), Value: v, Headers: header(schema)})
	}
	for i := range n {
		garbage := make([]byte, r.IntN(200))
		for j := range garbage {
			garbage[j] = byte(r.UintN(256))
		}
		add(garbage, schemas.SchemaSignalV1, true)
		add(valid[:1+r.IntN(len(valid)-2)], schemas.SchemaSignalV1, true)                        // truncated
		add(rawCompletion(99, "e-0", time.Now(), 100, 10), "", true)                             // future version
		add(rawCompletion(1, "e-0", time.Now(), 10, 20+uint64(i)), schemas.SchemaSignalV1, true) // cached > prompt
		add(valid, "signal/v9", false)                                                           // wrong header
	}
	return recs, undecodable
}

func floodSignals(t *testing.T, prod *kgo.Client, brokers []string, am, dpm *meter) {
	t.Helper()
	recs, undecodable := badSignals(t, 60)
	produce(t, prod, recs...)
	n := float64(len(recs))
	waitUntil(t, 15*time.Second, fmt.Sprintf("the aggregator to dead-letter all %v bad signals", n), func() bool {
		return am.value(t, "ilb.aggregator.dlq") == n
	})
	waitUntil(t, 10*time.Second, fmt.Sprintf("the data plane to reject the %d undecodable signals", undecodable), func() bool {
		return dpm.value(t, "ilb_dataplane_signals_rejected_total") == float64(undecodable)
	})
	var inDLQ int
	waitUntil(t, 10*time.Second, "the dead letters in "+schemas.TopicSignalsDLQ, func() bool {
		inDLQ = len(readTopic(t, brokers, schemas.TopicSignalsDLQ))
		return inDLQ >= len(recs)
	})
	time.Sleep(300 * time.Millisecond) // nothing more may come
	if got := am.value(t, "ilb.aggregator.dlq"); got != n || inDLQ != len(recs) {
		t.Errorf("ilb_aggregator_dlq_total = %v and %d records in %s for %v bad signals", got, inDLQ, schemas.TopicSignalsDLQ, n)
	}
	t.Logf("signals: %d bad records, %v dead-lettered by the aggregator (decode %v, validate %v, unknown_schema %v), %d rejected by the data plane",
		len(recs), am.value(t, "ilb.aggregator.dlq"), am.value(t, "ilb.aggregator.dlq", attribute.String("reason", "decode")),
		am.value(t, "ilb.aggregator.dlq", attribute.String("reason", "validate")),
		am.value(t, "ilb.aggregator.dlq", attribute.String("reason", "unknown_schema")), undecodable)
}

func floodFeatures(t *testing.T, prod *kgo.Client, om *meter) {
	t.Helper()
	const garbage, wrongHeader = 20, 5
	hdr := func(v string) []kgo.RecordHeader {
		return []kgo.RecordHeader{{Key: schemas.HeaderSchema, Value: []byte(v)}}
	}
	var recs []*kgo.Record
	for i := range garbage {
		recs = append(recs, &kgo.Record{Topic: schemas.TopicFeatures, Value: []byte(strings.Repeat("arrow? ", i)), Headers: hdr(schemas.FeatureSchemaVersion)})
	}
	now := time.Now()
	ghosts := []schemas.Feature{}
	for i := range 3 {
		ghosts = append(ghosts, schemas.Feature{WindowStartUnixNano: now.Add(-time.Second).UnixNano(), WindowEndUnixNano: now.UnixNano(),
			Engine: fmt.Sprintf("ghost-%d", i), Requests: 5, ArrivalRPS: 5, Healthy: true})
	}
	batch := schemas.FeaturesToRecord(nil, ghosts)
	value, err := arrowipc.EncodeStream(schemas.FeatureSchema, batch)
	batch.Release()
	if err != nil {
		t.Fatal(err)
	}
	for range wrongHeader {
		recs = append(recs, &kgo.Record{Topic: schemas.TopicFeatures, Value: value, Headers: hdr("features/v9")})
	}
	recs = append(recs, &kgo.Record{Topic: schemas.TopicFeatures, Value: value, Headers: hdr(schemas.FeatureSchemaVersion)})
	produce(t, prod, recs...)
	want := map[string]float64{"decode": garbage, "unknown_schema": wrongHeader, "unknown_name": 3}
	waitUntil(t, 10*time.Second, fmt.Sprintf("the optimizer to reject %v", want), func() bool {
		for reason, n := range want {
			if om.value(t, "ilb.optimizer.inputs_rejected", attribute.String("reason", reason)) != n {
				return false
			}
		}
		return true
	})
	t.Logf("features: %d bad records, rejected by the optimizer by reason: %v", len(recs), want)
}

// floodSnapshots writes bad snapshots for fe-a into the bucket and checks
// the data plane rejects each with its reason.
func floodSnapshots(t *testing.T, natsURL string, good *schemas.Snapshot, dpm *meter) {
	t.Helper()
	if good.Table == nil || good.Version < 2 {
		t.Fatalf("want a snapshot with a table and a version above 1, got v%d table %v", good.Version, good.Table != nil)
	}
	mk := func(edit func(s *schemas.Snapshot)) []byte {
		s := *good
		s.Weights = map[string]float64{}
		for k, v := range good.Weights {
			s.Weights[k] = v
		}
		edit(&s)
		b, err := json.Marshal(&s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	skew := func(s *schemas.Snapshot) { // the same engines, other weights
		s.Weights = map[string]float64{"e-0": 0.8, "e-1": 0.1, "e-2": 0.1}
	}
	cases := map[string][][]byte{
		"malformed": {[]byte("not json"), []byte(`{"version":`), {0xff, 0x00, 0x13}},
		"invalid": {
			mk(func(s *schemas.Snapshot) { s.Version++; s.Weights["e-0"] += 0.5 }), // sums to 1.5
			mk(func(s *schemas.Snapshot) { s.Version++; s.Weights["e-1"] = -0.2 }), // negative
			mk(func(s *schemas.Snapshot) { s.Version++; s.ShedFraction = 2 }),      // shed > 1
			mk(func(s *schemas.Snapshot) { s.Version = 0 }),                        // version 0
		},
		"cluster":            {mk(func(s *schemas.Snapshot) { s.Version++; s.Cluster = "fe-zz" })},
		"old_version":        {mk(func(s *schemas.Snapshot) { s.Version-- }), mk(func(s *schemas.Snapshot) { s.Version = 1 })},
		"version_not_bumped": {mk(skew)},
		"table":              {mk(func(s *schemas.Snapshot) { s.Version++; skew(s) })},
	}
	total := 0
	for _, reason := range sortedKeys(cases) {
		for _, v := range cases[reason] {
			putRaw(t, natsURL, "fe-a", v)
			total++
		}
	}
	waitUntil(t, 10*time.Second, fmt.Sprintf("the data plane to reject all %d bad snapshots", total), func() bool {
		return rejected(t, dpm, "") == float64(total)
	})
	var got []string
	for _, reason := range sortedKeys(cases) {
		n := rejected(t, dpm, reason)
		if n != float64(len(cases[reason])) {
			t.Errorf("snapshots rejected as %s: %v, want %d", reason, n, len(cases[reason]))
		}
		got = append(got, fmt.Sprintf("%s %v", reason, n))
	}
	t.Logf("snapshots: %d bad values put into the bucket, rejected by reason: %s", total, strings.Join(got, ", "))
}

// floodHTTP sends malformed requests to the data plane's API.
func floodHTTP(t *testing.T, c *http.Client, base string) {
	t.Helper()
	huge := `{"cluster":"fe-a","conversation_id":"` + strings.Repeat("x", 2<<20) + `"}`
	cases := []struct {
		method, path, body string
		want               int
	}{
		{"POST", "/v1/pick", "not json", 400},
		{"POST", "/v1/pick", `{"cluster":"fe-a"}`, 400},
		{"POST", "/v1/pick", `{"cluster":"nowhere","conversation_id":"c"}`, 404},
		{"POST", "/v1/pick", huge, 413},
		{"GET", "/v1/pick", "", 405},
		{"POST", "/v1/chat/completions", "{", 400},
		{"POST", "/v1/chat/completions", huge, 413},
		{"GET", "/v1/routing?cluster=nowhere", "", 404},
		{"GET", "/no/such/path", "", 404},
	}
	for _, tc := range cases {
		req, err := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Errorf("%s %s: %v", tc.method, tc.path, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s (%d bytes): status %d, want %d", tc.method, tc.path, len(tc.body), resp.StatusCode, tc.want)
		}
	}
}

func equalWeights(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

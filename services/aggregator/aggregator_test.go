package aggregator

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/streamstest"
)

func features(t *testing.T, recs []*kgo.Record) []featureMsg {
	t.Helper()
	out := make([]featureMsg, len(recs))
	for i, r := range recs {
		out[i] = decodeFeatures(t, r)
	}
	return out
}

func TestFeaturesFromSignals(t *testing.T) {
	addrs := streamstest.Kafka(t)
	send := producer(t, addrs)
	var recs []*kgo.Record
	// Window [0,1s) of engine e1: 100 completions with TTFT 1..100 ms,
	// half from fe-a, half from fe-b, and 4 status events.
	for i := range 100 {
		cl := "fe-a"
		if i%2 == 1 {
			cl = "fe-b"
		}
		recs = append(recs, signal(t, 0, completion("e1", cl, at(float64(i)/100), float64(i+1), 20)))
	}
	for i := range 4 {
		recs = append(recs, signal(t, 0, status("e1", at(0.1+float64(i)/5), uint32(8*(i+1)))))
	}
	recs = append(recs, signal(t, 0, status("e1", at(2.5), 1))) // closes [0,1s) and [1s,2s)
	send(recs...)

	r := start(t, testConfig(addrs, "g-features"), Deps{})
	got := features(t, readTopic(t, addrs, schemas.TopicFeatures).waitN(t, 1, 20*time.Second))
	m := got[0]
	if m.key != "0" || m.id != "0/"+strconv.FormatInt(at(0), 10)+"/"+strconv.FormatInt(at(1), 10) {
		t.Errorf("record key %q, window id %q", m.key, m.id)
	}
	e, ok := row(got, at(1), "e1", "")
	if !ok {
		t.Fatalf("no engine row in %+v", got)
	}
	check := func(name string, got, want, tol float64) {
		t.Helper()
		if math.Abs(got-want) > tol {
			t.Errorf("%s = %v, want %v ± %v", name, got, want, tol)
		}
	}
	if e.Requests != 100 || e.StatusEvents != 4 || e.LateEvents != 0 {
		t.Errorf("engine row counts %+v", e)
	}
	check("arrival_rps", e.ArrivalRPS, 100, 1e-9)
	check("ttft_p50", e.TTFTP50Ms, 50, 1.5)
	check("ttft_p99", e.TTFTP99Ms, 99, 2)
	check("tbot_p50", e.TBOTP50Ms, 20, 0.2)
	check("cache_hit_ratio", e.CacheHitRatio, 0.25, 1e-9)
	check("in_flight", e.InFlight, 20, 1e-9) // mean of 8, 16, 24, 32
	for _, cl := range []string{"fe-a", "fe-b"} {
		c, ok := row(got, at(1), "e1", cl)
		if !ok || c.Requests != 50 {
			t.Errorf("cluster row %s: %+v (found %v)", cl, c, ok)
		}
	}
	// The latest window is served over HTTP.
	waitFor(t, 5*time.Second, "latest window", func() bool { return len(r.a.Features().Rows) == 3 })
	srv := httptest.NewServer(r.a.Handler())
	defer srv.Close()
	var view struct {
		WindowEnd time.Time `json:"window_end"`
		Rows      []struct {
			Engine    string  `json:"engine"`
			Cluster   string  `json:"cluster"`
			Requests  uint64  `json:"requests"`
			TTFTP99Ms float64 `json:"ttft_p99_ms"`
		} `json:"rows"`
	}
	getJSON(t, srv.URL+"/v1/features", &view)
	if !view.WindowEnd.Equal(time.Unix(0, at(1))) || len(view.Rows) != 3 || view.Rows[0].Engine != "e1" ||
		view.Rows[0].Cluster != "" || view.Rows[0].Requests != 100 || view.Rows[1].Cluster != "fe-a" {
		t.Errorf("/v1/features: %+v", view)
	}
	if resp, err := http.Get(srv.URL + "/v1/nothing"); err != nil || resp.StatusCode != 404 {
		t.Errorf("unknown path: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// TestOutOfOrderAndLate: events within the out-of-order bound and the
// allowed lateness are applied; later ones are counted, not applied.
func TestOutOfOrderAndLate(t *testing.T) {
	addrs := streamstest.Kafka(t)
	cfg := testConfig(addrs, "g-late")
	cfg.OutOfOrder, cfg.AllowedLateness = 200*time.Millisecond, 300*time.Millisecond
	c := func(sec float64) *kgo.Record { return signal(t, 1, completion("e2", "", at(sec), 100, 10)) }
	producer(t, addrs)(
		c(0.1), c(0.9), c(1.05),
		c(0.95), // watermark 0.85: window [0,1) still open, applied
		c(1.6),  // watermark 1.4 >= 1.0 + 0.3: [0,1) closes
		c(0.5),  // late for [0,1): counted in [1,2), not applied
		c(1.2),  // in order for [1,2)
		c(3.5),  // watermark 3.3: closes [1,2) and [2,3)
	)
	start(t, cfg, Deps{})
	got := features(t, readTopic(t, addrs, schemas.TopicFeatures).waitN(t, 2, 20*time.Second))
	w0, ok0 := row(got, at(1), "e2", "")
	w1, ok1 := row(got, at(2), "e2", "")
	if !ok0 || !ok1 {
		t.Fatalf("windows missing: %+v", got)
	}
	if w0.Requests != 3 || w0.LateEvents != 0 {
		t.Errorf("[0,1): %d requests, %d late; want 3, 0", w0.Requests, w0.LateEvents)
	}
	if w1.Requests != 3 || w1.LateEvents != 1 {
		t.Errorf("[1,2): %d requests, %d late; want 3 (1.05, 1.6, 1.2), 1", w1.Requests, w1.LateEvents)
	}
}

package dataplane

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ilb-router/ilb/schemas"
)

// chatSized posts a new conversation whose prompt is n bytes long.
func chatSized(h http.Handler, user string, n int) int {
	body := fmt.Sprintf(`{"model":"m","user":%q,"messages":[{"role":"user","content":%q}]}`, user, strings.Repeat("a", n))
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

// TestShedLargestFirst: under a shed fraction, the data plane refuses
// the new conversations with the longest prompts (estimated from the
// body) and serves the short ones, refusing about as many as shedding by
// key would; with ShedOrder "key" both lengths are refused alike.
func TestShedLargestFirst(t *testing.T) {
	for _, order := range []string{ShedLargest, ShedByKey} {
		t.Run(order, func(t *testing.T) {
			a := newEngine(t, "eng-a")
			cfg := testConfig("fe-a")
			cfg.EngineURLs = engineURLs(a)
			cfg.ShedOrder = order
			d := newDP(t, cfg, Deps{})
			mustSet(t, d, snap("fe-a", 1, map[string]float64{"eng-a": 1}))
			h := d.Handler()
			// Four short prompts to one long one, as the cluster has seen.
			size := func(i int) int {
				if i%5 == 0 {
					return 20000
				}
				return 400
			}
			for i := range 300 {
				if code := chatSized(h, fmt.Sprintf("warm-%d", i), size(i)); code != 200 {
					t.Fatalf("before shedding: %d", code)
				}
			}
			mustSet(t, d, &schemas.Snapshot{Version: 2, Cluster: "fe-a", CreatedAt: t0, ShedFraction: 0.15,
				Weights: map[string]float64{"eng-a": 0.85}})
			shed := map[int]int{}
			const n = 1000
			for i := range n {
				switch code := chatSized(h, fmt.Sprintf("new-%d", i), size(i)); code {
				case 429:
					shed[size(i)]++
				case 200:
				default:
					t.Fatalf("request %d: %d", i, code)
				}
			}
			long, short := float64(shed[20000])/(n/5), float64(shed[400])/(n*4/5)
			total := float64(shed[20000]+shed[400]) / n
			t.Logf("%s: shed %.3f of long prompts, %.3f of short ones, %.3f in all", order, long, short, total)
			if total < 0.12 || total > 0.18 {
				t.Errorf("shed %.3f of new conversations, want about 0.15", total)
			}
			if order == ShedLargest && (long < 0.7 || short > 0.01) {
				t.Errorf("largest first: shed %.3f of long prompts and %.3f of short ones", long, short)
			}
			if order == ShedByKey && (long < 0.05 || long > 0.3 || short < 0.1 || short > 0.2) {
				t.Errorf("by key: shed %.3f of long prompts and %.3f of short ones, want both about 0.15", long, short)
			}
		})
	}
}

// A shed order that is neither "largest" nor "key" is a configuration
// error.
func TestShedOrderValidated(t *testing.T) {
	cfg := testConfig("fe-a")
	cfg.ShedOrder = "random"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "ShedOrder") {
		t.Fatalf("Validate() = %v, want an error naming ShedOrder", err)
	}
}

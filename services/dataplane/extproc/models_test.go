package extproc

import (
	"testing"
	"time"

	"github.com/ilb-router/ilb/services/dataplane"
)

// TestRoutesByModel: the endpoint picker routes by model as the HTTP
// proxy does: from x-ilb-model on headers alone, else from the body's
// model (the headers no longer suffice in a fleet of two models); the
// pick and its fallbacks all serve the model; an unknown model is
// answered 404 model_not_found.
func TestRoutesByModel(t *testing.T) {
	cfg := dataplane.DefaultConfig()
	cfg.Clusters, cfg.ConversationSlots = []string{"fe-a"}, 1<<12
	cfg.EngineURLs = map[string]string{}
	for name, ep := range engines {
		cfg.EngineURLs[name] = "http://" + ep
	}
	cfg.EngineModels = map[string][]string{"eng-a": {"big", "small"}, "eng-b": {"small"}, "eng-c": {"small"}}
	d, err := dataplane.New(cfg, dataplane.Deps{Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	setSnapshot(t, d, 1, 0)
	xc := DefaultConfig()
	xc.Addr = "127.0.0.1:0"
	s, err := New(xc, Deps{Plane: d})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{d: d, s: s, conn: serve(t, s)}
	small := map[string]bool{}
	for i := range 10 {
		conv := "conv-" + string(rune('a'+i))
		st := f.open(t)
		mustSend(t, st, chatHeaders(true, "x-conversation-id", conv, "x-ilb-model", "big"))
		resp := mustRecv(t, st)
		if dest := destination(t, resp.GetRequestHeaders().GetResponse(), resp.GetDynamicMetadata()); len(dest) != 1 || dest[0] != engines["eng-a"] {
			t.Fatalf("big by header: %v, want eng-a alone (no other engine serves it)", dest)
		}
		endRequest(t, st, engines["eng-a"])

		st = f.open(t)
		mustSend(t, st, chatHeaders(false, "x-conversation-id", conv), body(`{"model":"small","messages":[{"role":"user","content":"x"}]}`, true))
		resp = mustRecv(t, st)
		dest := destination(t, resp.GetRequestHeaders().GetResponse(), resp.GetDynamicMetadata())
		if len(dest) == 0 {
			t.Fatalf("small by body: no pick in %v", resp)
		}
		small[dest[0]] = true
		if b := mustRecv(t, st).GetRequestBody(); b == nil {
			t.Fatal("small by body: the body was not streamed back")
		}
		endRequest(t, st, dest[0])
	}
	if len(small) < 2 {
		t.Fatalf("small requests all went to %v: want the weights spread over its engines", small)
	}
	st := f.open(t)
	mustSend(t, st, chatHeaders(false), body(`{"model":"gpt-9","messages":[{"role":"user","content":"x"}]}`, true))
	checkImmediate(t, mustRecv(t, st), 404, "model_not_found")
	if f.s.counts.decisions[onHeaders].Load() != 10 || f.s.counts.decisions[onBody].Load() != 10 {
		t.Fatalf("decisions: %d on headers, %d on the body; want 10 and 10",
			f.s.counts.decisions[onHeaders].Load(), f.s.counts.decisions[onBody].Load())
	}
}

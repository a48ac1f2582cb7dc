package dataplane

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/sched"
)

// The two-model test fleet: eng-a serves both models and takes prompts up
// to 2,000 tokens; eng-b serves the small model without a limit, eng-c
// the small model up to 100 tokens. Classes: big/0-2000 (eng-a);
// small/0-100 (all three), small/100-2000 (eng-a, eng-b),
// small/2000-inf (eng-b).
var (
	testModels = map[string][]string{"eng-a": {"big", "small"}, "eng-b": {"small"}, "eng-c": {"small"}}
	testLimits = map[string]int{"eng-a": 2000, "eng-c": 100}
)

// modelFleet returns the schemas view of the test fleet, for checking
// picks independently of the data plane's catalogue.
func modelFleet() *schemas.Fleet {
	f := &schemas.Fleet{}
	for _, n := range slices.Sorted(func(yield func(string) bool) {
		for n := range testModels {
			if !yield(n) {
				return
			}
		}
	}) {
		f.Engines = append(f.Engines, schemas.FleetEngine{Name: n, Models: testModels[n], MaxContextTokens: testLimits[n]})
	}
	return f
}

// servesRequest reports whether the fleet lets engine take a request for
// model with a prompt of tokens.
func servesRequest(f *schemas.Fleet, engine, model string, tokens int) bool {
	fe, ok := f.Engine(engine)
	return ok && f.ServesModel(fe, model) && (fe.MaxContextTokens == 0 || fe.MaxContextTokens >= tokens)
}

func modelPlane(t testing.TB, es ...*engineStub) *DataPlane {
	t.Helper()
	cfg := testConfig("fe-a")
	cfg.EngineModels, cfg.EngineMaxContext, cfg.DefaultModel = testModels, testLimits, "small"
	if len(es) > 0 {
		cfg.EngineURLs = engineURLs(es...)
	}
	return newDP(t, cfg, Deps{})
}

// pickModel picks for a request of model with a prompt of tokens, as the
// proxy does.
func pickModel(d *DataPlane, cluster, model string, tokens int, key string) (string, error) {
	c, _ := d.cluster(cluster)
	p, err := c.cur.Load().forRequest(model, tokens)
	if err != nil {
		return "", err
	}
	ch, _, err := d.decide(c, p, sched.HashKey(key))
	if err != nil {
		return "", err
	}
	return p.slots[ch.idx].eng.name, nil
}

// TestModelRoutingOldSnapshot: a snapshot without classes (an optimizer
// that knows none) still routes each model only to engines serving it and
// each prompt only where it fits, by the top-level weights restricted to
// the class's engines.
func TestModelRoutingOldSnapshot(t *testing.T) {
	d := modelPlane(t)
	mustSet(t, d, snap("fe-a", 1, map[string]float64{"eng-a": 0.2, "eng-b": 0.4, "eng-c": 0.4}))
	f := modelFleet()
	seen := map[string]map[string]int{}
	for i := range 600 {
		model, tokens := "small", []int{10, 500, 5000}[i%3]
		if i%4 == 0 {
			model, tokens = "big", 10
		}
		key := "k" + strconv.Itoa(i)
		got, err := pickModel(d, "fe-a", model, tokens, key)
		if err != nil {
			t.Fatalf("%s %d: %v", model, tokens, err)
		}
		if !servesRequest(f, got, model, tokens) {
			t.Fatalf("%s with %d tokens went to %s", model, tokens, got)
		}
		class := model + "/" + strconv.Itoa(tokens)
		if seen[class] == nil {
			seen[class] = map[string]int{}
		}
		seen[class][got]++
	}
	// Short small prompts use all three engines; long ones eng-a and eng-b.
	if len(seen["small/10"]) != 3 || len(seen["small/500"]) != 2 || len(seen["small/5000"]) != 1 || len(seen["big/10"]) != 1 {
		t.Fatalf("engines per class: %v", seen)
	}
	for _, c := range []struct {
		model  string
		tokens int
		want   error
	}{{"nope", 1, schemas.ErrUnknownModel}, {"big", 2001, schemas.ErrContextLength}} {
		if _, err := pickModel(d, "fe-a", c.model, c.tokens, "x"); !errors.Is(err, c.want) {
			t.Fatalf("%s %d: %v, want %v", c.model, c.tokens, err, c.want)
		}
	}
	// A request that names no model is for the default model.
	if got, _ := pickModel(d, "fe-a", "", 5000, "x"); got != "eng-b" {
		t.Fatalf("default model, long prompt: %s", got)
	}
}

// classTable encodes a table over weights.
func classTable(t testing.TB, weights map[string]float64) *schemas.SnapshotTable {
	names := sortedKeys(weights)
	ws := make([]float64, len(names))
	for i, n := range names {
		ws[i] = weights[n]
	}
	tb, err := sched.Rebalance(nil, names, ws)
	if err != nil {
		t.Fatal(err)
	}
	slots, engines, enc, data := tb.Encode()
	return &schemas.SnapshotTable{Slots: slots, Encoding: enc, Engines: engines, Data: data}
}

// TestModelRoutingClasses: a snapshot's class tables decide within their
// class; an entry giving a class an engine that does not serve it is
// skipped and counted, and the engine takes none of that class.
func TestModelRoutingClasses(t *testing.T) {
	d := modelPlane(t)
	s := snap("fe-a", 1, map[string]float64{"eng-a": 0.5, "eng-b": 0.25, "eng-c": 0.25})
	bad := map[string]float64{"eng-b": 0.5, "eng-c": 0.5} // eng-c takes no 100-2000 prompt
	s.Classes = []schemas.SnapshotClass{
		{Model: "big", MaxPromptTokens: 2000, Weights: map[string]float64{"eng-a": 1}},
		{Model: "small", MaxPromptTokens: 100, Weights: map[string]float64{"eng-c": 1}, Table: classTable(t, map[string]float64{"eng-c": 1})},
		{Model: "small", MinPromptTokens: 100, MaxPromptTokens: 2000, Weights: bad, Table: classTable(t, bad)},
	}
	mustSet(t, d, s)
	c, _ := d.cluster("fe-a")
	if n := c.ineligible.Load(); n != 1 {
		t.Fatalf("ineligible entries counted: %d, want 1", n)
	}
	for i := range 200 {
		key := "k" + strconv.Itoa(i)
		if got, err := pickModel(d, "fe-a", "small", 50, key); err != nil || got != "eng-c" {
			t.Fatalf("short small prompt: %s %v, want eng-c (its class table)", got, err)
		}
		if got, err := pickModel(d, "fe-a", "small", 500, key); err != nil || got != "eng-b" {
			t.Fatalf("small prompt of 500 tokens: %s %v, want eng-b (eng-c is ineligible)", got, err)
		}
		// Not listed: the top-level weights over the engines serving it.
		if got, err := pickModel(d, "fe-a", "small", 3000, key); err != nil || got != "eng-b" {
			t.Fatalf("small prompt of 3000 tokens: %s %v", got, err)
		}
	}
	// GET /v1/routing shows each class's weights, over its engines only.
	info := decodeJSON[routingInfo](t, getPath(d.Handler(), "/v1/routing?cluster=fe-a"))
	want := map[string]map[string]float64{"big/2000": {"eng-a": 1}, "small/100": {"eng-c": 1}, "small/2000": {"eng-b": 1}, "small/0": {"eng-b": 1}}
	if len(info.Classes) != 4 {
		t.Fatalf("classes %+v, want 4", info.Classes)
	}
	for _, ci := range info.Classes {
		w := want[ci.Model+"/"+strconv.Itoa(ci.MaxPromptTokens)]
		if len(ci.Weights) != len(w) {
			t.Fatalf("class %+v, want weights %v", ci, w)
		}
		for e, v := range w {
			if math.Abs(ci.Weights[e]-v) > 0.01 {
				t.Fatalf("class %+v, want weights %v", ci, w)
			}
		}
	}
	// A fleet reload re-reads the snapshot in use: entries already counted
	// are not counted again; one the new fleet makes ineligible is.
	d.UpdateFleetModels(testModels, testLimits, "small")
	if n := c.ineligible.Load(); n != 1 {
		t.Fatalf("after reloading the same fleet: %d ineligible entries counted, want still 1", n)
	}
	d.UpdateFleetModels(map[string][]string{"eng-a": {"big", "small"}, "eng-b": {"big"}, "eng-c": {"small"}}, testLimits, "small")
	if n := c.ineligible.Load(); n != 2 {
		t.Fatalf("after a fleet where eng-b no longer serves small: %d counted, want 2", n)
	}
}

// TestModelErrorsOverHTTP: the proxy routes by the body's model and the
// body's length; unknown models get OpenAI's 404 model_not_found, prompts
// too long for every engine 400 context_length_exceeded.
func TestModelErrorsOverHTTP(t *testing.T) {
	es := []*engineStub{newEngine(t, "eng-a"), newEngine(t, "eng-b"), newEngine(t, "eng-c")}
	d := modelPlane(t, es...)
	mustSet(t, d, snap("fe-a", 1, map[string]float64{"eng-a": 0.2, "eng-b": 0.4, "eng-c": 0.4}))
	h := d.Handler()
	post := func(body string, hdr map[string]string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	body := func(model, content string) string {
		return `{"model":"` + model + `","messages":[{"role":"user","content":"` + content + `"}]}`
	}
	for i := range 30 {
		conv := map[string]string{HeaderConversation: "c" + strconv.Itoa(i)}
		if rec := post(body("big", "hi"), conv); rec.Code != 200 || rec.Header().Get(HeaderEngine) != "eng-a" {
			t.Fatalf("big: %d from %q", rec.Code, rec.Header().Get(HeaderEngine))
		}
		// Header-routed without X-Ilb-Model: the body is read for its model.
		if rec := post(body("small", strings.Repeat("x", 1000)), conv); rec.Code != 200 || rec.Header().Get(HeaderEngine) == "eng-c" {
			t.Fatalf("small, 250 tokens: %d from %q", rec.Code, rec.Header().Get(HeaderEngine))
		}
		// With X-Ilb-Model the headers suffice.
		hdr := map[string]string{HeaderConversation: "c" + strconv.Itoa(i), HeaderModel: "big"}
		if rec := post(`{"messages":[]}`, hdr); rec.Code != 200 || rec.Header().Get(HeaderEngine) != "eng-a" {
			t.Fatalf("big by header: %d from %q", rec.Code, rec.Header().Get(HeaderEngine))
		}
	}
	for _, c := range []struct {
		body   string
		status int
		code   string
	}{
		{body("gpt-9", "hi"), 404, "model_not_found"},
		{body("big", strings.Repeat("x", 9000)), 400, "context_length_exceeded"},
	} {
		rec := post(c.body, nil)
		e := decodeJSON[errorBody](t, rec).Error
		if rec.Code != c.status || e.Code != c.code || e.Type != "invalid_request_error" || e.Message == "" {
			t.Fatalf("%d %s, want %d %s", rec.Code, rec.Body, c.status, c.code)
		}
	}
	if n := es[0].hits.Load() + es[1].hits.Load() + es[2].hits.Load(); n != 90 {
		t.Fatalf("engines served %d requests, want 90 (the refused ones reach none)", n)
	}
	// /v1/pick takes the model and prompt length too.
	rec := postJSON(h, "/v1/pick", `{"conversation_id":"x","model":"small","prompt_tokens":5000}`)
	if got := decodeJSON[pickResponse](t, rec); rec.Code != 200 || got.Engine != "eng-b" {
		t.Fatalf("pick small 5000: %d %s", rec.Code, rec.Body)
	}
	if rec := postJSON(h, "/v1/pick", `{"conversation_id":"x","model":"gpt-9"}`); rec.Code != 404 {
		t.Fatalf("pick unknown model: %d %s", rec.Code, rec.Body)
	}
	// /v1/models lists the fleet's models.
	rec = getPath(h, "/v1/models")
	var list struct {
		Data []struct{ ID string } `json:"data"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || len(list.Data) != 2 || list.Data[0].ID != "big" || list.Data[1].ID != "small" {
		t.Fatalf("models: %s", rec.Body)
	}
}

// TestUpdateModels: a new fleet's model lists apply to the snapshot in
// use at once.
func TestUpdateModels(t *testing.T) {
	d := modelPlane(t)
	mustSet(t, d, snap("fe-a", 1, map[string]float64{"eng-a": 0.2, "eng-b": 0.4, "eng-c": 0.4}))
	d.UpdateModels(map[string][]string{"eng-a": {"big"}, "eng-b": {"big"}, "eng-c": {"small"}}, "")
	if got, err := pickModel(d, "fe-a", "small", 5000, "k"); !errors.Is(err, schemas.ErrContextLength) {
		t.Fatalf("small, 5000 tokens, eng-c limited to 100: %s %v", got, err)
	}
	d.UpdateContextLimits(nil)
	for i := range 100 {
		got, err := pickModel(d, "fe-a", "small", 5000, "k"+strconv.Itoa(i))
		if err != nil || got != "eng-c" {
			t.Fatalf("small after the update: %s %v", got, err)
		}
	}
}

// TestImplicitModelUnchanged: without model lists every request is routed
// whatever model it names, as before models existed.
func TestImplicitModelUnchanged(t *testing.T) {
	d := newDP(t, testConfig("fe-a"), Deps{})
	mustSet(t, d, snap("fe-a", 1, map[string]float64{"eng-a": 0.5, "eng-b": 0.5}))
	c, _ := d.cluster("fe-a")
	p := c.cur.Load()
	for _, m := range []string{"", "anything", "gpt-4o"} {
		if q, err := p.forRequest(m, 1<<30); err != nil || q != p {
			t.Fatalf("model %q: %v", m, err)
		}
	}
}

// FuzzSnapshotModelEligibility: no snapshot, however malformed, makes the
// data plane route a request to an engine that does not serve its model
// or accept its prompt per the fleet (EngineModels, EngineMaxContext): a
// snapshot is rejected, or its ineligible entries are skipped. The input
// is a snapshot in JSON, or, when it is not JSON, bytes a snapshot with
// classes and tables is built from; requests of every model and band are
// picked, by the proxy's path and the endpoint picker's (with fallbacks).
func FuzzSnapshotModelEligibility(f *testing.F) {
	good := snap("fe-a", 2, map[string]float64{"eng-a": 0.5, "eng-b": 0.25, "eng-c": 0.25})
	bad := map[string]float64{"eng-c": 0.5, "eng-z": 0.25, "eng-a": 0.25}
	good.Classes = []schemas.SnapshotClass{
		{Model: "big", MaxPromptTokens: 2000, Weights: map[string]float64{"eng-b": 0.5, "eng-c": 0.5}, Table: classTable(f, map[string]float64{"eng-b": 0.5, "eng-c": 0.5})},
		{Model: "small", MinPromptTokens: 2000, Weights: bad, Table: classTable(f, bad)},
		{Model: "small", MaxPromptTokens: 100, Weights: map[string]float64{"eng-c": 1}},
		{Model: "nope", Weights: map[string]float64{"eng-a": 1}},
	}
	js, _ := json.Marshal(good)
	f.Add(js, uint16(50), "k")
	top, _ := json.Marshal(snap("fe-a", 3, map[string]float64{"eng-c": 0.9, "eng-z": 0.1}))
	f.Add(top, uint16(3000), "k2")
	f.Add([]byte(`{"version":5,"cluster":"fe-a","weights":{"eng-c":1},"shed_fraction":0,"classes":[{"model":"big","weights":{"eng-c":1},"shed_fraction":0}]}`), uint16(1), "")
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, uint16(150), "x")
	f.Add([]byte{9, 200, 7, 3, 250, 1, 0, 99, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4}, uint16(2500), "y")
	fleet := modelFleet()
	f.Fuzz(func(t *testing.T, data []byte, tokens uint16, key string) {
		d := modelPlane(t)
		mustSet(t, d, snap("fe-a", 1, map[string]float64{"eng-a": 0.4, "eng-b": 0.3, "eng-c": 0.3}))
		if len(data) > 0 && data[0] == '{' {
			_ = d.SetSnapshotJSON(data)
		} else {
			_ = d.SetSnapshot(builtSnapshot(t, data))
		}
		c, _ := d.cluster("fe-a")
		for _, model := range []string{"big", "small", "", "nope"} {
			for _, n := range []int{0, 50, 100, 101, 1999, 2000, 2001, 5000, int(tokens)} {
				for i := range 8 {
					k := key + strconv.Itoa(i)
					checkPick(t, d, c, fleet, model, n, k)
				}
			}
		}
	})
}

// checkPick fails t when a pick for model and tokens, or one of its
// fallbacks, names an engine that does not serve it.
func checkPick(t *testing.T, d *DataPlane, c *cluster, fleet *schemas.Fleet, model string, tokens int, key string) {
	t.Helper()
	want := model
	if want == "" {
		want = "small" // the default model
	}
	if got, err := pickModel(d, c.name, model, tokens, key); err == nil && !servesRequest(fleet, got, want, tokens) {
		t.Fatalf("%q with %d tokens routed to %s", model, tokens, got)
	}
	pk, rerr := d.PickExternal(ExternalRequest{Model: model, PromptTokens: tokens, Fallbacks: 2})
	if rerr != nil {
		return
	}
	held := pk.holder.eng
	if got := held.live.own.Load(); got < 1 {
		t.Fatalf("endpoint picker: the pick's engine %s counts %d own requests in flight, want at least 1", held.name, got)
	}
	defer func() {
		before := held.live.own.Load()
		d.FinishExternal(pk, "", 0, 0)
		if got := held.live.own.Load(); got != before-1 {
			t.Fatalf("endpoint picker: own requests at %s %d after the finish, want %d", held.name, got, before-1)
		}
	}()
	for _, e := range pk.Engines {
		if !servesRequest(fleet, e, want, tokens) {
			t.Fatalf("endpoint picker: %q with %d tokens routed to %s (pick and fallbacks %v)", model, tokens, e, pk.Engines)
		}
	}
}

// builtSnapshot builds a valid-looking snapshot with classes and tables
// from fuzz bytes: engines (some ineligible, one unknown), models (one
// unknown), bands and weights all come from the bytes.
func builtSnapshot(t testing.TB, data []byte) *schemas.Snapshot {
	engines := []string{"eng-a", "eng-b", "eng-c", "eng-z"}
	models := []string{"big", "small", "nope", ""}
	bands := []int{0, 100, 2000, 7}
	next := func() int {
		if len(data) == 0 {
			return 0
		}
		b := int(data[0])
		data = data[1:]
		return b
	}
	weights := func() map[string]float64 {
		w := map[string]float64{}
		for _, e := range engines {
			if v := next() % 4; v > 0 {
				w[e] = float64(v)
			}
		}
		total := 0.0
		for _, v := range w {
			total += v
		}
		for e := range w {
			w[e] /= total
		}
		return w
	}
	s := snap("fe-a", 2, weights())
	for range next() % 5 {
		lo, hi := bands[next()%4], bands[next()%4]
		if hi != 0 && lo >= hi {
			lo = 0
		}
		k := schemas.SnapshotClass{Model: models[next()%4], MinPromptTokens: lo, MaxPromptTokens: hi, Weights: weights()}
		if len(k.Weights) > 0 && next()%2 == 0 {
			k.Table = classTable(t, k.Weights)
		}
		s.Classes = append(s.Classes, k)
	}
	return s
}

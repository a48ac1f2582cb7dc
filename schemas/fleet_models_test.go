package schemas

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// twoModelFleet: llama-3-70b on every engine (east-a limited to 8192
// prompt tokens, east-b to 32768, eu-a without a limit), llama-3-8b on
// east-b only; fe-eu may use eu-a only (residency).
const twoModelFleet = `network_ms:
  east-us: {east-us: 1, west-europe: 89}
  west-europe: {west-europe: 1}
default_model: llama-3-70b
clusters:
  - {name: fe-east, region: east-us, demand_share: 0.6, model_shares: {llama-3-70b: 3, llama-3-8b: 1}}
  - {name: fe-eu, region: west-europe, demand_share: 0.4, residency: eu}
engines:
  - {name: east-a, region: east-us, sku: h100, prefill_tokens_per_s: 8700, decode_step_ms: {base: 29.6, per_seq: 0.35},
     max_batch: 64, kv_cache_tokens: 500000, models: [llama-3-70b], max_context_tokens: 8192}
  - {name: east-b, region: east-us, sku: h100, prefill_tokens_per_s: 8700, decode_step_ms: {base: 29.6, per_seq: 0.35},
     max_batch: 64, kv_cache_tokens: 500000, models: [llama-3-70b, llama-3-8b], max_context_tokens: 32768}
  - {name: eu-a, region: west-europe, residency: eu, sku: h100, prefill_tokens_per_s: 8700, decode_step_ms: {base: 29.6, per_seq: 0.35},
     max_batch: 64, kv_cache_tokens: 500000}
`

func TestFleetClasses(t *testing.T) {
	f, err := ParseFleet([]byte(twoModelFleet))
	if err != nil {
		t.Fatal(err)
	}
	if !f.ExplicitModels() {
		t.Fatal("ExplicitModels false")
	}
	if got := f.EngineModels(f.Engines[2]); !reflect.DeepEqual(got, []string{"llama-3-70b"}) {
		t.Errorf("eu-a serves %v, want the default model", got)
	}
	want := []ModelClass{
		{"llama-3-70b", 0, 8192}, {"llama-3-70b", 8192, 32768}, {"llama-3-70b", 32768, 0},
		{"llama-3-8b", 0, 32768},
	}
	classes := f.Classes()
	if !reflect.DeepEqual(classes, want) {
		t.Fatalf("classes %+v, want %+v", classes, want)
	}
	keys := []string{"llama-3-70b/0-8192", "llama-3-70b/8192-32768", "llama-3-70b/32768-inf", "llama-3-8b/0-32768"}
	for i, k := range classes {
		if k.Key() != keys[i] {
			t.Errorf("class %d key %q, want %q", i, k.Key(), keys[i])
		}
	}
	serves := map[string][]bool{ // by engine, per class
		"east-a": {true, false, false, false},
		"east-b": {true, true, false, true},
		"eu-a":   {true, true, true, false},
	}
	for _, e := range f.Engines {
		for i, k := range classes {
			if got := f.Serves(e, k); got != serves[e.Name][i] {
				t.Errorf("Serves(%s, %s) = %v", e.Name, k.Key(), got)
			}
		}
	}
	for _, tc := range []struct {
		model  string
		tokens int
		class  int
		err    error
	}{
		{"llama-3-70b", 0, 0, nil}, {"llama-3-70b", 8192, 0, nil}, {"llama-3-70b", 8193, 1, nil},
		{"llama-3-70b", 1 << 20, 2, nil}, {"llama-3-8b", 100, 3, nil},
		{"llama-3-8b", 32769, -1, ErrContextLength}, {"gpt-4", 1, -1, ErrUnknownModel}, {"", 1, -1, ErrUnknownModel},
	} {
		got, err := ClassOf(classes, tc.model, tc.tokens)
		if got != tc.class || !errors.Is(err, tc.err) {
			t.Errorf("ClassOf(%q, %d) = %d, %v; want %d, %v", tc.model, tc.tokens, got, err, tc.class, tc.err)
		}
		if err == nil && !classes[got].Holds(tc.tokens) {
			t.Errorf("class %s does not hold %d", classes[got].Key(), tc.tokens)
		}
	}
	if m, err := f.RequestModel(""); m != "llama-3-70b" || err != nil {
		t.Errorf("RequestModel(\"\") = %q, %v; want the default", m, err)
	}
	mix, err := f.ModelMix(f.Clusters[0])
	if err != nil || !reflect.DeepEqual(mix, []ModelShare{{"llama-3-70b", 0.75}, {"llama-3-8b", 0.25}}) {
		t.Errorf("fe-east mix %+v, %v", mix, err)
	}
	if mix, err := f.ModelMix(f.Clusters[1]); err != nil || !reflect.DeepEqual(mix, []ModelShare{{"llama-3-70b", 1}}) {
		t.Errorf("fe-eu mix %+v, %v", mix, err)
	}
}

// TestImplicitModel: a fleet whose engines list no models keeps working
// as one implicit model that takes requests for any model name.
func TestImplicitModel(t *testing.T) {
	f, err := ParseFleet([]byte(designFleet + euEngine))
	if err != nil {
		t.Fatal(err)
	}
	if f.ExplicitModels() {
		t.Fatal("ExplicitModels true for a fleet without models")
	}
	if got := f.Classes(); !reflect.DeepEqual(got, []ModelClass{{}}) {
		t.Fatalf("classes %+v, want one implicit class", got)
	}
	for _, m := range []string{"", "gpt-4"} {
		if got, err := f.RequestModel(m); got != "" || err != nil {
			t.Errorf("RequestModel(%q) = %q, %v; want the implicit model", m, got, err)
		}
	}
	if k := f.Classes()[0].Key(); k != "*" {
		t.Errorf("implicit key %q", k)
	}
}

func TestParseFleetModelErrors(t *testing.T) {
	sub := func(old, new string) string {
		if !strings.Contains(twoModelFleet, old) {
			t.Fatalf("fixture lacks %q", old)
		}
		return strings.Replace(twoModelFleet, old, new, 1)
	}
	const eastA = "models: [llama-3-70b], max_context_tokens: 8192}"
	cases := []struct{ name, yaml, want string }{
		{"empty models", sub(eastA, "models: [], max_context_tokens: 8192}"), "line 10: engines[0].models: empty list"},
		{"context zero", sub(eastA, "models: [llama-3-70b], max_context_tokens: 0}"), "line 10: engines[0].max_context_tokens: 0 must be > 0"},
		{"context negative", sub(eastA, "models: [llama-3-70b], max_context_tokens: -5}"), "engines[0] (east-a): max_context_tokens -5 must be > 0"},
		{"context float", sub(eastA, "models: [llama-3-70b], max_context_tokens: 81.5}"), "max_context_tokens: 81.5 is not an integer"},
		{"duplicate model", sub(eastA, "models: [llama-3-70b, llama-3-70b]}"), `engines[0] (east-a): models[1]: "llama-3-70b" listed twice`},
		{"model with space", sub(eastA, "models: ['llama 3']}"), `engines[0] (east-a): models[0]: model "llama 3" contains a space`},
		{"empty model name", sub(eastA, "models: ['']}"), "engines[0] (east-a): models[0]: empty model name"},
		{"no models no default", sub("default_model: llama-3-70b\n", ""), "engines[2] (eu-a): models: none listed while other engines list theirs"},
		{"share unknown model", sub("llama-3-8b: 1}", "gpt-4: 1}"), "clusters[0] (fe-east): model_shares: gpt-4: no engine the cluster may use serves it"},
		{"share unreachable model", strings.Replace(twoModelFleet, "residency: eu}", "residency: eu, model_shares: {llama-3-8b: 1}}", 1),
			"clusters[1] (fe-eu): model_shares: llama-3-8b: no engine the cluster may use serves it"},
		{"share negative", sub("llama-3-8b: 1}", "llama-3-8b: -1}"), "clusters[0] (fe-east): model_shares: llama-3-8b -1 must be finite and >= 0"},
		{"shares zero", sub("{llama-3-70b: 3, llama-3-8b: 1}", "{llama-3-70b: 0}"), "model_shares: shares sum to 0"},
		{"shares typo field", sub("model_shares", "model_share"), "field model_share not found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseFleet([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			if f != nil {
				t.Fatal("got a fleet along with the error")
			}
		})
	}
	// default_model must be served when every engine lists models.
	all := strings.Replace(sub("default_model: llama-3-70b\n", "default_model: mistral\n"),
		"max_batch: 64, kv_cache_tokens: 500000}\n", "max_batch: 64, kv_cache_tokens: 500000, models: [llama-3-70b]}\n", 1)
	if _, err := ParseFleet([]byte(all)); err == nil || !strings.Contains(err.Error(), `default_model "mistral": no engine serves it`) {
		t.Errorf("unserved default_model: %v", err)
	}
	implicit := strings.Replace(designFleet+euEngine, "demand_share: 0.6}", "demand_share: 0.6, model_shares: {a: 1}}", 1)
	if _, err := ParseFleet([]byte(implicit)); err == nil || !strings.Contains(err.Error(), "model_shares: no engine lists models") {
		t.Errorf("model_shares on an implicit fleet: %v", err)
	}
}

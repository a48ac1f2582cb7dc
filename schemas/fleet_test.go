package schemas

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// designFleet is the fleet file example from DESIGN.md, verbatim.
const designFleet = `max_utilization: 0.95
block_tokens: 512            # size of one KV block (prefix_blocks / hash_ids)
network_ms:                  # region -> region request overhead; missing reverse = symmetric
  east-us: {east-us: 1, west-europe: 89}
  west-europe: {west-europe: 1}
clusters:                    # front-end CPU clusters
  - {name: fe-east, region: east-us, demand_share: 0.6}
  - {name: fe-eu, region: west-europe, demand_share: 0.4, residency: eu}
engines:
  - name: east-h100-0
    region: east-us
    sku: h100
    residency: us            # a cluster with a residency uses only engines with the same one
    prefill_tokens_per_s: 8700
    decode_step_ms: {base: 29.6, per_seq: 0.35}   # one decode step at batch size b: base + per_seq*b
    max_batch: 64
    kv_cache_tokens: 500000
`

const euEngine = `  - {name: eu-h100-0, region: west-europe, sku: h100, residency: eu, prefill_tokens_per_s: 8700,
     decode_step_ms: {base: 29.6, per_seq: 0.35}, max_batch: 64, kv_cache_tokens: 500000}
`

func TestParseDesignFleet(t *testing.T) {
	// As printed, the design's fleet leaves fe-eu without an engine it may
	// use (its only engine has residency us): the validator must say so.
	_, err := ParseFleet([]byte(designFleet))
	checkErr(t, err, `cluster "fe-eu" (region west-europe) has no eligible engine: none has residency "eu" and a network_ms entry to or from west-europe`, ErrInvalid)

	f, err := ParseFleet([]byte(designFleet + euEngine))
	if err != nil {
		t.Fatal(err)
	}
	e := f.Engines[0]
	if e.URL != "" {
		t.Errorf("url = %q, want empty (optional)", e.URL)
	}
	want := FleetEngine{Name: "east-h100-0", Region: "east-us", SKU: "h100", Residency: "us",
		PrefillTokensPerS: 8700, DecodeStepMs: DecodeStep{Base: 29.6, PerSeq: 0.35}, MaxBatch: 64,
		KVCacheTokens: 500000, Replicas: 1, Scheduler: DefaultScheduler}
	if !reflect.DeepEqual(e, want) {
		t.Errorf("engine = %+v, want %+v", e, want)
	}
	if f.TTFTSLOMs != 2000 || f.MeanOutputTokens != 200 || f.ShedPenaltyMs != 0 || f.TBOTSLOMs != 100 || f.TotalDemandRPS != 0 {
		t.Errorf("defaults not applied: %+v", f)
	}
	if got := f.EligibleEngines(f.Clusters[1]); len(got) != 1 || got[0].Name != "eu-h100-0" {
		t.Errorf("fe-eu may use %v, want only eu-h100-0", got)
	}
	if got := f.EligibleEngines(f.Clusters[0]); len(got) != 2 {
		t.Errorf("fe-east (no residency) may use %d engines, want both", len(got))
	}
}

const networkBlock = `network_ms:                  # region -> region request overhead; missing reverse = symmetric
  east-us: {east-us: 1, west-europe: 89}
  west-europe: {west-europe: 1}
`

const clusterBlock = `clusters:                    # front-end CPU clusters
  - {name: fe-east, region: east-us, demand_share: 0.6}
  - {name: fe-eu, region: west-europe, demand_share: 0.4, residency: eu}
`

func TestParseFleetURL(t *testing.T) {
	f, err := ParseFleet([]byte(strings.Replace(designFleet+euEngine, "max_batch: 64\n",
		"max_batch: 64\n    url: http://10.0.0.7:8000\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Engines[0].URL; got != "http://10.0.0.7:8000" {
		t.Fatalf("url = %q", got)
	}
}

func TestParseFleetErrors(t *testing.T) {
	ok := designFleet + euEngine
	sub := func(old, new string) string {
		if !strings.Contains(ok, old) {
			t.Fatalf("test fixture lacks %q", old)
		}
		return strings.Replace(ok, old, new, 1)
	}
	cases := []struct {
		name, yaml, want string
		sentinel         error
	}{
		{"typo top level", "max_utilisation: 0.9\n" + ok, "field max_utilisation not found in type schemas.Fleet", ErrMalformed},
		{"typo engine field", sub("max_batch: 64\n", "max_batch: 64\n    replica: 2\n"), "line 17: field replica not found in type schemas.FleetEngine", ErrMalformed},
		{"typo decode step", sub("per_seq: 0.35}   #", "perseq: 0.35}   #"), "field perseq not found in type schemas.DecodeStep", ErrMalformed},
		{"wrong type", sub("max_batch: 64\n", "max_batch: lots\n"), "cannot unmarshal !!str `lots` into int", ErrMalformed},
		{"float into int", sub("block_tokens: 512", "block_tokens: 51.2"), "line 2: block_tokens: 51.2 is not an integer", ErrMalformed},
		{"float into int engine", sub("max_batch: 64\n", "max_batch: 64.5\n"), "line 16: max_batch: 64.5 is not an integer", ErrMalformed},
		{"float into int exp", sub("max_batch: 64\n", "max_batch: 6.4e1\n"), "max_batch: 6.4e1 is not an integer", ErrMalformed},
		{"duplicate key", "block_tokens: 1\n" + ok, `mapping key "block_tokens" already defined`, ErrMalformed},
		{"empty", "", "empty file", ErrMalformed},
		{"comment only", "# nothing\n", "empty file", ErrMalformed},
		{"two documents", ok + "---\nmax_utilization: 0.5\n", "more than one YAML document", ErrMalformed},
		{"not a mapping", "- 1\n- 2\n", "cannot unmarshal !!seq into schemas.Fleet", ErrMalformed},
		{"null document", "~\n", "network_ms is empty", ErrInvalid}, // globals default, the rest is missing
		{"max util 1", sub("max_utilization: 0.95", "max_utilization: 1"), "max_utilization 1 must be in (0, 1)", ErrInvalid},
		{"max util negative", sub("max_utilization: 0.95", "max_utilization: -0.5"), "max_utilization -0.5", ErrInvalid},
		{"max util nan", sub("max_utilization: 0.95", "max_utilization: .nan"), "max_utilization NaN", ErrInvalid},
		{"block tokens negative", sub("block_tokens: 512", "block_tokens: -1"), "block_tokens -1 must be > 0", ErrInvalid},
		{"slo negative", "ttft_slo_ms: -3\n" + ok, "ttft_slo_ms -3 must be finite and > 0", ErrInvalid},
		{"tbot slo negative", "tbot_slo_ms: -1\n" + ok, "tbot_slo_ms -1 must be finite and > 0", ErrInvalid},
		{"tbot slo NaN", "tbot_slo_ms: .nan\n" + ok, "tbot_slo_ms NaN must be finite and > 0", ErrInvalid},
		{"tbot slo inf", "tbot_slo_ms: .inf\n" + ok, "tbot_slo_ms +Inf must be finite and > 0", ErrInvalid},
		{"penalty inf", "shed_penalty_ms: .inf\n" + ok, "shed_penalty_ms +Inf", ErrInvalid},
		{"penalty negative", "shed_penalty_ms: -1\n" + ok, "shed_penalty_ms -1", ErrInvalid},
		{"demand negative", "total_demand_rps: -1\n" + ok, "total_demand_rps -1", ErrInvalid},
		{"no network", sub(networkBlock, ""), "network_ms is empty", ErrInvalid},
		{"network negative", sub("west-europe: 89", "west-europe: -89"), "network_ms[east-us][west-europe] -89 must be finite and >= 0", ErrInvalid},
		{"network inf", sub("{west-europe: 1}", "{west-europe: .inf}"), "network_ms[west-europe][west-europe] +Inf", ErrInvalid},
		{"cluster unknown region", sub("region: east-us, demand", "region: eastus, demand"), `cluster "fe-east": region "eastus" does not appear in network_ms`, ErrInvalid},
		{"cluster no region", sub("region: east-us, demand", "demand"), `cluster "fe-east": region is empty`, ErrInvalid},
		{"cluster duplicate", sub("name: fe-eu,", "name: fe-east,"), `clusters[1]: cluster "fe-east" listed twice`, ErrInvalid},
		{"cluster bad name", sub("name: fe-eu,", "name: fe eu,"), `clusters[1]: "fe eu" contains ' '`, ErrInvalid},
		{"cluster reserved name", sub("name: fe-eu,", "name: manifest,"), `clusters[1]: cluster name "manifest" is reserved`, ErrInvalid},
		{"demand share negative", sub("demand_share: 0.4", "demand_share: -0.4"), `cluster "fe-eu": demand_share -0.4`, ErrInvalid},
		{"demand shares zero", strings.Replace(sub("demand_share: 0.4", "demand_share: 0"), "demand_share: 0.6", "demand_share: 0", 1), "demand shares sum to 0", ErrInvalid},
		{"no clusters", sub(clusterBlock, "clusters: []\n"), "no clusters", ErrInvalid},
		{"engine unknown region", sub("region: east-us\n    sku", "region: east-us2\n    sku"), `engine "east-h100-0": region "east-us2" does not appear in network_ms`, ErrInvalid},
		{"engine duplicate", sub("name: eu-h100-0", "name: east-h100-0"), `engines[1]: engine "east-h100-0" listed twice`, ErrInvalid},
		{"engine name space", sub("name: eu-h100-0", "name: 'eu-h100-0 '"), `engines[1]: name "eu-h100-0 " contains a space`, ErrInvalid},
		{"engine no name", sub("name: eu-h100-0", "name: ''"), "engines[1]: engine name is empty", ErrInvalid},
		{"no sku", sub("    sku: h100\n", ""), `engine "east-h100-0": sku is empty`, ErrInvalid},
		{"prefill zero", sub("prefill_tokens_per_s: 8700\n", "prefill_tokens_per_s: 0\n"), "prefill_tokens_per_s 0 must be finite and > 0", ErrInvalid},
		{"decode base nan", sub("base: 29.6, per_seq: 0.35}   #", "base: .nan, per_seq: 0.35}   #"), "decode_step_ms.base NaN", ErrInvalid},
		{"per seq negative", sub("per_seq: 0.35}   #", "per_seq: -0.35}   #"), "decode_step_ms.per_seq -0.35", ErrInvalid},
		{"max batch zero", sub("max_batch: 64\n", "max_batch: 0\n"), "max_batch 0 must be > 0", ErrInvalid},
		{"kv below a block", sub("kv_cache_tokens: 500000\n", "kv_cache_tokens: 100\n"), "kv_cache_tokens 100 must hold at least one block (512 tokens)", ErrInvalid},
		{"replicas negative", sub("max_batch: 64\n", "max_batch: 64\n    replicas: -2\n"), "replicas -2 must be > 0", ErrInvalid},
		{"scheduler unknown", sub("max_batch: 64\n", "max_batch: 64\n    scheduler: chunky\n"), `scheduler "chunky" must be chunked or whole`, ErrInvalid},
		{"budget below max batch", sub("max_batch: 64\n", "max_batch: 64\n    max_num_batched_tokens: 32\n"), "max_num_batched_tokens 32 must be 0 (the SKU's default) or at least max_batch 64", ErrInvalid},
		{"budget negative", sub("max_batch: 64\n", "max_batch: 64\n    max_num_batched_tokens: -1\n"), "max_num_batched_tokens -1", ErrInvalid},
		{"url relative", sub("max_batch: 64\n", "max_batch: 64\n    url: /v1\n"), `url "/v1" must be an absolute http or https URL`, ErrInvalid},
		{"url scheme", sub("max_batch: 64\n", "max_batch: 64\n    url: ftp://h:1\n"), `url "ftp://h:1" must be`, ErrInvalid},
		{"url unparsable", sub("max_batch: 64\n", "max_batch: 64\n    url: 'http://[::1'\n"), "url: parse", ErrInvalid},
		{"no engines", strings.Split(ok, "engines:")[0] + "engines: []\n", "no engines", ErrInvalid},
		{"network pair missing", sub("west-europe: {west-europe: 1}", "west-europe: {}"), `cluster "fe-eu" (region west-europe) has no eligible engine`, ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseFleet([]byte(tc.yaml))
			checkErr(t, err, tc.want, tc.sentinel)
			if f != nil {
				t.Fatal("got a fleet along with the error")
			}
		})
	}
}

func TestNetworkMsBetween(t *testing.T) {
	f := &Fleet{NetworkMs: map[string]map[string]float64{
		"a": {"a": 1, "b": 10},
		"b": {"a": 12},
		"c": {"a": 30},
	}}
	cases := []struct {
		from, to string
		ms       float64
		ok       bool
	}{
		{"a", "b", 10, true},  // given
		{"b", "a", 12, true},  // given, asymmetric
		{"a", "c", 30, true},  // reverse of c->a
		{"c", "a", 30, true},  // given
		{"a", "a", 1, true},   // diagonal given
		{"b", "b", 0, false},  // diagonal not given: not assumed
		{"b", "c", 0, false},  // neither direction
		{"x", "a", 0, false},  // unknown region
		{"", "", 0, false},    //
		{"c", "c", 0, false},  //
		{"b", "x", 0, false},  //
		{"a", "x", 0, false},  //
		{"x", "x", 0, false},  //
		{"c", "b", 0, false},  //
		{"x", "c", 0, false},  //
		{"c", "x", 0, false},  //
		{"b", "zz", 0, false}, //
	}
	for _, tc := range cases {
		ms, ok := f.NetworkMsBetween(tc.from, tc.to)
		if ms != tc.ms || ok != tc.ok {
			t.Errorf("NetworkMsBetween(%q, %q) = %v, %v; want %v, %v", tc.from, tc.to, ms, ok, tc.ms, tc.ok)
		}
	}
}

func TestEligible(t *testing.T) {
	f := &Fleet{NetworkMs: map[string]map[string]float64{"us": {"us": 1, "eu": 80}, "eu": {"eu": 1}, "ap": {"ap": 1}}}
	usEngine := FleetEngine{Name: "u", Region: "us", Residency: "us"}
	euEngine := FleetEngine{Name: "e", Region: "eu", Residency: "eu"}
	freeEngine := FleetEngine{Name: "f", Region: "eu"}
	apEngine := FleetEngine{Name: "a", Region: "ap"}
	cases := []struct {
		cluster FleetCluster
		engine  FleetEngine
		want    bool
	}{
		{FleetCluster{Region: "us"}, usEngine, true},
		{FleetCluster{Region: "us"}, euEngine, true}, // no residency: any engine in reach
		{FleetCluster{Region: "eu"}, usEngine, true}, // symmetric fallback eu->us
		{FleetCluster{Region: "us", Residency: "eu"}, euEngine, true},
		{FleetCluster{Region: "eu", Residency: "eu"}, usEngine, false},   // residency differs
		{FleetCluster{Region: "eu", Residency: "eu"}, freeEngine, false}, // engine has none
		{FleetCluster{Region: "us"}, apEngine, false},                    // no network pair
	}
	for _, tc := range cases {
		if got := f.Eligible(tc.cluster, tc.engine); got != tc.want {
			t.Errorf("Eligible(%+v, %+v) = %v, want %v", tc.cluster, tc.engine, got, tc.want)
		}
	}
}

func TestLoadFleet(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(path, []byte(designFleet+euEngine), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := LoadFleet(path)
	if err != nil || len(f.Engines) != 2 {
		t.Fatalf("LoadFleet = %v, %v", f, err)
	}
	if _, err := LoadFleet(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want os.ErrNotExist", err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("max_utilization: 2\n"+designFleet[len("max_utilization: 0.95\n"):]+euEngine), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = LoadFleet(bad)
	checkErr(t, err, "load fleet "+bad+": schemas: fleet: invalid: max_utilization 2", ErrInvalid)
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, make([]byte, MaxFleetBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = LoadFleet(big)
	checkErr(t, err, "larger than", ErrMalformed)
}

func TestEncodeFleetRoundTrip(t *testing.T) {
	f := ExampleFleet()
	data, err := EncodeFleet(f)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseFleet(data)
	if err != nil {
		t.Fatalf("encoded fleet does not parse: %v\n%s", err, data)
	}
	if !reflect.DeepEqual(back, f) {
		t.Fatalf("round trip changed the fleet:\n got %+v\nwant %+v", back, f)
	}
}

func FuzzParseFleet(f *testing.F) {
	f.Add(ExampleFleetYAML())
	f.Add([]byte(designFleet + euEngine))
	f.Add([]byte("a: &a [*a, *a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fl, err := ParseFleet(data)
		if err != nil {
			if fl != nil || !(errors.Is(err, ErrMalformed) || errors.Is(err, ErrInvalid)) {
				t.Fatalf("bad failure: %v, %v", fl, err)
			}
			return
		}
		enc, err := EncodeFleet(fl)
		if err != nil {
			t.Fatalf("parsed fleet does not encode: %v", err)
		}
		back, err := ParseFleet(enc)
		if err != nil {
			t.Fatalf("encoded fleet does not parse: %v\n%s", err, enc)
		}
		if !reflect.DeepEqual(back, fl) {
			t.Fatalf("round trip changed the fleet:\n got %+v\nwant %+v", back, fl)
		}
	})
}

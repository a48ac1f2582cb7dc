package optimize

import (
	"errors"
	"math"
	"os"
	"strings"
	"testing"
)

func talkJSON(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/talk.json")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseProblemTalk(t *testing.T) {
	p, err := ParseProblem(talkJSON(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Clusters) != 2 || len(p.Engines) != 3 || p.MaxUtilization != 0.95 ||
		p.Engines[2].TTFT.QueueMs != 40 || p.NetworkMs["fe-b"]["eng-c"] != 40 {
		t.Fatalf("parsed %+v", p)
	}
}

func TestParseProblemRejects(t *testing.T) {
	good := string(talkJSON(t))
	cases := []struct {
		name, json, want string
	}{
		{"bad JSON", `{"clusters": [`, "bad JSON"},
		{"not an object", `[1, 2]`, "bad JSON"},
		{"trailing data", good + ` {}`, "data after"},
		{"unknown field", strings.Replace(good, `"shed_penalty_ms"`, `"shed_penality_ms"`, 1), "unknown field"},
		{"negative demand", strings.Replace(good, `"demand_rps": 90`, `"demand_rps": -90`, 1), `"fe-a" demand_rps is negative`},
		{"negative capacity", strings.Replace(good, `"capacity_rps": 100`, `"capacity_rps": -1`, 1), "capacity_rps is negative"},
		{"negative network", strings.Replace(good, `"eng-a": 2`, `"eng-a": -2`, 1), `network_ms["fe-a"]["eng-a"] is negative`},
		{"huge number", strings.Replace(good, `"demand_rps": 90`, `"demand_rps": 1e300`, 1), "above the limit"},
		{"overflowing number", strings.Replace(good, `"demand_rps": 90`, `"demand_rps": 1e999`, 1), "bad JSON"},
		{"unknown engine", strings.Replace(good, `"eng-c": 80`, `"eng-z": 80`, 1), `unknown engine "eng-z"`},
		{"unknown cluster", strings.Replace(good, `"fe-b": {"eng-a"`, `"fe-z": {"eng-a"`, 1), `unknown cluster "fe-z"`},
		{"duplicate engine", strings.Replace(good, `"name": "eng-c"`, `"name": "eng-b"`, 1), `duplicate engine name "eng-b"`},
		{"duplicate cluster", strings.Replace(good, `"name": "fe-b"`, `"name": "fe-a"`, 1), `duplicate cluster name "fe-a"`},
		{"unnamed engine", strings.Replace(good, `"name": "eng-c"`, `"name": ""`, 1), "engines[2] has no name"},
		{"max_utilization 1.2", strings.Replace(good, `"max_utilization": 0.95`, `"max_utilization": 1.2`, 1), "max_utilization is 1.2"},
		{"max_utilization 1", strings.Replace(good, `"max_utilization": 0.95`, `"max_utilization": 1`, 1), "max_utilization is 1,"},
		{"max_utilization 0", strings.Replace(good, `"max_utilization": 0.95`, `"max_utilization": 0`, 1), "max_utilization is 0,"},
		{"negative shed penalty", strings.Replace(good, `"shed_penalty_ms": 60000`, `"shed_penalty_ms": -1`, 1), "shed_penalty_ms is negative"},
		{"no engines", `{"max_utilization": 0.9, "shed_penalty_ms": 1, "clusters": [{"name": "a", "demand_rps": 1}], "engines": []}`, "no engines"},
		{"no clusters", `{"max_utilization": 0.9, "shed_penalty_ms": 1, "engines": [{"name": "e", "capacity_rps": 1}]}`, "no clusters"},
		{"eligible unknown engine", strings.Replace(good, `"network_ms"`, `"eligible": {"fe-a": ["eng-q"]}, "network_ms"`, 1), `eligible["fe-a"]: unknown engine "eng-q"`},
		{"eligible unknown cluster", strings.Replace(good, `"network_ms"`, `"eligible": {"fe-q": []}, "network_ms"`, 1), `eligible: unknown cluster "fe-q"`},
		{"eligible twice", strings.Replace(good, `"network_ms"`, `"eligible": {"fe-a": ["eng-a", "eng-a"]}, "network_ms"`, 1), `"eng-a" listed twice`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseProblem([]byte(tc.json))
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line containing %q", msg, tc.want)
			}
		})
	}
}

func TestValidateRejectsNonFinite(t *testing.T) {
	// JSON cannot carry NaN or Inf, but the Go API can.
	p, err := ParseProblem(talkJSON(t))
	if err != nil {
		t.Fatal(err)
	}
	p.Engines[0].TBOT.SlopeMs = math.NaN()
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "not a finite number") {
		t.Fatalf("NaN slope: %v", err)
	}
	if _, err := Solve(p, DefaultOptions()); err == nil {
		t.Fatal("Solve accepted a NaN slope")
	}
}

func FuzzParseProblem(f *testing.F) {
	f.Add(talkJSON(f))
	if data, err := os.ReadFile("testdata/classes.json"); err == nil {
		f.Add(data) // demands and engine models
	}
	f.Add([]byte(`{"max_utilization": 0.5, "shed_penalty_ms": 10, "clusters": [{"name": "a", "demand_rps": 5}],
		"engines": [{"name": "e", "capacity_rps": 3, "ttft": {"base_ms": 1, "queue_ms": 2}}], "network_ms": {"a": {"e": 1}}}`))
	f.Add([]byte(`{"max_utilization": 0.9, "shed_penalty_ms": 1, "clusters": [{"name": "a", "demand_rps": 0}],
		"engines": [{"name": "e", "capacity_rps": 0}], "eligible": {"a": []}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseProblem(data)
		if err != nil {
			return
		}
		if len(p.Clusters) > 20 || len(p.Engines) > 20 {
			return // keep each fuzz input fast
		}
		sol, err := Solve(p, DefaultOptions())
		if err != nil {
			t.Fatalf("Solve on a valid problem: %v", err)
		}
		checkFeasible(t, p, sol, 1e-6)
	})
}

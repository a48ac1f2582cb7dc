package backtest

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Swing multiplies one cluster's arrivals by Factor during [From, To) of
// simulated time: a regional demand swing. A factor above 1 adds copies of
// the cluster's requests (new conversations with the same sizes, timing
// and turn structure, their block ids remapped so they share no cache
// with the originals); below 1 it drops whole conversations. Which
// conversations are copied or dropped is a deterministic function of the
// conversation key and the seed, the same for every policy.
type Swing struct {
	Cluster  string
	Factor   float64
	From, To time.Duration
}

// Failure takes an engine down at At of simulated time: its requests in
// flight fail, its KV cache is lost, and it rejects new requests until At
// plus For (For 0: for the rest of the run).
type Failure struct {
	Engine string
	At     time.Duration
	For    time.Duration
}

// maxSwingFactor bounds the copies a swing adds per request.
const maxSwingFactor = 16

// ParseSwing parses "cluster=NAME,factor=X,from=DUR,to=DUR".
func ParseSwing(s string) (Swing, error) {
	kv, err := parseKV(s, "cluster", "factor", "from", "to")
	if err != nil {
		return Swing{}, fmt.Errorf("--swing %q: %w", s, err)
	}
	sw := Swing{Cluster: kv["cluster"]}
	if sw.Factor, err = strconv.ParseFloat(kv["factor"], 64); err != nil || !(sw.Factor >= 0 && sw.Factor <= maxSwingFactor) {
		return Swing{}, fmt.Errorf("--swing %q: factor %q must be a number in [0, %d]", s, kv["factor"], maxSwingFactor)
	}
	if sw.From, err = parseDur(kv["from"]); err != nil {
		return Swing{}, fmt.Errorf("--swing %q: from: %w", s, err)
	}
	if sw.To, err = parseDur(kv["to"]); err != nil {
		return Swing{}, fmt.Errorf("--swing %q: to: %w", s, err)
	}
	if sw.To <= sw.From {
		return Swing{}, fmt.Errorf("--swing %q: to must be after from", s)
	}
	return sw, nil
}

// ParseFailure parses "engine=NAME,at=DUR[,for=DUR]".
func ParseFailure(s string) (Failure, error) {
	kv, err := parseKV(s, "engine", "at", "for?")
	if err != nil {
		return Failure{}, fmt.Errorf("--fail %q: %w", s, err)
	}
	f := Failure{Engine: kv["engine"]}
	if f.At, err = parseDur(kv["at"]); err != nil {
		return Failure{}, fmt.Errorf("--fail %q: at: %w", s, err)
	}
	if v, ok := kv["for"]; ok {
		if f.For, err = parseDur(v); err != nil || f.For == 0 {
			return Failure{}, fmt.Errorf("--fail %q: for must be a positive duration", s)
		}
	}
	return f, nil
}

// parseKV parses comma-separated key=value pairs; keys ending in ? are
// optional, the others required, and no other key is allowed.
func parseKV(s string, keys ...string) (map[string]string, error) {
	want := map[string]bool{}
	for _, k := range keys {
		want[strings.TrimSuffix(k, "?")] = true
	}
	out := map[string]string{}
	for part := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case !ok || v == "":
			return nil, fmt.Errorf("%q is not key=value", part)
		case !want[k]:
			return nil, fmt.Errorf("unknown key %q", k)
		case out[k] != "":
			return nil, fmt.Errorf("key %q given twice", k)
		}
		out[k] = v
	}
	for _, k := range keys {
		if _, ok := out[k]; !ok && !strings.HasSuffix(k, "?") {
			return nil, fmt.Errorf("missing %s=", k)
		}
	}
	return out, nil
}

// parseDur parses a Go duration ("90s", "5m") or plain seconds ("90").
func parseDur(s string) (time.Duration, error) {
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		s += "s"
		if !(v >= 0) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("%q is not a duration", s)
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > maxDuration {
		return 0, fmt.Errorf("%q is not a duration in [0, %v]", s, maxDuration)
	}
	return d, nil
}

// maxDuration bounds every duration of the simulation (100 days).
const maxDuration = 100 * 24 * time.Hour

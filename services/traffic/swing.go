package traffic

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Swing multiplies one cluster's demand by Factor during [From, To) of
// every period of length Every (once, when Every is 0), measured from the
// start of Run. Swings on the same cluster multiply.
type Swing struct {
	Cluster string
	Factor  float64
	From    time.Duration
	To      time.Duration
	Every   time.Duration
}

// maxSwingFactor bounds a swing: the arrival process draws candidates at
// the peak rate, so an absurd factor would only burn CPU.
const maxSwingFactor = 100

// DefaultSwing is `ilb dev`'s demand swing: the cluster with the largest
// demand share (the first on a tie) triples its demand from 60 s to 180 s
// of every 5 minutes, long enough for the optimizer to move weights and
// for the page to show them moving back.
func DefaultSwing(clusters []Cluster) (Swing, error) {
	if len(clusters) == 0 {
		return Swing{}, errors.New("traffic: default swing: no clusters")
	}
	best := clusters[0]
	for _, c := range clusters[1:] {
		if c.DemandShare > best.DemandShare {
			best = c
		}
	}
	return Swing{Cluster: best.Name, Factor: 3, From: time.Minute, To: 3 * time.Minute, Every: 5 * time.Minute}, nil
}

// Active reports whether s applies at elapsed time since the start.
func (s Swing) Active(elapsed time.Duration) bool {
	if elapsed < 0 {
		return false
	}
	if s.Every > 0 {
		elapsed %= s.Every
	}
	return elapsed >= s.From && elapsed < s.To
}

// String is the form ParseSwings reads: CLUSTER*FACTOR@FROM-TO[/EVERY].
func (s Swing) String() string {
	out := fmt.Sprintf("%s*%s@%s-%s", s.Cluster, strconv.FormatFloat(s.Factor, 'g', -1, 64), s.From, s.To)
	if s.Every > 0 {
		out += "/" + s.Every.String()
	}
	return out
}

// Multiplier is the product of the factors of the swings on cluster that
// are active at elapsed.
func Multiplier(swings []Swing, cluster string, elapsed time.Duration) float64 {
	m := 1.0
	for _, s := range swings {
		if s.Cluster == cluster && s.Active(elapsed) {
			m *= s.Factor
		}
	}
	return m
}

// peakMultiplier bounds Multiplier over all times: the product of the
// factors above 1.
func peakMultiplier(swings []Swing, cluster string) float64 {
	m := 1.0
	for _, s := range swings {
		if s.Cluster == cluster && s.Factor > 1 {
			m *= s.Factor
		}
	}
	return m
}

// ParseSwings reads a comma-separated list of swings, each
// CLUSTER*FACTOR@FROM-TO[/EVERY] with Go durations, e.g.
// "fe-east*3@60s-180s/5m" (fe-east triples from 60 s to 180 s of every 5
// minutes). An empty string is no swing.
func ParseSwings(text string) ([]Swing, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, nil
	}
	var out []Swing
	for part := range strings.SplitSeq(text, ",") {
		s, err := parseSwing(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("traffic: swing %q: %w (want CLUSTER*FACTOR@FROM-TO[/EVERY], e.g. fe-east*3@60s-180s/5m)", part, err)
		}
		out = append(out, s)
	}
	return out, nil
}

func parseSwing(text string) (Swing, error) {
	cluster, rest, ok := strings.Cut(text, "*")
	if !ok || cluster == "" {
		return Swing{}, errors.New("no CLUSTER*")
	}
	factor, window, ok := strings.Cut(rest, "@")
	if !ok {
		return Swing{}, errors.New("no @FROM-TO")
	}
	f, err := strconv.ParseFloat(factor, 64)
	if err != nil {
		return Swing{}, fmt.Errorf("factor %q is not a number", factor)
	}
	s := Swing{Cluster: cluster, Factor: f}
	window, every, repeat := strings.Cut(window, "/")
	if repeat {
		if s.Every, err = time.ParseDuration(every); err != nil {
			return Swing{}, fmt.Errorf("period: %w", err)
		}
	}
	from, to, ok := strings.Cut(window, "-")
	if !ok {
		return Swing{}, errors.New("no FROM-TO")
	}
	if s.From, err = time.ParseDuration(from); err != nil {
		return Swing{}, fmt.Errorf("from: %w", err)
	}
	if s.To, err = time.ParseDuration(to); err != nil {
		return Swing{}, fmt.Errorf("to: %w", err)
	}
	return s, s.validate()
}

func (s Swing) validate() error {
	switch {
	case !(s.Factor >= 0 && s.Factor <= maxSwingFactor) || math.IsNaN(s.Factor):
		return fmt.Errorf("factor %v must be in [0, %d]", s.Factor, maxSwingFactor)
	case s.From < 0 || s.To <= s.From:
		return fmt.Errorf("window %v-%v: want 0 <= FROM < TO", s.From, s.To)
	case s.Every < 0 || (s.Every > 0 && s.Every < s.To):
		return fmt.Errorf("period %v must be 0 (once) or at least TO (%v)", s.Every, s.To)
	}
	return nil
}

func validateSwings(swings []Swing, clusters []Cluster) error {
	for _, s := range swings {
		if !slices.ContainsFunc(clusters, func(c Cluster) bool { return c.Name == s.Cluster }) {
			return fmt.Errorf("swing %s: unknown cluster %q", s, s.Cluster)
		}
		if err := s.validate(); err != nil {
			return fmt.Errorf("swing %s: %w", s, err)
		}
	}
	return nil
}

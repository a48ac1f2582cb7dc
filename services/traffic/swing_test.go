package traffic

import (
	"strings"
	"testing"
	"time"
)

func TestParseSwings(t *testing.T) {
	cases := []struct {
		in   string
		want []Swing
		err  string
	}{
		{in: "", want: nil},
		{in: "fe-east*3@60s-180s/5m", want: []Swing{{"fe-east", 3, time.Minute, 3 * time.Minute, 5 * time.Minute}}},
		{in: " fe-east*0.5@0s-10s , fe-eu*2@1m-2m/2m", want: []Swing{
			{"fe-east", 0.5, 0, 10 * time.Second, 0}, {"fe-eu", 2, time.Minute, 2 * time.Minute, 2 * time.Minute}}},
		{in: "fe-east", err: "no CLUSTER*"},
		{in: "*3@1s-2s", err: "no CLUSTER*"},
		{in: "fe-east*3", err: "no @FROM-TO"},
		{in: "fe-east*x@1s-2s", err: "not a number"},
		{in: "fe-east*3@1s", err: "no FROM-TO"},
		{in: "fe-east*3@1q-2s", err: "from"},
		{in: "fe-east*3@1s-2q", err: "to"},
		{in: "fe-east*3@1s-2s/x", err: "period"},
		{in: "fe-east*3@2s-1s", err: "want 0 <= FROM < TO"},
		{in: "fe-east*3@-1s-2s", err: "from"},
		{in: "fe-east*3@1s-5s/4s", err: "at least TO"},
		{in: "fe-east*101@1s-2s", err: "must be in [0, 100]"},
		{in: "fe-east*NaN@1s-2s", err: "must be in [0, 100]"},
		{in: "fe-east*-1@1s-2s", err: "must be in [0, 100]"},
	}
	for _, c := range cases {
		got, err := ParseSwings(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseSwings(%q) error = %v, want it to mention %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseSwings(%q): %v", c.in, err)
			continue
		}
		if len(got) != len(c.want) {
			t.Errorf("ParseSwings(%q) = %v, want %v", c.in, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("ParseSwings(%q)[%d] = %+v, want %+v", c.in, i, got[i], c.want[i])
			}
		}
	}
}

func TestSwingActiveAndMultiplier(t *testing.T) {
	swings := []Swing{
		{"a", 3, time.Minute, 3 * time.Minute, 5 * time.Minute},
		{"a", 2, 2 * time.Minute, 4 * time.Minute, 0},
		{"b", 0.5, 0, time.Minute, 0},
	}
	cases := []struct {
		cluster string
		at      time.Duration
		want    float64
	}{
		{"a", -time.Second, 1},
		{"a", 0, 1},
		{"a", time.Minute, 3},
		{"a", 2*time.Minute + time.Second, 6},
		{"a", 3 * time.Minute, 2}, // To is exclusive
		{"a", 4 * time.Minute, 1},
		{"a", 6 * time.Minute, 3}, // second period; the once-only swing is over
		{"b", 30 * time.Second, 0.5},
		{"b", 90 * time.Second, 1},
		{"c", time.Minute, 1},
	}
	for _, c := range cases {
		if got := Multiplier(swings, c.cluster, c.at); got != c.want {
			t.Errorf("Multiplier(%s, %v) = %v, want %v", c.cluster, c.at, got, c.want)
		}
	}
	if got := peakMultiplier(swings, "a"); got != 6 {
		t.Errorf("peakMultiplier(a) = %v, want 6", got)
	}
	if got := peakMultiplier(swings, "b"); got != 1 {
		t.Errorf("peakMultiplier(b) = %v, want 1 (factors below 1 never raise the peak)", got)
	}
}

func TestDefaultSwingPicksLargestShare(t *testing.T) {
	s, err := DefaultSwing([]Cluster{{Name: "x", DemandShare: 0.2}, {Name: "y", DemandShare: 0.5}, {Name: "z", DemandShare: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Cluster != "y" || s.Factor <= 1 || s.Every < s.To {
		t.Fatalf("DefaultSwing = %+v, want a raise on y (largest share, first on a tie) that repeats", s)
	}
	if _, err := DefaultSwing(nil); err == nil {
		t.Fatal("DefaultSwing(nil) gave no error")
	}
	if err := s.validate(); err != nil {
		t.Fatalf("default swing invalid: %v", err)
	}
}

func FuzzParseSwings(f *testing.F) {
	for _, s := range []string{"fe-east*3@60s-180s/5m", "a*0@0s-1ns", "a*1@1h-2h,b*2@0s-1s/1s", "*@-/", "a*1e400@1s-2s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := ParseSwings(in)
		if err != nil {
			return
		}
		for _, s := range got {
			if err := s.validate(); err != nil {
				t.Fatalf("ParseSwings(%q) returned invalid %+v: %v", in, s, err)
			}
			again, err := ParseSwings(s.String())
			if err != nil || len(again) != 1 || again[0] != s {
				t.Fatalf("round trip of %+v via %q = %+v, %v", s, s.String(), again, err)
			}
		}
	})
}

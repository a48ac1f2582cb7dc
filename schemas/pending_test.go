package schemas

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPendingPrefillRoundTrip(t *testing.T) {
	in := &PendingPrefill{Source: "dp-1", Clusters: []string{"fe-east"}, Seq: 7,
		At: time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC), Engines: map[string]int64{"east-0": 12000, "west-1": 3}}
	b, err := EncodePendingPrefill(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"source":"dp-1","clusters":["fe-east"],"seq":7,"at":"2026-12-02T16:00:00Z","engines":{"east-0":12000,"west-1":3}}`
	if string(b) != want {
		t.Fatalf("encoded\n%s\nwant\n%s", b, want)
	}
	out, err := DecodePendingPrefill(b)
	if err != nil {
		t.Fatal(err)
	}
	if out.Source != in.Source || out.Seq != in.Seq || !out.At.Equal(in.At) || len(out.Engines) != 2 || out.Engines["east-0"] != 12000 {
		t.Fatalf("decoded %+v", out)
	}
	// Nothing pending: the engines field is left out and reads back empty.
	b, err = EncodePendingPrefill(&PendingPrefill{Source: "dp-1", Seq: 8})
	if err != nil || strings.Contains(string(b), "engines") {
		t.Fatalf("empty: %s, %v", b, err)
	}
	// Unknown fields are accepted.
	if _, err := DecodePendingPrefill([]byte(`{"source":"a","seq":1,"at":"2026-12-02T16:00:00Z","new":true}`)); err != nil {
		t.Fatalf("unknown field: %v", err)
	}
}

func TestPendingPrefillRejects(t *testing.T) {
	for name, in := range map[string]string{
		"not an object":    `[1]`,
		"null":             `null`,
		"not JSON":         `{"source":`,
		"no source":        `{"seq":1}`,
		"seq 0":            `{"source":"a","seq":0}`,
		"negative tokens":  `{"source":"a","seq":1,"engines":{"e":-1}}`,
		"empty engine":     `{"source":"a","seq":1,"engines":{"":5}}`,
		"bad cluster":      `{"source":"a","seq":1,"clusters":["a b"]}`,
		"tokens not a num": `{"source":"a","seq":1,"engines":{"e":"x"}}`,
		"trailing data":    `{"source":"a","seq":1} {}`,
	} {
		if _, err := DecodePendingPrefill([]byte(in)); err == nil {
			t.Errorf("%s: %s decoded", name, in)
		} else if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v is neither ErrInvalid nor ErrMalformed", name, err)
		}
	}
	big := make([]byte, MaxPendingBytes+1)
	if _, err := DecodePendingPrefill(big); !errors.Is(err, ErrMalformed) {
		t.Errorf("oversized message: %v", err)
	}
}

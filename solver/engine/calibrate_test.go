package engine

import (
	"encoding/csv"
	"errors"
	"math"
	"os"
	"strconv"
	"testing"
)

// readSplitwise parses the trimmed SplitwiseSim measurements into samples
// per hardware name.
func readSplitwise(t *testing.T) map[string][]PerfSample {
	t.Helper()
	f, err := os.Open("testdata/splitwise_llama2-70b_tp4.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	num := func(row []string, name string) float64 {
		x, err := strconv.ParseFloat(row[col[name]], 64)
		if err != nil {
			t.Fatalf("column %s: %v", name, err)
		}
		return x
	}
	out := map[string][]PerfSample{}
	for _, row := range rows[1:] {
		out[row[col["hardware"]]] = append(out[row[col["hardware"]]], PerfSample{
			PromptTokens: int(num(row, "prompt_size")),
			BatchSize:    int(num(row, "batch_size")),
			PromptMs:     num(row, "prompt_time"),
			TokenMs:      num(row, "token_time"),
		})
	}
	return out
}

// TestDefaultParamsMatchMeasurements re-derives DefaultParams from the
// measured timings, so that the constants cannot drift from their source.
func TestDefaultParamsMatchMeasurements(t *testing.T) {
	data := readSplitwise(t)
	for _, sku := range []string{"h100", "a100"} {
		samples := data[sku+"-80gb"]
		if len(samples) != 105 {
			t.Fatalf("%s: %d samples in testdata, want 105", sku, len(samples))
		}
		c, err := Calibrate(samples)
		if err != nil {
			t.Fatal(err)
		}
		p, ok := DefaultParams(sku)
		if !ok {
			t.Fatalf("DefaultParams(%q) missing", sku)
		}
		t.Logf("%s: prefill %.1f tok/s (R2 %.3f), decode %.3f + %.4f*b ms (R2 %.3f)",
			sku, c.PrefillTokensPerS, c.PrefillR2, c.DecodeBaseMs, c.DecodePerSeqMs, c.DecodeR2)
		for _, f := range []struct {
			name          string
			fitted, given float64
		}{
			{"prefill_tokens_per_s", c.PrefillTokensPerS, p.PrefillTokensPerS},
			{"decode base ms", c.DecodeBaseMs, p.DecodeBaseMs},
			{"decode per_seq ms", c.DecodePerSeqMs, p.DecodePerSeqMs},
		} {
			if math.Abs(f.fitted-f.given) > 5e-4*f.fitted { // the constants keep 4 significant digits
				t.Errorf("%s %s: default %v, fitted %v", sku, f.name, f.given, f.fitted)
			}
		}
		if c.PrefillR2 < 0.95 || c.DecodeR2 < 0.6 {
			t.Errorf("%s: the linear model fits poorly: %+v", sku, c)
		}
		if err := p.Validate(); err != nil {
			t.Error(err)
		}
	}
	if _, ok := DefaultParams("tpu-v5"); ok {
		t.Error("DefaultParams accepted an unknown SKU")
	}
}

func TestCalibrateKnownAnswer(t *testing.T) {
	// Exact model: prefill 5000 tok/s, decode 10 + 0.5*b ms.
	var s []PerfSample
	for _, b := range []int{1, 2, 4, 8} {
		for _, n := range []int{100, 1000} {
			s = append(s, PerfSample{PromptTokens: n, BatchSize: b, PromptMs: float64(n*b) / 5, TokenMs: 10 + 0.5*float64(b)})
		}
	}
	c, err := Calibrate(s)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(c.PrefillTokensPerS-5000) > 1e-9 || math.Abs(c.DecodeBaseMs-10) > 1e-9 ||
		math.Abs(c.DecodePerSeqMs-0.5) > 1e-9 || math.Abs(c.DecodeR2-1) > 1e-12 {
		t.Fatalf("Calibrate = %+v, want 5000 tok/s, 10 + 0.5*b ms, R2 1", c)
	}
	p := c.Params(testParams())
	if p.PrefillTokensPerS != c.PrefillTokensPerS || p.MaxBatch != testParams().MaxBatch {
		t.Fatalf("Calibration.Params = %+v", p)
	}
}

func TestCalibrateRejectsBadSamples(t *testing.T) {
	ok := PerfSample{PromptTokens: 10, BatchSize: 1, PromptMs: 1, TokenMs: 1}
	for _, s := range [][]PerfSample{
		nil,
		{ok, ok}, // one batch size
		{ok, {PromptTokens: 10, BatchSize: 2, PromptMs: -1, TokenMs: 1}},
		{ok, {PromptTokens: 10, BatchSize: 2, PromptMs: math.NaN(), TokenMs: 1}},
		{{PromptTokens: 10, BatchSize: 1, PromptMs: 1, TokenMs: 30}, {PromptTokens: 10, BatchSize: 2, PromptMs: 1, TokenMs: 10}}, // negative slope
	} {
		if _, err := Calibrate(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("Calibrate(%+v) = %v, want ErrInvalid", s, err)
		}
	}
}

package engine

import (
	"fmt"

	"gonum.org/v1/gonum/stat"
)

// PerfSample is one timing measured on a real engine: a batch of BatchSize
// prompts of PromptTokens each prefilled in PromptMs, then decoded at
// TokenMs per step.
type PerfSample struct {
	PromptTokens int
	BatchSize    int
	PromptMs     float64
	TokenMs      float64
}

// Calibration is the engine timing fitted from PerfSamples.
type Calibration struct {
	PrefillTokensPerS float64
	DecodeBaseMs      float64
	DecodePerSeqMs    float64
	// PrefillR2 and DecodeR2 are the coefficients of determination of the
	// two fits, for judging how well the linear model holds.
	PrefillR2 float64
	DecodeR2  float64
	Samples   int
}

// Calibrate fits the engine model to measured samples. Prefill time is
// taken as proportional to the batch's prompt tokens (a least-squares line
// through the origin, matching Params with PrefillOverheadMs 0); decode
// step time as DecodeBaseMs + DecodePerSeqMs*batch (ordinary least
// squares). It needs at least two distinct batch sizes.
func Calibrate(samples []PerfSample) (Calibration, error) {
	if err := checkSamples(samples); err != nil {
		return Calibration{}, err
	}
	tokens := make([]float64, len(samples))
	promptMs := make([]float64, len(samples))
	batch := make([]float64, len(samples))
	tokenMs := make([]float64, len(samples))
	for i, s := range samples {
		tokens[i] = float64(s.PromptTokens) * float64(s.BatchSize)
		promptMs[i] = s.PromptMs
		batch[i] = float64(s.BatchSize)
		tokenMs[i] = s.TokenMs
	}
	_, msPerToken := stat.LinearRegression(tokens, promptMs, nil, true)
	base, perSeq := stat.LinearRegression(batch, tokenMs, nil, false)
	c := Calibration{
		PrefillTokensPerS: 1000 / msPerToken,
		DecodeBaseMs:      base,
		DecodePerSeqMs:    perSeq,
		PrefillR2:         stat.RSquared(tokens, promptMs, nil, 0, msPerToken),
		DecodeR2:          stat.RSquared(batch, tokenMs, nil, base, perSeq),
		Samples:           len(samples),
	}
	if !positive(c.PrefillTokensPerS) || !nonNegative(c.DecodeBaseMs) || !nonNegative(c.DecodePerSeqMs) {
		return Calibration{}, fmt.Errorf("%w: calibration gives prefill %v tok/s, decode %v + %v*b ms; the samples do not fit the model",
			ErrInvalid, c.PrefillTokensPerS, c.DecodeBaseMs, c.DecodePerSeqMs)
	}
	return c, nil
}

func checkSamples(samples []PerfSample) error {
	distinct := false
	for i, s := range samples {
		if s.PromptTokens < 1 || s.BatchSize < 1 || !positive(s.PromptMs) || !positive(s.TokenMs) {
			return fmt.Errorf("%w: calibration sample %d %+v: counts and times must be positive", ErrInvalid, i, s)
		}
		if s.PromptTokens > maxTokens || s.BatchSize > maxTokens {
			return fmt.Errorf("%w: calibration sample %d %+v: counts over 2^30", ErrInvalid, i, s)
		}
		distinct = distinct || s.BatchSize != samples[0].BatchSize
	}
	if !distinct {
		return fmt.Errorf("%w: calibration needs samples at two or more batch sizes, got %d samples", ErrInvalid, len(samples))
	}
	return nil
}

// Params returns p with the calibrated timings copied in. It is a helper
// for building a Params from a fitted engine; sizes are left as they were.
func (c Calibration) Params(p Params) Params {
	p.PrefillTokensPerS = c.PrefillTokensPerS
	p.PrefillOverheadMs = 0
	p.DecodeBaseMs = c.DecodeBaseMs
	p.DecodePerSeqMs = c.DecodePerSeqMs
	return p
}

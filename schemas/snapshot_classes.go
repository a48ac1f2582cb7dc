package schemas

import (
	"errors"
	"fmt"
)

// MaxSnapshotClasses bounds Snapshot.Classes, so that a bad snapshot
// cannot make a data plane build tables without limit.
const MaxSnapshotClasses = 4096

// validateClasses checks each class like the top level (weights summing
// to 1 − shed fraction, a consistent table), a valid band, and that no
// (model, band) appears twice.
func validateClasses(classes []SnapshotClass) error {
	if len(classes) > MaxSnapshotClasses {
		return fmt.Errorf("classes: %d, at most %d", len(classes), MaxSnapshotClasses)
	}
	type id struct {
		model string
		max   int
	}
	seen := make(map[id]bool, len(classes))
	for i := range classes {
		k := &classes[i]
		if err := k.validate(); err != nil {
			return fmt.Errorf("classes[%d] (%s): %w", i, k.key(), err)
		}
		if seen[id{k.Model, k.MaxPromptTokens}] {
			return fmt.Errorf("classes[%d] (%s): listed twice", i, k.key())
		}
		seen[id{k.Model, k.MaxPromptTokens}] = true
	}
	return nil
}

func (k *SnapshotClass) key() string {
	return ModelClass{Model: k.Model, MinPromptTokens: k.MinPromptTokens, MaxPromptTokens: k.MaxPromptTokens}.Key()
}

func (k *SnapshotClass) validate() error {
	if k.Model != "" {
		if err := checkText("model", k.Model, MaxNameLen); err != nil {
			return err
		}
	}
	switch {
	case k.MinPromptTokens < 0 || k.MaxPromptTokens < 0:
		return errors.New("prompt token bounds must be >= 0")
	case k.MaxPromptTokens > 0 && k.MinPromptTokens >= k.MaxPromptTokens:
		return fmt.Errorf("min_prompt_tokens %d must be below max_prompt_tokens %d", k.MinPromptTokens, k.MaxPromptTokens)
	}
	if err := checkFraction("shed_fraction", k.ShedFraction); err != nil {
		return err
	}
	if err := validateWeights(k.Weights, k.ShedFraction); err != nil {
		return err
	}
	if k.Table != nil {
		return k.Table.Validate()
	}
	return nil
}

package schemas

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/bits"
	"slices"
	"strings"
)

// WeightSumTolerance is how far the sum of a snapshot's weights may be
// from 1 - ShedFraction.
const WeightSumTolerance = 1e-6

// MaxTableSlots bounds SnapshotTable.Slots, so a bad snapshot cannot make
// a data plane allocate without limit.
const MaxTableSlots = 1 << 20 // = solver/sched.MaxSlots; schemas imports nothing of ours, so kept equal by hand

// Table encodings known to this version. The encoding is implemented by
// solver/sched; schemas only carries it.
const TableEncodingRLEUvarintV1 = "rle-uvarint-v1"

// Validate checks a snapshot before it is published or served: version
// > 0, a valid cluster name, weights for non-empty engine names each in
// [0, 1], shed fraction in [0, 1], weights summing to 1 - shed fraction
// within WeightSumTolerance, and a consistent table if one is present.
func (s *Snapshot) Validate() error {
	if err := s.validate(); err != nil {
		return fmt.Errorf("schemas: snapshot: %w: %w", ErrInvalid, err)
	}
	return nil
}

func (s *Snapshot) validate() error {
	if s.Version == 0 {
		return errors.New("version must be > 0")
	}
	if err := ValidClusterName(s.Cluster); err != nil {
		return err
	}
	if err := checkFraction("shed_fraction", s.ShedFraction); err != nil {
		return err
	}
	if err := validateWeights(s.Weights, s.ShedFraction); err != nil {
		return err
	}
	if err := validateLimits("queue_limits", s.QueueLimits); err != nil {
		return err
	}
	if err := validateLimits("prefill_limits", s.PrefillLimits); err != nil {
		return err
	}
	if s.Table != nil {
		if err := s.Table.Validate(); err != nil {
			return err
		}
	}
	return validateClasses(s.Classes)
}

// validateLimits checks every limit of field is a finite number >= 0
// for a named engine, in sorted order.
func validateLimits(field string, limits map[string]float64) error {
	for _, e := range slices.Sorted(maps.Keys(limits)) {
		if e == "" {
			return fmt.Errorf("%s: empty engine name", field)
		}
		if v := limits[e]; !(v >= 0) || math.IsInf(v, 1) {
			return fmt.Errorf("%s[%s] %v must be finite and >= 0", field, e, v)
		}
	}
	return nil
}

// validateWeights walks engines in sorted order so that the first error
// reported, and the floating-point sum, do not depend on map order.
func validateWeights(weights map[string]float64, shed float64) error {
	var sum float64
	for _, engine := range sortedKeys(weights) {
		w := weights[engine]
		if engine == "" {
			return errors.New("weights: empty engine name")
		}
		if err := checkFraction("weights["+engine+"]", w); err != nil {
			return err
		}
		sum += w
	}
	if math.Abs(sum-(1-shed)) > WeightSumTolerance {
		return fmt.Errorf("weights sum to %v, want 1 - shed_fraction = %v", sum, 1-shed)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Validate checks the table: slots a power of two in [1, MaxTableSlots],
// an encoding name, unique non-empty engine names and some data. For
// TableEncodingRLEUvarintV1 it also checks that Data is well formed: runs
// of known engine indexes covering exactly Slots slots. Other encodings
// (from a newer optimizer) pass with the framing checks only; the data
// plane falls back to building its own table when it cannot read one.
func (t *SnapshotTable) Validate() error {
	if err := t.validateFraming(); err != nil {
		return err
	}
	if t.Encoding == TableEncodingRLEUvarintV1 {
		return checkRLEUvarint(t.Data, t.Slots, len(t.Engines))
	}
	return nil
}

// checkRLEUvarint walks (engine index, run length) uvarint pairs.
func checkRLEUvarint(data []byte, slots, engines int) error {
	covered := 0
	for len(data) > 0 {
		idx, n := binary.Uvarint(data)
		if n <= 0 {
			return fmt.Errorf("table: %s: bad engine index varint at slot %d", TableEncodingRLEUvarintV1, covered)
		}
		data = data[n:]
		run, m := binary.Uvarint(data)
		if m <= 0 {
			return fmt.Errorf("table: %s: bad or missing run length after index %d", TableEncodingRLEUvarintV1, idx)
		}
		data = data[m:]
		switch {
		case idx >= uint64(engines):
			return fmt.Errorf("table: %s: engine index %d, only %d engines", TableEncodingRLEUvarintV1, idx, engines)
		case run == 0 || run > uint64(slots-covered):
			return fmt.Errorf("table: %s: run of %d at slot %d overflows %d slots", TableEncodingRLEUvarintV1, run, covered, slots)
		}
		covered += int(run)
	}
	if covered != slots {
		return fmt.Errorf("table: %s: runs cover %d of %d slots", TableEncodingRLEUvarintV1, covered, slots)
	}
	return nil
}

func (t *SnapshotTable) validateFraming() error {
	switch {
	case t.Slots <= 0 || t.Slots > MaxTableSlots || bits.OnesCount(uint(t.Slots)) != 1:
		return fmt.Errorf("table: slots %d must be a power of two in [1, %d]", t.Slots, MaxTableSlots)
	case strings.TrimSpace(t.Encoding) == "":
		return errors.New("table: encoding is empty")
	case len(t.Engines) == 0:
		return errors.New("table: no engines")
	case len(t.Data) == 0:
		return errors.New("table: data is empty")
	}
	seen := make(map[string]bool, len(t.Engines))
	for i, e := range t.Engines {
		if e == "" {
			return fmt.Errorf("table: engines[%d] is empty", i)
		}
		if seen[e] {
			return fmt.Errorf("table: engine %q listed twice", e)
		}
		seen[e] = true
	}
	return nil
}

// DecodeSnapshot parses a snapshot from JSON and validates it. Unknown
// fields are accepted (newer optimizers may add some); anything after the
// JSON object is an error.
func DecodeSnapshot(data []byte) (*Snapshot, error) {
	var s Snapshot
	if err := decodeJSON(data, &s); err != nil {
		return nil, fmt.Errorf("schemas: decode snapshot: %w", err)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	// Empty optional lists read as absent, as they encode (omitempty).
	if len(s.Classes) == 0 {
		s.Classes = nil
	}
	if len(s.QueueLimits) == 0 {
		s.QueueLimits = nil
	}
	if len(s.PrefillLimits) == 0 {
		s.PrefillLimits = nil
	}
	return &s, nil
}

// EncodeSnapshot validates s and returns its JSON. Map keys come out
// sorted, so equal snapshots encode to equal bytes.
func EncodeSnapshot(s *Snapshot) ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("schemas: encode snapshot: %w", err)
	}
	return b, nil
}

// decodeJSON is json.Unmarshal, which already rejects trailing data, with
// a requirement that the top-level value is an object (so "null" or "[]"
// are malformed rather than silently empty).
func decodeJSON(data []byte, v any) error {
	if !bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("{")) {
		return fmt.Errorf("%w: want a JSON object", ErrMalformed)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return nil
}

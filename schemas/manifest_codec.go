package schemas

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Validate checks a manifest: version > 0, at least one cluster, valid
// cluster names, and every cluster's version in [1, Version].
func (m *Manifest) Validate() error {
	if err := m.validate(); err != nil {
		return fmt.Errorf("schemas: manifest: %w: %w", ErrInvalid, err)
	}
	return nil
}

func (m *Manifest) validate() error {
	if m.Version == 0 {
		return errors.New("version must be > 0")
	}
	if len(m.Clusters) == 0 {
		return errors.New("no clusters")
	}
	for _, c := range sortedKeys(m.Clusters) {
		if err := ValidClusterName(c); err != nil {
			return err
		}
		if v := m.Clusters[c]; v == 0 || v > m.Version {
			return fmt.Errorf("cluster %q at version %d, want 1..%d", c, v, m.Version)
		}
	}
	return nil
}

// DecodeManifest parses a manifest from JSON and validates it. Unknown
// fields are accepted; trailing data is an error.
func DecodeManifest(data []byte) (*Manifest, error) {
	var m Manifest
	if err := decodeJSON(data, &m); err != nil {
		return nil, fmt.Errorf("schemas: decode manifest: %w", err)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// EncodeManifest validates m and returns its JSON (map keys sorted).
func EncodeManifest(m *Manifest) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("schemas: encode manifest: %w", err)
	}
	return b, nil
}

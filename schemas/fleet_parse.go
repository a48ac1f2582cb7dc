package schemas

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"go.yaml.in/yaml/v3"
)

// Defaults filled in by ApplyDefaults (and so by ParseFleet) for fields
// that are zero or absent.
const (
	DefaultMaxUtilization   = 0.95
	DefaultBlockTokens      = 512
	DefaultTTFTSLOMs        = 2000
	DefaultTBOTSLOMs        = 100
	DefaultMeanOutputTokens = 200
	DefaultReplicas         = 1
	DefaultScheduler        = SchedulerChunked
)

// The values of FleetEngine.Scheduler.
const (
	SchedulerChunked = "chunked"
	SchedulerWhole   = "whole"
)

// MaxFleetBytes bounds the size of a fleet file.
const MaxFleetBytes = 8 << 20

// LoadFleet reads, parses and validates the fleet file at path.
func LoadFleet(path string) (*Fleet, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("schemas: load fleet: %w", err)
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, MaxFleetBytes+1))
	if err != nil {
		return nil, fmt.Errorf("schemas: load fleet %s: %w", path, err)
	}
	if len(data) > MaxFleetBytes {
		return nil, fmt.Errorf("schemas: load fleet %s: %w: larger than %d bytes", path, ErrMalformed, MaxFleetBytes)
	}
	f, err := ParseFleet(data)
	if err != nil {
		return nil, fmt.Errorf("load fleet %s: %w", path, err)
	}
	return f, nil
}

// ParseFleet parses a fleet file (one YAML document), applies defaults and
// validates the result. Unknown fields are errors that name the field and
// line: a misspelt key must not silently fall back to a default.
func ParseFleet(data []byte) (*Fleet, error) {
	f, err := decodeFleetYAML(data)
	if err != nil {
		return nil, fmt.Errorf("schemas: parse fleet: %w: %w", ErrMalformed, err)
	}
	f.ApplyDefaults()
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return f, nil
}

// decodeFleetYAML decodes one YAML document in two passes over data:
// first to a node tree, where integer fields are checked (yaml.v3 would
// silently truncate "max_batch: 64.5" to 64), then to a Fleet with unknown
// fields rejected (only a Decoder offers that, not Node.Decode). Fleet
// files are small; the second parse costs nothing that matters, and error
// line numbers stay those of the file.
func decodeFleetYAML(data []byte) (*Fleet, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty file")
		}
		return nil, err
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one YAML document")
	}
	if err := checkIntegerFields(&doc); err != nil {
		return nil, err
	}
	if err := checkModelNodes(&doc); err != nil {
		return nil, err
	}
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	var f Fleet
	if err := strict.Decode(&f); err != nil {
		return nil, err
	}
	return &f, nil
}

// integerFields are the fleet's int-typed YAML keys.
var integerFields = map[string]bool{"block_tokens": true, "max_batch": true, "kv_cache_tokens": true, "replicas": true,
	"max_num_batched_tokens": true, "max_context_tokens": true}

func checkIntegerFields(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if integerFields[k.Value] && v.Kind == yaml.ScalarNode && v.ShortTag() == "!!float" {
				return fmt.Errorf("line %d: %s: %s is not an integer", v.Line, k.Value, v.Value)
			}
		}
	}
	for _, c := range n.Content {
		if err := checkIntegerFields(c); err != nil {
			return err
		}
	}
	return nil
}

// ApplyDefaults fills zero fields with their defaults (DefaultXxx).
// Negative values are left for Validate to reject.
func (f *Fleet) ApplyDefaults() {
	setDefault(&f.MaxUtilization, DefaultMaxUtilization)
	setDefault(&f.BlockTokens, DefaultBlockTokens)
	setDefault(&f.TTFTSLOMs, DefaultTTFTSLOMs)
	setDefault(&f.TBOTSLOMs, DefaultTBOTSLOMs)
	setDefault(&f.MeanOutputTokens, DefaultMeanOutputTokens)
	for i := range f.Clusters {
		if len(f.Clusters[i].ModelShares) == 0 {
			f.Clusters[i].ModelShares = nil // "model_shares: {}" is no shares
		}
	}
	for i := range f.Engines {
		setDefault(&f.Engines[i].Replicas, DefaultReplicas)
		if f.Engines[i].Scheduler == "" {
			f.Engines[i].Scheduler = DefaultScheduler
		}
	}
}

func setDefault[T int | float64](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

// EncodeFleet returns f as YAML (defaults included), after validating it.
func EncodeFleet(f *Fleet) ([]byte, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(f); err != nil {
		return nil, fmt.Errorf("schemas: encode fleet: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("schemas: encode fleet: %w", err)
	}
	return buf.Bytes(), nil
}

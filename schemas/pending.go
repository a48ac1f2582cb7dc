package schemas

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// SubjectPending is the NATS subject on which data planes share their
// pending prefill (PendingPrefill), core NATS, not JetStream: a message
// lost or late is replaced by the next.
const SubjectPending = "ilb.dataplane.pending"

// MaxPendingEngines bounds the engines one PendingPrefill may list, and
// MaxPendingBytes its encoded size, so that a bad publisher cannot make
// every data plane allocate without limit.
const (
	MaxPendingEngines = 1 << 16
	MaxPendingBytes   = 4 << 20
)

// PendingPrefill is what one data plane process has sent to engines and
// not yet seen answered: the prompt tokens (estimated) still waiting for
// or in prefill, by engine. Data planes publish it every
// `--pending-sync` on SubjectPending and add the other processes'
// figures to the load they compare engines on, so that a prompt another
// front end sent a moment ago counts before the engine's next status
// (services/dataplane README, "Pending prefill"). The JSON field names
// are a public contract.
type PendingPrefill struct {
	// Source identifies the publishing process; unique per process (a
	// data plane ignores its own messages).
	Source string `json:"source"`
	// Clusters are the front-end clusters the process serves, for
	// operators reading the subject.
	Clusters []string `json:"clusters,omitempty"`
	// Seq increases with every message of a Source; a message with a Seq
	// no greater than the last one taken from its Source is stale.
	Seq uint64 `json:"seq"`
	// At is when the figures were read, by the publisher's clock.
	At time.Time `json:"at"`
	// Engines maps an engine name to its pending prompt tokens; engines
	// with none are left out, so an empty map says "nothing pending".
	Engines map[string]int64 `json:"engines,omitempty"`
}

// Validate checks a PendingPrefill: a source of at most MaxNameLen bytes,
// a sequence number > 0, at most MaxPendingEngines engines with non-empty
// names of at most MaxNameLen bytes and non-negative token counts.
func (p *PendingPrefill) Validate() error {
	if err := p.validate(); err != nil {
		return fmt.Errorf("schemas: pending prefill: %w: %w", ErrInvalid, err)
	}
	return nil
}

func (p *PendingPrefill) validate() error {
	switch {
	case p.Source == "" || len(p.Source) > MaxNameLen:
		return fmt.Errorf("source %q must have 1 to %d bytes", p.Source, MaxNameLen)
	case p.Seq == 0:
		return errors.New("seq must be > 0")
	case len(p.Engines) > MaxPendingEngines:
		return fmt.Errorf("%d engines, at most %d", len(p.Engines), MaxPendingEngines)
	}
	for _, c := range p.Clusters {
		if err := ValidClusterName(c); err != nil {
			return err
		}
	}
	for name, tok := range p.Engines {
		if name == "" || len(name) > MaxNameLen {
			return fmt.Errorf("engine name %q must have 1 to %d bytes", name, MaxNameLen)
		}
		if tok < 0 {
			return fmt.Errorf("engines[%s] = %d tokens, must be >= 0", name, tok)
		}
	}
	return nil
}

// DecodePendingPrefill parses a PendingPrefill from JSON and validates
// it. Unknown fields are accepted (newer data planes may add some).
func DecodePendingPrefill(data []byte) (*PendingPrefill, error) {
	if len(data) > MaxPendingBytes {
		return nil, fmt.Errorf("schemas: decode pending prefill: %w: %d bytes, at most %d", ErrMalformed, len(data), MaxPendingBytes)
	}
	var p PendingPrefill
	if err := decodeJSON(data, &p); err != nil {
		return nil, fmt.Errorf("schemas: decode pending prefill: %w", err)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// EncodePendingPrefill validates p and returns its JSON (map keys
// sorted).
func EncodePendingPrefill(p *PendingPrefill) ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("schemas: encode pending prefill: %w", err)
	}
	return b, nil
}

package enginesim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Fault changes how an engine behaves. Nil fields are left as they are.
// With Duration > 0 the fields it set go back, after that much wall-clock
// time, to the values they had just before; a later fault touching the
// same field is undone by its own revert, so overlapping faults unwind in
// the order their durations end.
type Fault struct {
	// Slowdown multiplies every iteration's duration (1 is normal).
	Slowdown *float64
	// ErrorRate fails each request with this probability, at admission,
	// with HTTP 500 (0 turns it off).
	ErrorRate *float64
	// Healthy false makes the engine reject new requests with 503 and
	// report itself unhealthy; requests already accepted still finish.
	Healthy *bool
	// ReadyReplicas sets how many of the engine's replicas serve (0 to
	// its total). With none, new requests get 503.
	ReadyReplicas *int
	Duration      time.Duration
}

// faultJSON is the body of POST /engines/NAME/fault.
type faultJSON struct {
	Slowdown      *float64 `json:"slowdown"`
	ErrorRate     *float64 `json:"error_rate"`
	Healthy       *bool    `json:"healthy"`
	ReadyReplicas *int     `json:"ready_replicas"`
	Duration      string   `json:"duration"` // a Go duration, "30s"
	Reset         bool     `json:"reset"`    // back to no fault first
}

// parseFault decodes a fault request body; reset asks for every fault
// to be cleared before this one applies.
func parseFault(body []byte) (f Fault, reset bool, err error) {
	var j faultJSON
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return Fault{}, false, fmt.Errorf("invalid fault JSON: %w", err)
	}
	f = Fault{Slowdown: j.Slowdown, ErrorRate: j.ErrorRate, Healthy: j.Healthy, ReadyReplicas: j.ReadyReplicas}
	if j.Duration != "" {
		if f.Duration, err = time.ParseDuration(j.Duration); err != nil {
			return Fault{}, false, fmt.Errorf("invalid duration: %w", err)
		}
	}
	return f, j.Reset, f.validate(-1)
}

// maxSlowdown matches the engine model's bound.
const maxSlowdown = 1e6

// validate checks f; totalReplicas < 0 skips the replica bound.
func (f Fault) validate(totalReplicas int) error {
	switch {
	case f.Slowdown != nil && !(*f.Slowdown > 0 && *f.Slowdown <= maxSlowdown):
		return fmt.Errorf("slowdown %v must be in (0, %v]", *f.Slowdown, float64(maxSlowdown))
	case f.ErrorRate != nil && !(*f.ErrorRate >= 0 && *f.ErrorRate <= 1):
		return fmt.Errorf("error_rate %v must be in [0, 1]", *f.ErrorRate)
	case f.ReadyReplicas != nil && *f.ReadyReplicas < 0:
		return fmt.Errorf("ready_replicas %d must be >= 0", *f.ReadyReplicas)
	case f.ReadyReplicas != nil && totalReplicas >= 0 && *f.ReadyReplicas > totalReplicas:
		return fmt.Errorf("ready_replicas %d must be <= the engine's %d replicas", *f.ReadyReplicas, totalReplicas)
	case f.Duration < 0:
		return fmt.Errorf("duration %v is negative", f.Duration)
	}
	return nil
}

// ErrUnknownEngine is returned for an engine the Sim does not run.
var ErrUnknownEngine = errors.New("enginesim: unknown engine")

// ErrNotRunning is returned by InjectFault when Run is not running.
var ErrNotRunning = errors.New("enginesim: not running")

// faultState is an engine's current fault settings.
type faultState struct {
	slowdown  float64
	errorRate float64
	healthy   bool
	ready     int
}

// apply returns the state with f's fields set, and the fault that undoes
// it.
func (s faultState) apply(f Fault) (faultState, Fault) {
	var undo Fault
	if f.Slowdown != nil {
		undo.Slowdown = ptr(s.slowdown)
		s.slowdown = *f.Slowdown
	}
	if f.ErrorRate != nil {
		undo.ErrorRate = ptr(s.errorRate)
		s.errorRate = *f.ErrorRate
	}
	if f.Healthy != nil {
		undo.Healthy = ptr(s.healthy)
		s.healthy = *f.Healthy
	}
	if f.ReadyReplicas != nil {
		undo.ReadyReplicas = ptr(s.ready)
		s.ready = *f.ReadyReplicas
	}
	return s, undo
}

func ptr[T any](v T) *T { return &v }

// revert is a scheduled undo.
type revert struct {
	at   time.Time
	undo Fault
}

// faultReq carries a fault to an engine's goroutine.
type faultReq struct {
	f     Fault
	reset bool
	reply chan error
}

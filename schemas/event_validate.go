package schemas

import (
	"fmt"
	"math"
	"unicode/utf8"
)

// Limits on event string fields (bytes). Producers truncate error text to
// MaxErrorLen before publishing; longer values are rejected, not cut, so
// that a decoded event is always exactly what was sent.
const (
	MaxConversationIDLen = 1024
	MaxErrorLen          = 4096
)

// Validate checks the event's kind and its active payload.
func (ev *Event) Validate() error {
	switch ev.Kind {
	case KindStatus:
		return ev.Status.Validate()
	case KindCompletion:
		return ev.Completion.Validate()
	}
	return fmt.Errorf("schemas: event: %w: kind %d, want status (1) or completion (2)", ErrInvalid, ev.Kind)
}

// Validate checks an engine status: a named engine, a positive event time,
// a known health value and a KV cache utilisation in [0, 1].
//
// ReadyReplicas may exceed TotalReplicas: during a rolling update surge
// replicas are ready before the old ones go.
func (s *EngineStatus) Validate() error {
	if err := s.validate(); err != nil {
		return fmt.Errorf("schemas: status: %w: %w", ErrInvalid, err)
	}
	return nil
}

func (s *EngineStatus) validate() error {
	if err := checkEngineName(s.Engine); err != nil {
		return err
	}
	if s.TimeUnixNano <= 0 {
		return fmt.Errorf("engine %q: time_unix_nano %d must be > 0", s.Engine, s.TimeUnixNano)
	}
	if s.Health > HealthUnhealthy {
		return fmt.Errorf("engine %q: health %d out of range 0..%d", s.Engine, s.Health, HealthUnhealthy)
	}
	return checkFraction("kv_cache_utilization", s.KVCacheUtilization)
}

// Validate checks a completion: a named engine, a positive event time,
// cached prompt tokens not above prompt tokens, finite non-negative
// latencies, a valid cluster name when set, and bounded strings.
func (c *Completion) Validate() error {
	if err := c.validate(); err != nil {
		return fmt.Errorf("schemas: completion: %w: %w", ErrInvalid, err)
	}
	return nil
}

func (c *Completion) validate() error {
	if err := checkEngineName(c.Engine); err != nil {
		return err
	}
	if c.TimeUnixNano <= 0 {
		return fmt.Errorf("engine %q: time_unix_nano %d must be > 0", c.Engine, c.TimeUnixNano)
	}
	if c.CachedPromptTokens > c.PromptTokens {
		return fmt.Errorf("engine %q: cached_prompt_tokens %d > prompt_tokens %d",
			c.Engine, c.CachedPromptTokens, c.PromptTokens)
	}
	if err := checkNonNegative("ttft_ms", c.TTFTMs); err != nil {
		return err
	}
	if err := checkNonNegative("tbot_ms", c.TBOTMs); err != nil {
		return err
	}
	if c.Cluster != "" {
		if err := ValidClusterName(c.Cluster); err != nil {
			return err
		}
	}
	if err := checkText("conversation_id", c.ConversationID, MaxConversationIDLen); err != nil {
		return err
	}
	if err := checkText("model", c.Model, MaxNameLen); err != nil {
		return err
	}
	return checkText("error", c.Error, MaxErrorLen)
}

func checkEngineName(name string) error {
	if name == "" {
		return fmt.Errorf("engine name is empty")
	}
	return checkText("engine", name, MaxNameLen)
}

// checkText enforces a length bound and valid UTF-8 (protobuf string
// fields must be UTF-8; other decoders reject them otherwise).
func checkText(field, s string, maxLen int) error {
	if len(s) > maxLen {
		return fmt.Errorf("%s is %d bytes, max %d", field, len(s), maxLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s is not valid UTF-8", field)
	}
	return nil
}

func checkNonNegative(field string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return fmt.Errorf("%s %v must be finite and >= 0", field, v)
	}
	return nil
}

func checkFraction(field string, v float64) error {
	if !(v >= 0 && v <= 1) { // also false for NaN
		return fmt.Errorf("%s %v must be in [0, 1]", field, v)
	}
	return nil
}

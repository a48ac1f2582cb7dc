package extproc

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/ilb-router/ilb/services/dataplane"
)

// Config configures the endpoint picker server.
type Config struct {
	// Addr is the gRPC listen address (GIE's convention is port 9002).
	Addr string
	// MaxBodyBytes bounds the request body buffered to derive the
	// affinity key; a larger body is answered 413.
	MaxBodyBytes int
	// Fallbacks is how many next choices follow the pick in the
	// destination list, for the gateway's retries.
	Fallbacks int
	// PromptAffinity derives the affinity key from a chat's prompt when
	// the request has no X-Conversation-Id and no user (as the data
	// plane's HTTP proxy does).
	PromptAffinity bool
	// HealthInterval is how often the gRPC health statuses are refreshed
	// from the data plane's readiness.
	HealthInterval time.Duration
}

// DefaultConfig returns the defaults: GIE's port, a 1 MiB body limit (the
// HTTP proxy's), two fallbacks (the HTTP proxy's MaxRetries).
func DefaultConfig() Config {
	return Config{Addr: "127.0.0.1:9002", MaxBodyBytes: 1 << 20, Fallbacks: 2, PromptAffinity: true,
		HealthInterval: time.Second}
}

// Validate reports the first problem with c.
func (c Config) Validate() error {
	switch {
	case c.Addr == "":
		return errors.New("extproc: config: no listen address")
	case c.MaxBodyBytes < 1:
		return fmt.Errorf("extproc: config: MaxBodyBytes %d must be positive", c.MaxBodyBytes)
	case c.Fallbacks < 0 || c.Fallbacks > 10:
		return fmt.Errorf("extproc: config: Fallbacks %d must be in [0, 10]", c.Fallbacks)
	case c.HealthInterval <= 0:
		return fmt.Errorf("extproc: config: HealthInterval %v must be positive", c.HealthInterval)
	}
	return nil
}

// Deps are the server's live dependencies.
type Deps struct {
	Plane  *dataplane.DataPlane // required: the picker and guardrails
	Logger *slog.Logger         // nil discards logs
	Meter  metric.MeterProvider // nil: no metrics
	Now    func() time.Time     // nil: time.Now
}

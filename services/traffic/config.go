package traffic

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/ilb-router/ilb/schemas"
)

// Cluster is one front-end cluster traffic is generated for.
type Cluster struct {
	Name string
	// DemandShare is the cluster's share of Config.TotalDemandRPS.
	DemandShare float64
	// Models is the cluster's model mix: each conversation names one
	// model, drawn by share. Empty: requests name the placeholder model
	// "ilb-traffic" (a fleet whose engines list no models routes any).
	Models []schemas.ModelShare
}

// Config is everything a Generator needs. Build it with DefaultConfig.
type Config struct {
	// BaseURL is the data plane's base URL; requests go to
	// BaseURL+"/v1/chat/completions".
	BaseURL  string
	Clusters []Cluster
	// TotalDemandRPS is the mean request rate (all turns) over all
	// clusters before the swing: the fleet file's total_demand_rps. New
	// conversations arrive at TotalDemandRPS × share × swing / MeanTurns,
	// so the request rate matches the demand the optimizer is told.
	TotalDemandRPS float64
	// Swings multiply clusters' demand on a schedule (ParseSwings).
	Swings []Swing
	Seed   uint64

	// Conversation shape. Turn counts are geometric with mean MeanTurns,
	// at most MaxTurns; the first user message has about
	// FirstMessageTokens tokens, later ones about MessageTokens; the reply
	// length (max_tokens) has mean MeanMaxTokens; think times between
	// turns are exponential with mean MeanThink.
	MeanTurns          float64
	MaxTurns           int
	FirstMessageTokens int
	MessageTokens      int
	MeanMaxTokens      int
	MeanThink          time.Duration

	// Stream asks for server-sent events, so the time to first token and
	// between tokens are measured at the client.
	Stream bool
	// SLO judges each answer: Stats' Good counts those within it (streamed
	// answers only). DefaultConfig takes the fleet's (SLOOf).
	SLO SLO
	// MaxInFlight bounds the requests outstanding at once; a turn due when
	// it is reached is dropped (and its conversation ends).
	MaxInFlight int
	// MaxConversations bounds live conversations; an arrival beyond it is
	// dropped.
	MaxConversations int
	// RequestTimeout bounds one request, response body included.
	RequestTimeout time.Duration
	// LatencySamples is the size of each cluster's ring of recent
	// latencies that Stats takes quantiles over.
	LatencySamples int

	// Transport sends the requests; nil uses a tuned http.Transport.
	Transport     http.RoundTripper
	Logger        *slog.Logger         // nil discards logs
	MeterProvider metric.MeterProvider // nil: no metrics
}

// DefaultConfig returns a generator for the built-in example fleet against
// a data plane on 127.0.0.1:8080, without swings.
func DefaultConfig() Config {
	f := schemas.ExampleFleet()
	return Config{
		BaseURL:            "http://127.0.0.1:8080",
		Clusters:           ClustersOf(f),
		TotalDemandRPS:     f.TotalDemandRPS,
		Seed:               1,
		MeanTurns:          4,
		MaxTurns:           24,
		FirstMessageTokens: 600,
		MessageTokens:      120,
		MeanMaxTokens:      150,
		MeanThink:          3 * time.Second,
		Stream:             true,
		SLO:                SLOOf(f),
		MaxInFlight:        512,
		MaxConversations:   4096,
		RequestTimeout:     2 * time.Minute,
		LatencySamples:     512,
	}
}

// ClustersOf returns the fleet's front-end clusters with their demand
// shares and, in a fleet whose engines list models, their model mix
// (model_shares, else all default_model: schemas.Fleet.ModelMix), in
// fleet order.
func ClustersOf(f *schemas.Fleet) []Cluster {
	out := make([]Cluster, 0, len(f.Clusters))
	for _, c := range f.Clusters {
		cl := Cluster{Name: c.Name, DemandShare: c.DemandShare}
		if f.ExplicitModels() {
			cl.Models, _ = f.ModelMix(c) // a validated fleet can tell
		}
		out = append(out, cl)
	}
	return out
}

// Validate reports the first problem with c.
func (c Config) Validate() error {
	if err := c.validateTarget(); err != nil {
		return fmt.Errorf("traffic: %w", err)
	}
	if err := c.validateShape(); err != nil {
		return fmt.Errorf("traffic: %w", err)
	}
	if err := c.validateLimits(); err != nil {
		return fmt.Errorf("traffic: %w", err)
	}
	return nil
}

func (c Config) validateTarget() error {
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("base URL %q: want http(s)://host[:port]", c.BaseURL)
	}
	if len(c.Clusters) == 0 {
		return errors.New("no cluster to send traffic for")
	}
	total := 0.0
	for i, cl := range c.Clusters {
		if err := schemas.ValidClusterName(cl.Name); err != nil {
			return err
		}
		if slices.ContainsFunc(c.Clusters[:i], func(o Cluster) bool { return o.Name == cl.Name }) {
			return fmt.Errorf("cluster %q listed twice", cl.Name)
		}
		if !(cl.DemandShare >= 0) || math.IsInf(cl.DemandShare, 0) {
			return fmt.Errorf("cluster %q: demand share %v must be a finite number >= 0", cl.Name, cl.DemandShare)
		}
		total += cl.DemandShare
	}
	if total <= 0 {
		return errors.New("demand shares sum to 0")
	}
	if !(c.TotalDemandRPS > 0) || c.TotalDemandRPS > 1e5 {
		return fmt.Errorf("total demand %v rps must be in (0, 1e5]", c.TotalDemandRPS)
	}
	return validateSwings(c.Swings, c.Clusters)
}

func (c Config) validateShape() error {
	switch {
	case !(c.MeanTurns >= 1) || c.MeanTurns > 1000:
		return fmt.Errorf("mean turns %v must be in [1, 1000]", c.MeanTurns)
	case c.MaxTurns < 1 || c.MaxTurns > 10000:
		return fmt.Errorf("max turns %d must be in [1, 10000]", c.MaxTurns)
	case c.FirstMessageTokens < 1 || c.MessageTokens < 1 || c.FirstMessageTokens > 1<<20 || c.MessageTokens > 1<<20:
		return fmt.Errorf("message tokens %d (first) and %d must be in [1, 2^20]", c.FirstMessageTokens, c.MessageTokens)
	case c.MeanMaxTokens < 1 || c.MeanMaxTokens > 1<<16:
		return fmt.Errorf("mean max_tokens %d must be in [1, 65536]", c.MeanMaxTokens)
	case c.MeanThink < 0:
		return fmt.Errorf("mean think time %v is negative", c.MeanThink)
	}
	return nil
}

func (c Config) validateLimits() error {
	switch {
	case c.MaxInFlight < 1 || c.MaxConversations < 1:
		return fmt.Errorf("max in flight %d and max conversations %d must be positive", c.MaxInFlight, c.MaxConversations)
	case c.RequestTimeout <= 0:
		return fmt.Errorf("request timeout %v must be positive", c.RequestTimeout)
	case c.LatencySamples < 1 || c.LatencySamples > 1<<20:
		return fmt.Errorf("latency samples %d must be in [1, 2^20]", c.LatencySamples)
	}
	return c.SLO.validate()
}

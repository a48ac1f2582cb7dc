package dataplane

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// The shed orders of Config.ShedOrder.
const (
	ShedLargest = "largest"
	ShedByKey   = "key"
)

// Config is everything a DataPlane needs to know that is not a live
// dependency. Build it with DefaultConfig and change what differs.
type Config struct {
	// Clusters are the front-end clusters this process serves. With one,
	// it is the default cluster of requests that name none.
	Clusters []string
	// DefaultCluster, when set, is the cluster of requests that name none
	// although several are served (so that an unmodified OpenAI client,
	// which sends no X-Ilb-Cluster, is served). It must be in Clusters.
	DefaultCluster string
	// EngineURLs maps an engine name to its OpenAI-compatible base URL; the
	// proxy posts to base+"/v1/chat/completions". When it is non-empty, an
	// engine of a snapshot that has no URL here is unavailable. When it is
	// empty the data plane only picks (/v1/pick) and the proxy answers 502.
	EngineURLs map[string]string
	// EngineModels maps an engine name to the models it serves (the fleet
	// file's models field; schemas.Fleet.EngineModels). Optional: without
	// it every engine serves every model (one implicit model). With it,
	// requests are routed by model (models.go), an engine it does not
	// list serves nothing, and GET /v1/models lists the union over the
	// engines of the served clusters.
	EngineModels map[string][]string
	// EngineMaxContext maps an engine name to the longest prompt, in
	// tokens, it accepts (the fleet file's max_context_tokens). Optional:
	// absent or 0, no limit.
	EngineMaxContext map[string]int
	// DefaultModel is the model of requests that name none, and the one
	// implicit model of a fleet whose engines list no models.
	DefaultModel string
	// PromptAffinity derives an affinity key from a chat's prompt (model,
	// system messages, first user message) when the request has neither
	// the X-Conversation-Id header nor a user field (README.md, Affinity).
	// Off, such requests are spread at random by the weights.
	PromptAffinity bool
	// EngineCapacity is an engine's number of concurrent sequences (max
	// batch × replicas, from the fleet file). Optional: with it, engine
	// utilisation counts queued and running requests; without it, only
	// KV-cache utilisation.
	EngineCapacity map[string]int

	// StaleAfter is the snapshot age (now − created_at) past which the
	// stale policy applies (README.md, Staleness).
	StaleAfter time.Duration
	// SnapshotFile, when set, is the JSON snapshot file polled every
	// FilePollInterval and reloaded when its content changes.
	SnapshotFile     string
	FilePollInterval time.Duration
	// Bucket is the JetStream KV bucket watched when Deps.Weights is set.
	Bucket string
	// SignalsTopic is the Kafka topic of engine status events read when
	// Deps.Kafka is set.
	SignalsTopic string
	// StatusTTL is how long an engine status counts; an older one is
	// forgotten (the engine is then judged by outlier detection alone). 0
	// keeps statuses forever.
	StatusTTL time.Duration
	// ProbeInterval > 0 turns on active health probes: GET base+ProbePath
	// on every engine with a URL; ProbeFailures consecutive failures mark
	// it unavailable, one success marks it available again.
	ProbeInterval time.Duration
	ProbePath     string
	ProbeFailures int

	// SpillFactor is 1+ε of consistent hashing with bounded loads: a new
	// conversation whose engine holds at least SpillFactor × its share of
	// the cluster's in-flight requests goes to its next choice. +Inf turns
	// the spill off.
	SpillFactor float64
	// PendingSync is how often this process publishes its pending
	// prefill to the other data planes and takes theirs (pending_sync.go;
	// needs Deps.NATS); 0 turns the sharing off.
	PendingSync time.Duration
	// ShedOrder is which new conversations a cluster's shed fraction
	// refuses first: ShedLargest (default), those whose prompts are the
	// largest of the cluster's recent new conversations (routing.Sizes:
	// each refusal frees the most engine time), or ShedByKey, by the hash
	// of their affinity key (every prompt length alike). Ongoing
	// conversations are shed by key either way, and only once every new
	// one is.
	ShedOrder string
	// ConversationSlots is the size of each cluster's memory of recent
	// conversations (a power of two; 8 bytes each); ConversationIdle is how
	// long a conversation counts as ongoing after its last request.
	ConversationSlots int
	ConversationIdle  time.Duration
	// DrainTimeout is how long an engine removed from the fleet file keeps
	// serving its ongoing conversations (new ones avoid it at once).
	DrainTimeout time.Duration
	// RetryAfter is the Retry-After given with a shed request (429) or a
	// locally throttled one (503).
	RetryAfter time.Duration
	// MaxBodyBytes bounds request bodies (413 beyond).
	MaxBodyBytes int64
	// RetryBodyBytes: a chat request routed by its headers alone has its
	// body read up to this size before it is forwarded, so that a failed
	// attempt can be retried on another engine. A larger body is streamed
	// to the engine as it arrives and cannot be retried once the engine
	// has read some of it (counted in ilb_dataplane_retries_unreplayable_total).
	// 0 streams every such body. Requests routed by their body's fields
	// are read whole anyway (up to MaxBodyBytes) and always replayable.
	RetryBodyBytes int64
	// MaxRetries is the most retries of one proxied request, each on the
	// conversation's next choice and each paid from the retry budget.
	MaxRetries int
	// UpstreamDialTimeout and UpstreamHeaderTimeout bound connecting to an
	// engine and waiting for its response headers (a non-streaming
	// completion sends headers only when done, so the latter is long).
	UpstreamDialTimeout   time.Duration
	UpstreamHeaderTimeout time.Duration
	// TickInterval paces the owner loop: staleness, retry and throttle
	// windows, conversation epochs, status expiry, ejection expiry.
	TickInterval time.Duration

	Retry    RetryConfig
	Throttle ThrottleConfig
	Outlier  OutlierConfig
}

// RetryConfig is the retry budget, after Finagle's RetryBudget: within any
// Window, retries ≤ Ratio(u) × requests + MinPerSecond × Window, where the
// ratio shrinks linearly from Ratio at utilisation FullBelow to 0 at 1.
type RetryConfig struct {
	Ratio        float64       // Finagle and Envoy: 0.2
	MinPerSecond float64       // Finagle: 10
	Window       time.Duration // Finagle's TTL: 10 s
	FullBelow    float64       // utilisation up to which the full Ratio applies
}

// ThrottleConfig is Google SRE client-side throttling (SRE book, chapter
// 21): a request is rejected locally with probability
// max(0, (requests − K·accepts)/(requests + 1)) over the last Window.
type ThrottleConfig struct {
	K      float64       // SRE: 2
	Window time.Duration // SRE: 2 minutes
}

// OutlierConfig is passive outlier detection, after Envoy's.
type OutlierConfig struct {
	Consecutive5xx      int           // Envoy: 5
	Interval            time.Duration // sweep period; Envoy: 10 s
	BaseEjection        time.Duration // Envoy: 30 s, times the number of ejections
	MaxEjection         time.Duration // Envoy: 300 s
	MaxEjectionPercent  float64       // Envoy: 10; at least one engine may always be ejected
	MinHosts            int           // Envoy success_rate_minimum_hosts: 5
	RequestVolume       int64         // Envoy success_rate_request_volume: 100
	StdevFactor         float64       // Envoy success_rate_stdev_factor: 1.9
	LatencyPenaltyShare float64       // share of new conversations moved off a latency outlier
}

// DefaultRetryBodyBytes is the default Config.RetryBodyBytes: a chat
// request of a few thousand tokens fits, and 64 KiB per request in flight
// is a small price for being able to retry it.
const DefaultRetryBodyBytes = 64 << 10

// DefaultConfig returns a Config with the defaults documented in README.md
// and no clusters.
func DefaultConfig() Config {
	return Config{
		DefaultModel:          "default",
		PromptAffinity:        true,
		StaleAfter:            5 * time.Minute,
		FilePollInterval:      500 * time.Millisecond,
		Bucket:                schemas.BucketWeights,
		SignalsTopic:          schemas.TopicSignals,
		StatusTTL:             30 * time.Second,
		ProbePath:             "/health",
		ProbeFailures:         2,
		SpillFactor:           1.25,
		ShedOrder:             ShedLargest,
		PendingSync:           100 * time.Millisecond,
		ConversationSlots:     1 << 20,
		ConversationIdle:      30 * time.Minute,
		DrainTimeout:          2 * time.Minute,
		RetryAfter:            time.Second,
		MaxBodyBytes:          1 << 20,
		RetryBodyBytes:        DefaultRetryBodyBytes,
		MaxRetries:            2,
		UpstreamDialTimeout:   5 * time.Second,
		UpstreamHeaderTimeout: 10 * time.Minute,
		TickInterval:          time.Second,
		Retry:                 RetryConfig{Ratio: 0.2, MinPerSecond: 10, Window: 10 * time.Second, FullBelow: 0.5},
		Throttle:              ThrottleConfig{K: 2, Window: 2 * time.Minute},
		Outlier: OutlierConfig{
			Consecutive5xx: 5, Interval: 10 * time.Second, BaseEjection: 30 * time.Second,
			MaxEjection: 300 * time.Second, MaxEjectionPercent: 10, MinHosts: 5,
			RequestVolume: 100, StdevFactor: 1.9, LatencyPenaltyShare: 0.5,
		},
	}
}

// Validate reports the first problem with c.
func (c Config) Validate() error {
	if err := c.validateNames(); err != nil {
		return fmt.Errorf("dataplane: config: %w", err)
	}
	if err := c.validateDurations(); err != nil {
		return fmt.Errorf("dataplane: config: %w", err)
	}
	if err := c.validateLimits(); err != nil {
		return fmt.Errorf("dataplane: config: %w", err)
	}
	if err := c.Retry.validate(); err != nil {
		return fmt.Errorf("dataplane: config: retry: %w", err)
	}
	if err := c.Throttle.validate(); err != nil {
		return fmt.Errorf("dataplane: config: throttle: %w", err)
	}
	if err := c.Outlier.validate(); err != nil {
		return fmt.Errorf("dataplane: config: outlier: %w", err)
	}
	return nil
}

func (c Config) validateNames() error {
	if len(c.Clusters) == 0 {
		return errors.New("no cluster to serve")
	}
	for i, name := range c.Clusters {
		if err := schemas.ValidClusterName(name); err != nil {
			return err
		}
		if slices.Contains(c.Clusters[:i], name) {
			return fmt.Errorf("cluster %q listed twice", name)
		}
	}
	if c.DefaultCluster != "" && !slices.Contains(c.Clusters, c.DefaultCluster) {
		return fmt.Errorf("default cluster %q is not one of the clusters served %v", c.DefaultCluster, c.Clusters)
	}
	for name, raw := range c.EngineURLs {
		if name == "" {
			return errors.New("engine URL for an empty engine name")
		}
		if err := checkBaseURL(raw); err != nil {
			return fmt.Errorf("engine %q: %w", name, err)
		}
	}
	if c.DefaultModel == "" {
		return errors.New("DefaultModel is empty (the model GET /v1/models lists when engines list none)")
	}
	for name, n := range c.EngineCapacity {
		if n < 0 {
			return fmt.Errorf("engine %q: capacity %d is negative", name, n)
		}
	}
	if err := schemas.ValidBucketName(c.Bucket); err != nil {
		return err
	}
	return schemas.ValidTopicName(c.SignalsTopic)
}

func checkBaseURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("URL %q: want http(s)://host[:port][/path]", raw)
	}
	return nil
}

func (c Config) validateDurations() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"StaleAfter", c.StaleAfter}, {"FilePollInterval", c.FilePollInterval}, {"DrainTimeout", c.DrainTimeout},
		{"ConversationIdle", c.ConversationIdle}, {"RetryAfter", c.RetryAfter},
		{"UpstreamDialTimeout", c.UpstreamDialTimeout},
		{"UpstreamHeaderTimeout", c.UpstreamHeaderTimeout}, {"TickInterval", c.TickInterval},
	} {
		if d.v <= 0 {
			return fmt.Errorf("%s %v must be positive", d.name, d.v)
		}
	}
	if c.StatusTTL < 0 || c.ProbeInterval < 0 {
		return errors.New("StatusTTL and ProbeInterval must not be negative")
	}
	if c.ProbeInterval > 0 && (c.ProbeFailures < 1 || c.ProbePath == "" || c.ProbePath[0] != '/') {
		return fmt.Errorf("probes need ProbeFailures >= 1 and a ProbePath starting with '/' (got %d, %q)",
			c.ProbeFailures, c.ProbePath)
	}
	return nil
}

func (c Config) validateLimits() error {
	switch {
	case !(c.SpillFactor >= 1):
		return fmt.Errorf("SpillFactor %v must be >= 1 (1+ε; +Inf turns the spill off)", c.SpillFactor)
	case c.PendingSync < 0:
		return fmt.Errorf("PendingSync %v must not be negative (0 turns the sharing off)", c.PendingSync)
	case c.ShedOrder != ShedLargest && c.ShedOrder != ShedByKey:
		return fmt.Errorf("ShedOrder %q must be %q or %q", c.ShedOrder, ShedLargest, ShedByKey)
	case c.ConversationSlots < convoWays || c.ConversationSlots > 1<<26 || c.ConversationSlots&(c.ConversationSlots-1) != 0:
		return fmt.Errorf("ConversationSlots %d must be a power of two from %d to %d", c.ConversationSlots, convoWays, 1<<26)
	case c.MaxBodyBytes < 1:
		return fmt.Errorf("MaxBodyBytes %d must be positive", c.MaxBodyBytes)
	case c.RetryBodyBytes < 0:
		return fmt.Errorf("RetryBodyBytes %d must not be negative", c.RetryBodyBytes)
	case c.MaxRetries < 0 || c.MaxRetries > 10:
		return fmt.Errorf("MaxRetries %d must be in [0, 10]", c.MaxRetries)
	}
	return nil
}

func (r RetryConfig) validate() error {
	switch {
	case !(r.Ratio >= 0 && r.Ratio <= 10):
		return fmt.Errorf("ratio %v must be in [0, 10]", r.Ratio)
	case !(r.MinPerSecond >= 0) || math.IsInf(r.MinPerSecond, 0):
		return fmt.Errorf("min per second %v must be finite and >= 0", r.MinPerSecond)
	case r.Window <= 0:
		return fmt.Errorf("window %v must be positive", r.Window)
	case !(r.FullBelow >= 0 && r.FullBelow < 1):
		return fmt.Errorf("full-below utilisation %v must be in [0, 1)", r.FullBelow)
	}
	return nil
}

func (t ThrottleConfig) validate() error {
	if !(t.K >= 1) || math.IsInf(t.K, 0) {
		return fmt.Errorf("K %v must be finite and >= 1", t.K)
	}
	if t.Window <= 0 {
		return fmt.Errorf("window %v must be positive", t.Window)
	}
	return nil
}

func (o OutlierConfig) validate() error {
	switch {
	case o.Consecutive5xx < 1:
		return fmt.Errorf("consecutive 5xx %d must be >= 1", o.Consecutive5xx)
	case o.Interval <= 0 || o.BaseEjection <= 0 || o.MaxEjection < o.BaseEjection:
		return errors.New("interval and base ejection must be positive, max ejection >= base ejection")
	case !(o.MaxEjectionPercent >= 0 && o.MaxEjectionPercent <= 100):
		return fmt.Errorf("max ejection percent %v must be in [0, 100]", o.MaxEjectionPercent)
	case o.MinHosts < 2 || o.RequestVolume < 1:
		return fmt.Errorf("min hosts %d must be >= 2 and request volume %d >= 1", o.MinHosts, o.RequestVolume)
	case !(o.StdevFactor > 0) || math.IsInf(o.StdevFactor, 0):
		return fmt.Errorf("stdev factor %v must be finite and > 0", o.StdevFactor)
	case !(o.LatencyPenaltyShare >= 0 && o.LatencyPenaltyShare <= 1):
		return fmt.Errorf("latency penalty share %v must be in [0, 1]", o.LatencyPenaltyShare)
	}
	return nil
}

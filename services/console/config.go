package console

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// Config is everything a Console needs besides its Sources.
type Config struct {
	// Title heads the page.
	Title string
	// Fleet names the clusters and engines, in the order the page shows
	// them, with the regions and SKUs that pick each engine's colour.
	Fleet *schemas.Fleet
	// SampleInterval is how often the sources are read (and the page
	// polls).
	SampleInterval time.Duration
	// HistoryPoints is how many samples the charts keep.
	HistoryPoints int
	// SourceTimeout bounds each source call.
	SourceTimeout time.Duration
	// EngineStatsTTL is how long an engine missing from the EngineSource's
	// answer keeps its last stats on the page.
	EngineStatsTTL time.Duration
	// Links tell the user where the rest of the fleet is (brokers,
	// metrics), shown in the page's header.
	Links []Link
	// MembersURL, when set, is the base of an admin API that adds and
	// removes engines (ilb dev's /v1/dev/engines: POST BASE/NAME/add?like=
	// ENGINE and BASE/NAME/remove); the page then has controls for it.
	MembersURL string
	Logger     *slog.Logger // nil discards logs
}

// Link is one "where is it" line of the page.
type Link struct {
	Name string `json:"name"`           // "kafka"
	URL  string `json:"url"`            // "127.0.0.1:9092" or a URL
	Hint string `json:"hint,omitempty"` // a command to try
}

// DefaultConfig samples every second and keeps 10 minutes of history.
func DefaultConfig(fleet *schemas.Fleet) Config {
	return Config{
		Title:          "ilb · local fleet",
		Fleet:          fleet,
		SampleInterval: time.Second,
		HistoryPoints:  600,
		SourceTimeout:  2 * time.Second,
		EngineStatsTTL: 30 * time.Second,
	}
}

// maxHistoryPoints keeps /api/state small enough to poll every second.
const maxHistoryPoints = 7200

// Validate reports the first problem with c.
func (c Config) Validate() error {
	switch {
	case c.Fleet == nil:
		return errors.New("console: no fleet")
	case len(c.Fleet.Clusters) == 0 || len(c.Fleet.Engines) == 0:
		return errors.New("console: the fleet has no clusters or no engines")
	case c.SampleInterval < 10*time.Millisecond:
		return fmt.Errorf("console: sample interval %v is below 10ms", c.SampleInterval)
	case c.HistoryPoints < 2 || c.HistoryPoints > maxHistoryPoints:
		return fmt.Errorf("console: history points %d must be in [2, %d]", c.HistoryPoints, maxHistoryPoints)
	case c.SourceTimeout <= 0:
		return fmt.Errorf("console: source timeout %v must be positive", c.SourceTimeout)
	case c.EngineStatsTTL < 0:
		return fmt.Errorf("console: engine stats TTL %v is negative", c.EngineStatsTTL)
	}
	return nil
}

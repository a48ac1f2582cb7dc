package dataplane

import (
	"maps"
	"net/url"
	"strings"
	"time"

	"github.com/ilb-router/ilb/services/internal/affinity"
)

// Live fleet changes: the engines this process may send requests to, and
// where they are, follow the fleet file (UpdateEngines). The rule for a
// snapshot that names an engine the data plane does not know the URL
// of (the optimizer saw a newer fleet file than this process, or an
// older one): the snapshot is accepted, and that engine is unavailable
// (fallback reason "unhealthy") until a fleet with its URL arrives, so
// its share goes to the conversations' next choices. A data plane never
// sends a request to an engine it has no URL for.

// engineAddr is an engine's base URL and each proxied endpoint's URL.
type engineAddr struct {
	base     string
	urls     [len(endpoints)]string   // by affinity.Kind
	parsed   [len(endpoints)]*url.URL // urls parsed once, shared read-only by the requests
	endpoint string                   // host:port of base, the endpoint picker's name for it; "" without base
	// drainUntil, when set, is when a removed engine stops taking the
	// requests of its ongoing conversations; new conversations avoid it
	// at once.
	drainUntil time.Time
}

func newEngineAddr(raw string) *engineAddr {
	a := &engineAddr{base: raw}
	if raw != "" {
		base := strings.TrimSuffix(raw, "/")
		for _, ep := range endpoints {
			a.urls[ep.kind] = base + ep.path
			a.parsed[ep.kind], _ = url.Parse(a.urls[ep.kind]) // checked by Config.Validate and the fleet file's validation
		}
		a.endpoint = hostPort(raw)
	}
	return a
}

// hostPort is the engine's host:port, "" without a URL.
func (e *engine) hostPort() string { return e.addr.Load().endpoint }

// setEndpoints sets the host:port set of the engines with URLs.
func (d *DataPlane) setEndpoints(urls map[string]string) {
	set := endpointSet(urls)
	d.endpoints.Store(&set)
}

func (e *engine) setURL(url string) { e.addr.Store(newEngineAddr(url)) }

// url is the engine's base URL, "" when unknown.
func (e *engine) url() string { return e.addr.Load().base }

func (e *engine) endpointURL(k affinity.Kind) string { return e.addr.Load().urls[k] }

// draining reports whether the engine was removed from the fleet and is
// draining: it serves its ongoing conversations, no new ones.
func (e *engine) draining() bool { return !e.addr.Load().drainUntil.IsZero() }

// UpdateEngines applies a new fleet file's engines (name → base URL, and
// their capacities for engines first seen now): an engine added is
// routable as soon as a snapshot gives it weight; a changed URL takes
// effect for the next request; an engine no longer listed drains: new
// conversations avoid it at once, its ongoing conversations keep it for
// up to Config.DrainTimeout (its weight is 0 in the optimizer's next
// snapshot, which usually moves them sooner), then it is forgotten.
func (d *DataPlane) UpdateEngines(urls map[string]string, capacity map[string]int) {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reg.urls = maps.Clone(urls)
	if d.reg.capacity == nil {
		d.reg.capacity = map[string]int{}
	}
	for name, c := range capacity {
		d.reg.capacity[name] = c
	}
	for _, name := range sortedKeys(urls) {
		e := d.reg.getLocked(name)
		if a := e.addr.Load(); a.base != urls[name] || !a.drainUntil.IsZero() {
			e.setURL(urls[name])
		}
	}
	for _, name := range sortedKeys(d.reg.byName) {
		e := d.reg.byName[name]
		a := e.addr.Load()
		if _, listed := urls[name]; listed || a.base == "" || !a.drainUntil.IsZero() {
			continue
		}
		drained := *a
		drained.drainUntil = now.Add(d.cfg.DrainTimeout)
		e.addr.Store(&drained)
		d.log.Info("engine removed from the fleet: draining", "engine", name, "until", drained.drainUntil)
	}
	d.needURL = d.needURL || len(urls) > 0
	d.setEndpoints(urls)
	d.rebuildLocked(now)
}

// expireDrainsLocked forgets the URLs of engines whose drain time is
// over; it reports whether any was.
func (d *DataPlane) expireDrainsLocked(now time.Time) bool {
	changed := false
	for _, e := range d.reg.byName {
		if a := e.addr.Load(); !a.drainUntil.IsZero() && !now.Before(a.drainUntil) {
			e.setURL("")
			changed = true
			d.log.Info("engine drained", "engine", e.name)
		}
	}
	return changed
}

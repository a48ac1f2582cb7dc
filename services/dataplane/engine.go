package dataplane

import (
	"math"
	"net"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// maxEngineIDs bounds the process-wide engine ids the conversation memory
// stores in 16 bits; engines beyond it get id 0 (no memory of spills).
const maxEngineIDs = 1<<16 - 1

// engine is one engine as this process knows it, shared by every cluster
// that routes to it.
type engine struct {
	// Fixed at registration.
	name     string
	id       uint16 // 1.. process-wide; 0 when ids ran out
	capacity int    // concurrent sequences; 0 when unknown
	// nameHeader is the X-Ilb-Engine value, built once and shared.
	nameHeader []string

	// Where it is: swapped when the fleet file changes (fleet.go), read
	// on the request path.
	addr atomic.Pointer[engineAddr]

	// Hot path, written by the proxy.
	consec5xx atomic.Int64 // consecutive failures; reset by a success
	requests  atomic.Int64 // attempts since the last outlier sweep
	failures  atomic.Int64 // failed attempts since the last sweep
	latencyUs atomic.Int64 // sum of time-to-headers of successes, µs
	successes atomic.Int64 // successes since the last sweep (latency count)
	live      live         // queue as last reported plus what was sent since

	// Guarded by DataPlane.mu.
	status       schemas.EngineStatus
	statusAt     time.Time // when the status was received; zero: none
	probeFails   int
	probeDown    bool
	ejectedUntil time.Time // zero: not ejected
	ejections    int       // times ejected, for the growing ejection time
	latencyOut   bool      // a latency outlier at the last sweep
}

// availableLocked reports whether e may take requests at now, and why not.
func (e *engine) availableLocked(now time.Time, statusTTL time.Duration) (bool, fallback) {
	if !e.ejectedUntil.IsZero() && now.Before(e.ejectedUntil) {
		return false, reasonOutlier
	}
	if e.probeDown {
		return false, reasonUnhealthy
	}
	if e.statusAt.IsZero() || (statusTTL > 0 && now.Sub(e.statusAt) > statusTTL) {
		return true, noFallback
	}
	if e.status.Health == schemas.HealthUnhealthy || e.status.ReadyReplicas == 0 {
		return false, reasonUnhealthy
	}
	return true, noFallback
}

// utilisationLocked is the engine's busy fraction in [0, 1] from its last
// live status: the larger of KV-cache use and, when the capacity is known,
// (running + waiting) / capacity. Unknown is 0.
func (e *engine) utilisationLocked(now time.Time, statusTTL time.Duration) float64 {
	if e.statusAt.IsZero() || (statusTTL > 0 && now.Sub(e.statusAt) > statusTTL) {
		return 0
	}
	u := e.status.KVCacheUtilization
	if e.capacity > 0 {
		u = max(u, float64(e.status.Running+e.status.Waiting)/float64(e.capacity))
	}
	if math.IsNaN(u) {
		return 0
	}
	return min(max(u, 0), 1)
}

// observe records the outcome of one attempt: failed (a 5xx or no
// response) or a success whose headers came after latency. It returns
// true when the failure reaches threshold consecutive failures, so the
// caller wakes the owner to eject.
func (e *engine) observe(failed bool, latency time.Duration, threshold int) bool {
	e.requests.Add(1)
	if failed {
		e.failures.Add(1)
		return e.consec5xx.Add(1) == int64(threshold)
	}
	e.consec5xx.Store(0)
	e.successes.Add(1)
	e.latencyUs.Add(latency.Microseconds())
	return false
}

// registry maps engine names to engines. Guarded by DataPlane.mu; engines
// are never removed, so pickers may keep pointers to them.
type registry struct {
	byName   map[string]*engine
	nextID   int
	urls     map[string]string
	capacity map[string]int
}

func newRegistry(urls map[string]string, capacity map[string]int) *registry {
	return &registry{byName: map[string]*engine{}, nextID: 1, urls: urls, capacity: capacity}
}

// getLocked returns the engine named name, registering it on first sight.
func (r *registry) getLocked(name string) *engine {
	if e, ok := r.byName[name]; ok {
		return e
	}
	e := &engine{name: name, capacity: r.capacity[name], nameHeader: []string{name}}
	e.setURL(r.urls[name])
	if r.nextID <= maxEngineIDs {
		e.id = uint16(r.nextID)
		r.nextID++
	}
	r.byName[name] = e
	return e
}

// hostPort is the host:port of a base URL, with the scheme's default port
// when it names none: how a gateway names the engine's endpoint.
func hostPort(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	if u.Port() != "" {
		return u.Host
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

package dataplane

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/ilb-router/ilb/schemas"
)

// Pending prefill shared between data planes (README.md, "Pending
// prefill"). Each process knows exactly the prompts it has sent an engine
// and not seen answered (live.pending) but not those other front ends
// sent; the engine's status counts them a second late, and as requests,
// not tokens. So every Config.PendingSync each process publishes its
// pending prompt tokens by engine on schemas.SubjectPending, takes the
// others', and adds their sum (live.remote) to the load the candidates of
// a new or moving request are compared on, as Dynamo's router replicas
// share their active sequences. A process's figures count for
// pendingTTL after they arrive; a process that stops publishing stops
// counting.

// pendingTTL is how long a peer's figures count after their arrival:
// ten publish intervals, at least two seconds (a few lost messages, a
// slow link).
func pendingTTL(interval time.Duration) time.Duration { return max(10*interval, 2*time.Second) }

// pendingHeartbeat: an unchanged figure is published again this often,
// so peers keep counting it.
const pendingHeartbeat = time.Second

// Results counted by ilb_dataplane_pending_sync_messages_total.
const (
	pendingPublished = "published" // sent by this process
	pendingTaken     = "taken"     // another process's, taken
	pendingStale     = "stale"     // another process's, older than one already taken
	pendingBad       = "bad"       // undecodable or invalid
)

// pendingSync is one process's share of the sync.
type pendingSync struct {
	source string

	// Publishing, owned by runPendingSync.
	seq     uint64
	last    map[string]int64
	lastPub time.Time

	mu    sync.Mutex // guards peers, taken by the subscription's callback
	peers map[string]peerPending
}

// peerPending is another process's latest figures and when they came.
type peerPending struct {
	seq     uint64
	arrived time.Time
	engines map[string]int64
}

// newPendingSource is this process's name on the subject: host, pid and
// a random suffix (two processes of one pod, or a restarted one, differ).
func newPendingSource() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// runPendingSync publishes this process's pending prefill, takes the
// other processes', and keeps every engine's live.remote up to date,
// until ctx ends.
func (d *DataPlane) runPendingSync(ctx context.Context) error {
	ps := d.pending
	sub, err := d.deps.NATS.Subscribe(schemas.SubjectPending, func(m *nats.Msg) { d.takePending(m.Data) })
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", schemas.SubjectPending, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	t := time.NewTicker(d.cfg.PendingSync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			now := d.now()
			own := d.exchangePending(now)
			if !maps.Equal(own, ps.last) || now.Sub(ps.lastPub) >= pendingHeartbeat {
				if d.publishPending(own, now) {
					ps.last, ps.lastPub = own, now
				}
			}
		}
	}
}

// publishPending sends one message; a failure is logged and the next
// interval tries again.
func (d *DataPlane) publishPending(own map[string]int64, now time.Time) bool {
	ps := d.pending
	ps.seq++
	msg := &schemas.PendingPrefill{Source: ps.source, Clusters: d.cfg.Clusters, Seq: ps.seq, At: now.UTC(), Engines: own}
	b, err := schemas.EncodePendingPrefill(msg)
	if err == nil {
		err = d.deps.NATS.Publish(schemas.SubjectPending, b)
	}
	if err != nil {
		d.log.Warn("publish pending prefill", "err", err)
		return false
	}
	d.countPending(pendingPublished)
	return true
}

// takePending takes another process's message (the subscription's
// callback): bad ones are counted and dropped, this process's own are
// ignored, older ones than the last taken from their source are stale.
func (d *DataPlane) takePending(data []byte) {
	p, err := schemas.DecodePendingPrefill(data)
	if err != nil {
		d.countPending(pendingBad)
		d.log.Debug("bad pending prefill message", "err", err)
		return
	}
	ps := d.pending
	if p.Source == ps.source {
		return
	}
	ps.mu.Lock()
	prev, ok := ps.peers[p.Source]
	fresh := !ok || p.Seq > prev.seq
	if fresh {
		ps.peers[p.Source] = peerPending{seq: p.Seq, arrived: d.now(), engines: p.Engines}
	}
	ps.mu.Unlock()
	if fresh {
		d.countPending(pendingTaken)
	} else {
		d.countPending(pendingStale)
	}
}

// exchangePending forgets peers silent for pendingTTL, sets every known
// engine's live.remote to the sum of the others' figures for it, and
// returns this process's own pending prompt tokens by engine (engines
// with none left out), in one pass over the engines. Names this process
// does not route to are ignored, never registered.
func (d *DataPlane) exchangePending(now time.Time) map[string]int64 {
	ps := d.pending
	ttl := pendingTTL(d.cfg.PendingSync)
	sum := map[string]int64{}
	ps.mu.Lock()
	for src, p := range ps.peers {
		if now.Sub(p.arrived) > ttl {
			delete(ps.peers, src)
			continue
		}
		for name, tok := range p.engines {
			sum[name] += tok
		}
	}
	ps.mu.Unlock()
	own := map[string]int64{}
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, e := range d.reg.byName {
		e.live.remote.Store(sum[name])
		if tok := e.live.pending.Load(); tok > 0 {
			own[name] = tok
		}
	}
	return own
}

// peerCount is how many other processes' figures count now.
func (d *DataPlane) peerCount() int {
	ps := d.pending
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return len(ps.peers)
}

func (d *DataPlane) countPending(result string) {
	d.metrics.pendingSync.Add(context.Background(), 1, metric.WithAttributes(attribute.String("result", result)))
}

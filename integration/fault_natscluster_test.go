package integration

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/optimizer"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// acked follows the versions an optimizer published with success (every
// write acknowledged), from its State, and when each first showed up.
type acked struct {
	o    *optimizer.Optimizer
	stop chan struct{}
	done chan struct{}

	mu       sync.Mutex
	versions map[uint64]time.Time
}

func watchAcked(t *testing.T, o *optimizer.Optimizer) *acked {
	a := &acked{o: o, stop: make(chan struct{}), done: make(chan struct{}), versions: map[uint64]time.Time{}}
	go func() {
		defer close(a.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, h := range a.o.State().History {
				a.mu.Lock()
				if _, ok := a.versions[h.Version]; !ok {
					a.versions[h.Version] = time.Now()
				}
				a.mu.Unlock()
			}
			select {
			case <-a.stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(a.close)
	return a
}

func (a *acked) close() {
	select {
	case <-a.stop:
	default:
		close(a.stop)
	}
	<-a.done
}

// all returns the acknowledged versions, sorted.
func (a *acked) all() []uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []uint64
	for v := range a.versions {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// firstAfter returns how long after at the first version acknowledged
// after at showed up; false if none has.
func (a *acked) firstAfter(at time.Time) (time.Duration, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	best := time.Duration(-1)
	for _, seen := range a.versions {
		if d := seen.Sub(at); seen.After(at) && (best < 0 || d < best) {
			best = d
		}
	}
	return best, best >= 0
}

// missing returns the acknowledged versions that history lacks, of those
// it can hold: the bucket keeps the last 64 revisions of a key, so
// versions older than its oldest are gone by design. A version lost in a
// fault is a gap, whatever came after it.
func missing(acked, history []uint64) (lost []uint64, checked int) {
	if len(history) == 0 {
		return acked, len(acked)
	}
	for _, v := range acked {
		if v < history[0] {
			continue
		}
		checked++
		if !slices.Contains(history, v) {
			lost = append(lost, v)
		}
	}
	return lost, checked
}

// clusterStack is the weight path on a NATS cluster: an optimizer
// publishing every 250 ms (a steady burst), two data planes each with its own
// connection to every node, and a client asking each for picks every
// 20 ms.
type clusterStack struct {
	opt   *optimizerRun
	dps   []*dataplaneRun
	picks []*pickLoop
	acked *acked
}

func startClusterStack(t *testing.T, natsURL string) *clusterStack {
	t.Helper()
	fleet := parseFleet(t, smallFleet)
	brokers := streamstest.Kafka(t, allTopics...)
	_, log := newLogSink(t, slog.LevelWarn)
	oc := fastOptimizer(fleet, "opt")
	oc.BucketReplicas = 3
	oc.MinInterval, oc.MaxInterval = 100*time.Millisecond, 250*time.Millisecond
	s := &clusterStack{opt: startOptimizer(t, oc, brokers, natsURL, nil, log)}
	s.acked = watchAcked(t, s.opt.o)
	for _, name := range []string{"dp-1", "dp-2"} {
		dp := startDataplane(t, fastDataplane(time.Minute, "fe-a"), dataplaneDeps{natsURL: natsURL, log: log, name: name})
		s.dps = append(s.dps, dp)
	}
	for _, dp := range s.dps {
		waitUntil(t, 60*time.Second, "the first snapshot at "+dp.s.name, func() bool { return dp.ready("fe-a") })
		s.picks = append(s.picks, startPicks(t, dp.url, "fe-a", 20*time.Millisecond, 200))
	}
	return s
}

// newest is the highest version any data plane serves.
func (s *clusterStack) newest(t *testing.T) uint64 {
	c := httpClient(t, 5*time.Second)
	var v uint64
	for _, dp := range s.dps {
		v = max(v, routing(t, c, dp.url, "fe-a").Version)
	}
	return v
}

// finish stops the picks and checks them: none failed, no version went
// back at either data plane.
func (s *clusterStack) finish(t *testing.T) []pickCounts {
	var out []pickCounts
	for _, p := range s.picks {
		p.stop()
		pc := p.counts()
		pc.check(t)
		out = append(out, pc)
	}
	return out
}

// faultNATSLeaderKilled: three NATS nodes as processes, the weights bucket
// on three replicas. During a burst of publishes the node leading the
// bucket's stream is killed (SIGKILL): the other two elect a leader and
// publishing goes on. Then a second node is killed: the last one cannot
// make a quorum, publishes fail, and the data planes keep serving their
// last snapshot. The second node is restarted (quorum regained): publishing
// resumes. The first comes back too. Every version the optimizer got
// acknowledged is in the bucket's history; no pick failed at either data
// plane, and no version went back. Lost: nothing acknowledged.
func faultNATSLeaderKilled(t *testing.T, bin string) {
	nodes := startNATSNodes(t, bin, 3)
	s := startClusterStack(t, nodes.url())
	waitUntil(t, 20*time.Second, "version 3", func() bool { return s.newest(t) >= 3 })

	first := nodes.leader(t, 10*time.Second)
	if first < 0 {
		t.Fatal("no node leads the weights stream")
	}
	burstFrom := time.Now()
	time.Sleep(2 * time.Second)
	nodes.kill(t, first)
	killed := time.Now()
	inBurst := len(s.acked.allBefore(killed)) - len(s.acked.allBefore(burstFrom))
	waitUntil(t, 30*time.Second, "a version acknowledged after the leader was killed", func() bool {
		_, ok := s.acked.firstAfter(killed)
		return ok
	})
	afterKill, _ := s.acked.firstAfter(killed)
	newLeader := nodes.leader(t, 10*time.Second)

	second := (first + 1) % 3
	if second == newLeader {
		second = (first + 2) % 3 // kill the new leader last: a follower first
	}
	nodes.kill(t, second)
	quorumLost := time.Now()
	before := s.newest(t)
	time.Sleep(4 * time.Second)
	quorumless := s.acked.all()
	heldAt := s.newest(t)

	nodes.start(t, second)
	regained := time.Now()
	waitUntil(t, 60*time.Second, "publishing to resume with the quorum back", func() bool {
		_, ok := s.acked.firstAfter(regained)
		return ok
	})
	resumed, _ := s.acked.firstAfter(regained)
	nodes.start(t, first)
	waitUntil(t, 30*time.Second, "the data planes to serve a version published after the quorum came back", func() bool {
		return s.newest(t) > heldAt
	})

	ackedAll := s.acked.all()
	history := historyHolding(t, nodes.url(), "fe-a", ackedAll, 15*time.Second)
	lost, checked := missing(ackedAll, history)
	if len(lost) > 0 {
		t.Errorf("%d acknowledged versions are not in the bucket's history: %v (history %v)", len(lost), lost, history)
	}
	if checked < len(ackedAll)/2 {
		t.Errorf("only %d of %d acknowledged versions are young enough to be in the history", checked, len(ackedAll))
	}
	if !slices.IsSorted(history) {
		t.Errorf("the bucket's history goes back: %v", history)
	}
	// A version the bucket already held when the quorum was lost (at most
	// before) may be seen acknowledged a moment after the kill (the watch
	// polls every 20 ms, and the kill takes a few): only a newer one would
	// have been acknowledged by one node of three.
	prior := s.acked.allBefore(quorumLost)
	var quorumlessNew []uint64
	for _, v := range quorumless {
		if v > before && !slices.Contains(prior, v) {
			quorumlessNew = append(quorumlessNew, v)
		}
	}
	if len(quorumlessNew) > 0 {
		t.Errorf("versions %v acknowledged with one node of three (v%d was the newest when the quorum was lost)", quorumlessNew, before)
	}
	if afterKill > 15*time.Second || resumed > 15*time.Second {
		t.Errorf("publishing resumed %v after the leader was killed and %v after the quorum came back; want seconds", afterKill, resumed)
	}
	pcs := s.finish(t)
	t.Logf("NATS leader %s killed mid-burst (%d versions acknowledged in the 2 s before): next version acknowledged %v later (new leader %s); %s killed too: version held at v%d (v%d before); restarted: publishing resumed %v later; %d versions acknowledged, the %d the history can hold all in it; picks %d+%d, failed %d+%d, went back %d+%d",
		nodes.name(first), inBurst, afterKill.Round(10*time.Millisecond), nodes.name(max(newLeader, 0)), nodes.name(second),
		heldAt, before, resumed.Round(10*time.Millisecond), len(ackedAll), checked,
		pcs[0].Sent, pcs[1].Sent, pcs[0].Failed, pcs[1].Failed, pcs[0].WentBack, pcs[1].WentBack)
}

// allBefore returns the versions acknowledged before at.
func (a *acked) allBefore(at time.Time) []uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []uint64
	for v, seen := range a.versions {
		if seen.Before(at) {
			out = append(out, v)
		}
	}
	return out
}

// faultNATSNodePartitioned: three NATS nodes as processes; the node a data
// plane is connected to is cut off (SIGSTOP: it holds its connections and
// answers nothing, as behind a network partition) for 10 s, then healed
// (SIGCONT). The data plane's connection moves to another node, publishing
// goes on on the two that can talk, and both data planes get the new
// versions; after the heal the node catches up and serves the newest
// snapshot. No pick failed, no data plane served an older version than one
// it had, every acknowledged version is in the history. Lost: nothing.
func faultNATSNodePartitioned(t *testing.T, bin string) {
	nodes := startNATSNodes(t, bin, 3)
	s := startClusterStack(t, nodes.url())
	waitUntil(t, 20*time.Second, "version 3", func() bool { return s.newest(t) >= 3 })
	cut := nodes.index(s.dps[0].nc.ConnectedServerName())
	if cut < 0 {
		t.Fatalf("data plane 1 is on %q, not a node of the cluster", s.dps[0].nc.ConnectedServerName())
	}
	wasLeader := nodes.leader(t, 10*time.Second) == cut
	before := s.newest(t)
	nodes.pause(t, cut)
	paused := time.Now()
	waitUntil(t, 20*time.Second, "data plane 1 to leave the cut-off node", func() bool {
		return s.dps[0].nc.IsConnected() && s.dps[0].nc.ConnectedServerName() != nodes.name(cut)
	})
	moved := time.Since(paused)
	c := httpClient(t, 5*time.Second)
	waitUntil(t, 30*time.Second, "both data planes to serve a version published during the cut", func() bool {
		return routing(t, c, s.dps[0].url, "fe-a").Version > before && routing(t, c, s.dps[1].url, "fe-a").Version > before
	})
	during := time.Since(paused)
	time.Sleep(max(0, 10*time.Second-time.Since(paused)))

	nodes.resume(t, cut)
	healed := time.Now()
	newest := s.newest(t)
	var seen uint64
	waitUntil(t, 30*time.Second, "the healed node to serve the newest snapshot", func() bool {
		seen = versionAtNode(nodes.nodeURL(cut), "fe-a")
		return seen >= newest
	})
	caughtUp := time.Since(healed)
	ackedAll := s.acked.all()
	history := historyHolding(t, nodes.url(), "fe-a", ackedAll, 15*time.Second)
	if lost, _ := missing(ackedAll, history); len(lost) > 0 {
		t.Errorf("%d acknowledged versions are not in the bucket's history: %v (history %v)", len(lost), lost, history)
	}
	pcs := s.finish(t)
	t.Logf("NATS node %s (stream leader: %v) cut off 10 s: data plane 1 moved to %s after %v; new versions at both data planes %v after the cut; healed node served v%d %v after the heal; %d versions acknowledged, none missing from the history; picks %d+%d, failed %d+%d, went back %d+%d",
		nodes.name(cut), wasLeader, s.dps[0].nc.ConnectedServerName(), moved.Round(10*time.Millisecond), during.Round(10*time.Millisecond),
		seen, caughtUp.Round(10*time.Millisecond), len(ackedAll), pcs[0].Sent, pcs[1].Sent, pcs[0].Failed, pcs[1].Failed, pcs[0].WentBack, pcs[1].WentBack)
}

// versionAtNode reads cluster's snapshot version through the node at url
// alone (a direct get: a replica answers from its own copy); 0 when it
// cannot.
func versionAtNode(url, cluster string) uint64 {
	nc, err := nats.Connect(url, nats.Timeout(time.Second), nats.MaxReconnects(0))
	if err != nil {
		return 0
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	b, err := js.KeyValue(ctx, schemas.BucketWeights)
	if err != nil {
		return 0
	}
	e, err := b.Get(ctx, cluster)
	if err != nil {
		return 0
	}
	snap, err := schemas.DecodeSnapshot(e.Value())
	if err != nil {
		return 0
	}
	return snap.Version
}

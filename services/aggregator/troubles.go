package aggregator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A failing consumer (broker gone, wrong credentials, refused writes) is
// reported at Warn once per kind of error per troubleLogEvery, with how
// often it recurred in between, not on every poll; one that has lasted
// troublePersist makes the consumer unhealthy on /healthz.
const (
	troubleLogEvery = 10 * time.Second
	troublePersist  = 10 * time.Second
	// troubleForget: a kind not seen for this long is over.
	troubleForget = 2 * troubleLogEvery
	// probeTimeout bounds the broker probe made while out of the group.
	probeTimeout = 2 * time.Second
	// maxTroubles bounds the kinds remembered (error texts can vary).
	maxTroubles = 32
	kafkaHint   = "check that the brokers are up and that the Kafka addresses, TLS and SASL settings are right"
)

// Kinds of trouble: what failed.
const (
	troubleGroup   = "consumer group"
	troubleFetch   = "fetch"
	troubleCommit  = "commit"
	troublePublish = "publish"
	troubleBrokers = "brokers"
)

// errNotJoined: the brokers answer but the group has taken no member in.
var errNotJoined = errors.New("the brokers answer, but this member has not joined the group")

// troubles is the consumer loop's record of what is failing. Owned by
// the consumer loop; time comes from its caller.
type troubles struct {
	log      *slog.Logger
	group    string
	kinds    map[string]*trouble // by kind and error text
	member   string              // group member id and generation last seen
	gen      int32
	outSince time.Time // since when not in the group; zero while in it
	probe    time.Time // last broker probe
}

type trouble struct {
	kind                string
	since, seen, logged time.Time
	count               int // occurrences
	repeats             int // occurrences since the last warning
}

func newTroubles(log *slog.Logger, group string) *troubles {
	return &troubles{log: log, group: group, kinds: map[string]*trouble{}, gen: -1}
}

// failed records that kind failed with err at now, warning when the
// kind and error are new or last warned about troubleLogEvery ago.
func (ts *troubles) failed(now time.Time, kind string, err error) {
	key := kind + "\x00" + err.Error()
	t, ok := ts.kinds[key]
	if !ok {
		ts.makeRoom()
		t = &trouble{kind: kind, since: now}
		ts.kinds[key] = t
	}
	t.seen = now
	t.count++
	t.repeats++
	if ok && now.Sub(t.logged) < troubleLogEvery {
		return
	}
	ts.log.Warn("aggregator: "+kind+" failing", "group", ts.group, "err", err, "times", t.repeats,
		"failing_for", now.Sub(t.since).Round(time.Millisecond), "hint", kafkaHint)
	t.logged, t.repeats = now, 0
}

// makeRoom forgets the least recently seen kind when the map is full.
func (ts *troubles) makeRoom() {
	if len(ts.kinds) < maxTroubles {
		return
	}
	var oldest string
	for k, t := range ts.kinds {
		if oldest == "" || t.seen.Before(ts.kinds[oldest].seen) {
			oldest = k
		}
	}
	delete(ts.kinds, oldest)
}

// outcome records the result of an operation of kind: a failure, or
// (err nil) a success that ends that kind's troubles.
func (ts *troubles) outcome(now time.Time, kind string, err error) {
	if err != nil {
		ts.failed(now, kind, err)
		return
	}
	ts.clear(now, func(t *trouble) bool { return t.kind == kind })
}

// clear forgets the troubles match selects, saying so for those that
// were warned about.
func (ts *troubles) clear(now time.Time, match func(*trouble) bool) {
	for k, t := range ts.kinds {
		if match(t) {
			delete(ts.kinds, k)
			ts.log.Info("aggregator: "+t.kind+" working again", "group", ts.group, "failed_for", now.Sub(t.since).Round(time.Millisecond))
		}
	}
}

// membership notes the group member id and generation: a new one is a
// (re)join, which ends group, fetch and broker troubles. Being out of the
// group starts the clock for probeDue.
func (ts *troubles) membership(now time.Time, member string, gen int32) {
	switch {
	case gen < 0 && ts.outSince.IsZero():
		ts.outSince = now
	case gen >= 0 && (gen != ts.gen || member != ts.member):
		ts.outSince = time.Time{}
		ts.clear(now, func(t *trouble) bool { return t.kind != troubleCommit && t.kind != troublePublish })
	}
	ts.member, ts.gen = member, gen
	ts.clear(now, func(t *trouble) bool { return now.Sub(t.seen) >= troubleForget })
}

// probeDue reports whether to probe the brokers: out of the group for
// troublePersist with no error to show for it lately (franz-go retries
// some failures, such as a connection closed during SASL, without
// reporting them), and not probed within troubleLogEvery.
func (ts *troubles) probeDue(now time.Time) bool {
	if ts.outSince.IsZero() || now.Sub(ts.outSince) < troublePersist || now.Sub(ts.probe) < troubleLogEvery {
		return false
	}
	for _, t := range ts.kinds {
		if t.kind != troubleBrokers && now.Sub(t.seen) < troubleLogEvery {
			return false
		}
	}
	return true
}

// ping asks the brokers for their API versions, bounded by probeTimeout.
func ping(ctx context.Context, cl *kgo.Client) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	return cl.Ping(ctx)
}

// probed records the probe's result: the brokers' error, or that they
// answer while the group still has not taken this member in.
func (ts *troubles) probed(now time.Time, err error) {
	ts.probe = now
	if err == nil {
		err = errNotJoined
	}
	ts.failed(now, troubleBrokers, fmt.Errorf("still not in the group: %w", err))
}

// persistent reports whether some trouble has recurred for
// troublePersist and is still going on.
func (ts *troubles) persistent(now time.Time) bool { return ts.reason(now) != "" }

// reason describes the persistent troubles ("fetch: ERROR; commit: ..."),
// in a stable order; "" when there is none.
func (ts *troubles) reason(now time.Time) string {
	var out []string
	for k, t := range ts.kinds {
		if t.count > 1 && now.Sub(t.since) >= troublePersist && now.Sub(t.seen) <= troubleLogEvery {
			out = append(out, strings.Replace(k, "\x00", ": ", 1))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

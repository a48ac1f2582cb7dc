package aggregator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/arrowipc"
)

// readback follows what the group has published, whoever published it:
// every ilb.features record (the windows of every signals partition) and
// the latest ilb.profiles record. Each instance runs one, so that
//
//   - a new owner of a partition knows which of its windows the previous
//     owner already published, and does not publish them again (a crash
//     between a publish and its commit would otherwise repeat them);
//   - the instance that fits profiles (the owner of signals partition 0,
//     see fitter.go) has the windows of every partition in its history,
//     knows how far each partition has got, and continues the fit schedule
//     and the profile table where the previous fitter left them.
//
// It is a plain consumer (no group) with its own client; only its own
// goroutine polls. The state it builds is guarded by mu.
type readback struct {
	hist *history
	cfg  Config
	now  func() time.Time

	mu        sync.Mutex
	changed   *sync.Cond
	cl        *kgo.Client                // nil until run has connected
	parts     int32                      // partitions of the signals topic (0: not known)
	next      map[string]map[int32]int64 // topic -> partition -> next offset to read
	published map[int32]int64            // signals partition -> newest window end published
	seenAt    map[int32]time.Time        // signals partition -> when its newest window was read
	asOf      int64                      // ilb-as-of of the newest profiles record (0: none)
	table     []schemas.Profile          // that record's profiles
	err       error                      // the reader stopped (set once)
}

// newReadback returns a reader that starts polling when run.
func (a *Aggregator) newReadback() *readback {
	rb := &readback{hist: a.hist, cfg: a.cfg, now: a.now, next: map[string]map[int32]int64{},
		published: map[int32]int64{}, seenAt: map[int32]time.Time{}}
	rb.changed = sync.NewCond(&rb.mu)
	return rb
}

// connect creates the reader's client, starting each features partition
// far enough back to fill the fits' history, and the profiles topic as
// far back (one record per fit: more than the last one).
func (rb *readback) connect(ctx context.Context) (*kgo.Client, error) {
	opts, err := rb.cfg.Kafka.Opts()
	if err != nil {
		return nil, fmt.Errorf("aggregator: %w", err)
	}
	parts := rb.signalsTopicPartitions(ctx, opts)
	rb.mu.Lock()
	rb.parts = int32(parts)
	rb.mu.Unlock()
	back := rb.historyRecords(max(parts, 16))
	opts = append(opts,
		kgo.ConsumeTopics(rb.cfg.FeaturesTopic, rb.cfg.ProfilesTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd().Relative(-back)),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("aggregator: kafka client for read-back: %w", err)
	}
	return cl, nil
}

// historyRecords is how many records back each features partition is read
// from: the history's windows of each of parts signals partitions (in the
// worst case all on one features partition). The profiles topic is read
// from as far back, which at one record per fit is more than the last one.
func (rb *readback) historyRecords(parts int) int64 {
	hop := rb.cfg.Hop
	if hop <= 0 {
		hop = rb.cfg.Window
	}
	perWindow := max(int64(rb.cfg.Window/hop), 1)
	return int64(rb.cfg.HistoryWindows+historySlack) * perWindow * int64(parts)
}

// signalsTopicPartitions returns the partition count of the signals topic;
// 0 when it cannot be described in time.
func (rb *readback) signalsTopicPartitions(ctx context.Context, opts []kgo.Opt) int {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return 0
	}
	defer cl.Close()
	tctx, cancel := context.WithTimeout(ctx, rb.cfg.PublishTimeout)
	defer cancel()
	td, err := kadm.NewClient(cl).ListTopics(tctx, rb.cfg.SignalsTopic)
	if err != nil {
		return 0
	}
	if t, ok := td[rb.cfg.SignalsTopic]; ok && t.Err == nil {
		return len(t.Partitions)
	}
	return 0
}

// signalsPartitions yields the partitions of the signals topic: as
// described at start, plus any a window was read back from.
func (rb *readback) signalsPartitions() func(yield func(int32) bool) {
	rb.mu.Lock()
	n := rb.parts
	extra := slices.Sorted(maps.Keys(rb.published))
	rb.mu.Unlock()
	return func(yield func(int32) bool) {
		for p := range n {
			if !yield(p) {
				return
			}
		}
		for _, p := range extra {
			if p >= n && !yield(p) {
				return
			}
		}
	}
}

// run connects and polls until ctx ends.
func (rb *readback) run(ctx context.Context) error {
	cl, err := rb.connect(ctx)
	if err != nil {
		rb.stop(err)
		return err
	}
	defer cl.Close()
	rb.mu.Lock()
	rb.cl = cl
	rb.changed.Broadcast()
	rb.mu.Unlock()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			rb.stop(nil)
			return nil
		}
		if fs.IsClientClosed() {
			err := errors.New("aggregator: read-back client closed")
			rb.stop(err)
			return err
		}
		for it := fs.RecordIter(); !it.Done(); {
			rb.add(it.Next())
		}
	}
}

func (rb *readback) stop(err error) {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	rb.err = cmpOr(err, errors.New("aggregator: read-back stopped"))
	rb.changed.Broadcast()
}

// add takes one record in. A record that does not decode is skipped: the
// optimizer counts bad input on these topics; here it only costs a
// history point.
func (rb *readback) add(r *kgo.Record) {
	switch r.Topic {
	case rb.cfg.FeaturesTopic:
		rb.addFeatures(r)
	case rb.cfg.ProfilesTopic:
		rb.addProfiles(r)
	}
	rb.mu.Lock()
	defer rb.mu.Unlock()
	if rb.next[r.Topic] == nil {
		rb.next[r.Topic] = map[int32]int64{}
	}
	rb.next[r.Topic][r.Partition] = r.Offset + 1
	rb.changed.Broadcast()
}

func (rb *readback) addFeatures(r *kgo.Record) {
	id, err := windowID(r)
	if err != nil {
		return
	}
	rows, err := decodeRows(r.Value, schemas.FeaturesFromRecord)
	if err != nil {
		return
	}
	for i := range rows {
		rb.hist.addRow(&rows[i])
	}
	rb.mu.Lock()
	defer rb.mu.Unlock()
	if id.End > rb.published[id.Partition] {
		rb.published[id.Partition] = id.End
	}
	rb.seenAt[id.Partition] = rb.now()
}

func (rb *readback) addProfiles(r *kgo.Record) {
	asOf := headerInt(r, schemas.HeaderAsOf)
	rows, err := decodeRows(r.Value, schemas.ProfilesFromRecord)
	if err != nil || asOf == 0 {
		return // no as-of: a wall-clock fitter's, which keeps no schedule
	}
	rb.mu.Lock()
	defer rb.mu.Unlock()
	if asOf >= rb.asOf {
		rb.asOf, rb.table = asOf, rows
	}
}

// headerInt is r's header key as a positive decimal integer; 0 when it is
// missing or not one.
func headerInt(r *kgo.Record, key string) int64 {
	for _, h := range r.Headers {
		if h.Key == key {
			if v, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil && v > 0 {
				return v
			}
		}
	}
	return 0
}

// decodeRows reads the Arrow IPC stream in value into rows.
func decodeRows[T any](value []byte, rows func(arrow.RecordBatch) ([]T, error)) ([]T, error) {
	recs, _, err := arrowipc.DecodeStream(value, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	defer arrowipc.Release(recs)
	var out []T
	for _, rec := range recs {
		got, err := rows(rec)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}

// catchUp waits until the reader has read everything the two topics held
// when it was called, at most d; false when it could not (the brokers do
// not answer, the reader stopped). Call it without holding Aggregator.mu.
func (rb *readback) catchUp(ctx context.Context, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		rb.mu.Lock()
		defer rb.mu.Unlock()
		rb.changed.Broadcast()
	})
	defer stop()
	cl := rb.client(ctx)
	if cl == nil {
		return false
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, rb.cfg.FeaturesTopic, rb.cfg.ProfilesTopic)
	if err != nil || ends.Error() != nil {
		return false
	}
	want := map[string]map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			if want[o.Topic] == nil {
				want[o.Topic] = map[int32]int64{}
			}
			want[o.Topic][o.Partition] = o.Offset
		}
	})
	rb.mu.Lock()
	defer rb.mu.Unlock()
	for !rb.reachedLocked(want) {
		if rb.err != nil || ctx.Err() != nil {
			return false
		}
		rb.changed.Wait()
	}
	return true
}

// client waits until run has connected; nil when ctx ends first or the
// reader stopped.
func (rb *readback) client(ctx context.Context) *kgo.Client {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	for rb.cl == nil {
		if rb.err != nil || ctx.Err() != nil {
			return nil
		}
		rb.changed.Wait()
	}
	return rb.cl
}

func (rb *readback) reachedLocked(want map[string]map[int32]int64) bool {
	for topic, parts := range want {
		for p, end := range parts {
			if rb.next[topic][p] < end {
				return false
			}
		}
	}
	return true
}

// publishedUpTo returns the newest window end read back for signals
// partition p (0: none).
func (rb *readback) publishedUpTo(p int32) int64 {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	return rb.published[p]
}

// frontiers returns, for every signals partition read back, the newest
// window end and when it was read.
func (rb *readback) frontiers() (map[int32]int64, map[int32]time.Time) {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	return maps.Clone(rb.published), maps.Clone(rb.seenAt)
}

// lastProfiles returns the as-of time and the rows of the newest profiles
// record on the event clock (0 and nil: none).
func (rb *readback) lastProfiles() (int64, []schemas.Profile) {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	return rb.asOf, rb.table
}

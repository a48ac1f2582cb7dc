package aggregator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/ilb-router/ilb/streams/kafka"
)

// connect builds the Run's one franz-go client: a member of the consumer
// group on the signals topic that commits only what the aggregator tells
// it (never automatically), and the producer of every output topic.
func (a *Aggregator) connect(ctx context.Context) (*kgo.Client, error) {
	opts, err := a.cfg.Kafka.Opts()
	if err != nil {
		return nil, fmt.Errorf("aggregator: %w", err)
	}
	opts = append(opts,
		kgo.ConsumerGroup(a.cfg.Group),
		kgo.ConsumeTopics(a.cfg.SignalsTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(a.onAssigned),
		kgo.OnPartitionsRevoked(a.onRevoked),
		kgo.OnPartitionsLost(a.onLost),
		kgo.SessionTimeout(a.cfg.SessionTimeout),
		kgo.HeartbeatInterval(a.cfg.HeartbeatInterval),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("aggregator: kafka client: %w", err)
	}
	if a.cfg.CreateTopics {
		tctx, cancel := context.WithTimeout(ctx, a.cfg.PublishTimeout)
		err := kafka.EnsureTopics(tctx, cl, -1, -1, a.cfg.SignalsTopic, a.cfg.DLQTopic, a.cfg.FeaturesTopic, a.cfg.ProfilesTopic)
		cancel()
		if err != nil {
			a.log.Warn("aggregator: could not create topics; continuing with what exists", "err", err)
		}
	}
	return cl, nil
}

// consume is the consumer loop: poll, handle, allow rebalances, until ctx
// ends. Failures of the group, fetches, publishing and commits are
// reported through a troubles (rate-limited warnings); the consumer is
// healthy while it is in the group and no failure has persisted.
func (a *Aggregator) consume(ctx context.Context, cl *kgo.Client) error {
	tr := newTroubles(a.log, a.cfg.Group)
	for {
		pctx, cancel := context.WithTimeout(ctx, a.cfg.PollInterval)
		fs := cl.PollRecords(pctx, a.cfg.MaxPollRecords)
		cancel()
		if ctx.Err() != nil {
			cl.AllowRebalance()
			return nil // what was polled is not handled, hence not committed
		}
		if fs.IsClientClosed() {
			return errors.New("aggregator: kafka client closed")
		}
		now := a.now()
		a.fetchErrors(now, tr, fs)
		member, gen := cl.GroupMetadata()
		tr.membership(now, member, gen)
		if tr.probeDue(now) {
			tr.probed(now, ping(ctx, cl))
		}
		recs := fs.Records()
		res := a.handle(ctx, cl, recs)
		tr.outcome(now, troublePublish, res.pubErr) // nil: nothing left to publish
		if res.committed {
			tr.outcome(now, troubleCommit, res.commitErr)
		}
		if len(recs) > 0 {
			tr.outcome(now, troubleFetch, nil)
		}
		switch why := tr.reason(now); {
		case why != "":
			a.health.SetReason("consumer", false, why)
		case gen < 0:
			a.health.SetReason("consumer", false, "not in consumer group "+a.cfg.Group)
		default:
			a.health.Set("consumer", true)
		}
		cl.AllowRebalance()
	}
}

// fetchErrors reports the polled errors: group-session errors (joining,
// syncing, heartbeats) and partition fetch errors.
func (a *Aggregator) fetchErrors(now time.Time, tr *troubles, fs kgo.Fetches) {
	fs.EachError(func(topic string, p int32, err error) {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return
		}
		var gs *kgo.ErrGroupSession
		if errors.As(err, &gs) {
			tr.failed(now, troubleGroup, err)
			return
		}
		tr.failed(now, troubleFetch, fmt.Errorf("topic %s partition %d: %w", topic, p, err))
	})
}

// batchResult is how publishing and committing a batch went.
type batchResult struct {
	pubErr    error // nil: nothing is left to publish
	committed bool  // a commit was attempted
	commitErr error
}

// handle applies one polled batch, emits the windows it closed, publishes
// and commits.
func (a *Aggregator) handle(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) (res batchResult) {
	ctx, span := a.tracer.Start(ctx, "aggregator.batch", trace.WithAttributes(attribute.Int("records", len(recs))))
	defer span.End()
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	var bc batchCounts
	for _, r := range recs {
		a.core.add(r, now, &bc)
	}
	a.cnt.addBatch(&bc)
	if _, err := a.core.drain(now); err != nil {
		a.log.Warn("aggregator: windows", "err", err)
	}
	if a.cfg.Clock == ClockEvent {
		a.fitDueLocked(ctx, now)
	}
	res.pubErr = a.publishLocked(ctx, cl)
	a.backpressureLocked(cl)
	if res.pubErr == nil && (a.core.emits > 0 || now.Sub(a.lastCommit) >= a.cfg.CommitInterval) {
		res.committed, res.commitErr = a.commitLocked(ctx, cl, nil)
	}
	return res
}

// backpressureLocked stops fetching signals while more than
// MaxPendingRecords wait to be published (Kafka refuses the output), so
// memory stays bounded, and resumes once they are out.
func (a *Aggregator) backpressureLocked(cl *kgo.Client) {
	switch n := len(a.core.outbox); {
	case n > a.cfg.MaxPendingRecords && !a.paused:
		cl.PauseFetchTopics(a.cfg.SignalsTopic)
		a.paused = true
		a.log.Warn("aggregator: output not acknowledged; consumption paused", "pending", n)
	case n == 0 && a.paused:
		cl.ResumeFetchTopics(a.cfg.SignalsTopic)
		a.paused = false
		a.log.Info("aggregator: output flowing again; consumption resumed")
	}
}

// publishLocked produces every pending record (features and DLQ) and
// waits for the acknowledgements. Records that failed stay pending, and
// offsets are not committed until they are out; it returns nil when
// nothing is left.
func (a *Aggregator) publishLocked(ctx context.Context, cl *kgo.Client) error {
	out := a.core.outbox
	if len(out) == 0 {
		return nil
	}
	ctx, span := a.tracer.Start(ctx, "aggregator.publish", trace.WithAttributes(attribute.Int("records", len(out))))
	defer span.End()
	for _, r := range out {
		if r.Topic == a.cfg.FeaturesTopic && !hasHeader(r, "traceparent") {
			kafka.InjectTrace(ctx, a.prop, r)
		}
	}
	pctx, cancel := context.WithTimeout(ctx, a.cfg.PublishTimeout)
	defer cancel()
	var failed []*kgo.Record
	var first error
	for _, res := range cl.ProduceSync(pctx, out...) {
		if res.Err != nil {
			failed = append(failed, res.Record)
			first = cmpOr(first, res.Err)
		} else if res.Record.Topic == a.cfg.ProfilesTopic {
			a.cnt.profilesPublished.Add(1)
		}
	}
	clear(out)
	a.core.outbox = append(out[:0], failed...)
	if len(failed) > 0 {
		a.cnt.publishFailed.Add(1)
		return fmt.Errorf("%d records not acknowledged; will retry, offsets wait: %w", len(failed), first)
	}
	return nil
}

func hasHeader(r *kgo.Record, key string) bool {
	for _, h := range r.Headers {
		if h.Key == key {
			return true
		}
	}
	return false
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// commitLocked commits the commit point of every dirty partition (or of
// only those listed), each with its window checkpoint as metadata. It
// reports whether there was anything to commit, and why some could not be
// (they are retried with the next commit).
func (a *Aggregator) commitLocked(ctx context.Context, cl *kgo.Client, only []int32) (bool, error) {
	offs := map[int32]kgo.EpochOffset{}
	meta := map[int32]string{}
	for p, ps := range a.core.parts {
		if ps.dirty() && (only == nil || slices.Contains(only, p)) {
			offs[p] = kgo.EpochOffset{Epoch: -1, Offset: ps.commit}
			meta[p] = ps.meta
		}
	}
	a.lastCommit, a.core.emits = a.now(), 0
	if len(offs) == 0 || a.noCommit.Load() {
		return false, nil
	}
	err := commitWithMetadata(ctx, cl, a.cfg.SignalsTopic, offs, meta)
	for p, o := range offs {
		if ps := a.core.parts[p]; ps != nil {
			ps.committed = o.Offset
		}
	}
	return true, err
}

// commitWithMetadata commits offs of topic in one synchronous request,
// each partition with its metadata, and removes from offs the partitions
// whose commit failed.
func commitWithMetadata(ctx context.Context, cl *kgo.Client, topic string, offs map[int32]kgo.EpochOffset, meta map[int32]string) error {
	ctx = kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		for i := range req.Topics {
			for j := range req.Topics[i].Partitions {
				rp := &req.Topics[i].Partitions[j]
				if m, ok := meta[rp.Partition]; ok {
					rp.Metadata = &m
				}
			}
		}
		return nil
	})
	var cerr error
	cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{topic: offs},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				cerr = err
				clear(offs)
				return
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if e := kerr.ErrorForCode(p.ErrorCode); e != nil {
						cerr = errors.Join(cerr, fmt.Errorf("partition %d: %w", p.Partition, e))
						delete(offs, p.Partition)
					}
				}
			}
		})
	return cerr
}

// onAssigned restores each newly assigned partition from the checkpoint
// stored with its committed offset, and from what the group already
// published: windows the previous owner published after its last commit
// are not published again.
func (a *Aggregator) onAssigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	parts := assigned[a.cfg.SignalsTopic]
	if len(parts) == 0 {
		return
	}
	offs := a.fetchCommitted(ctx, cl)
	caughtUp := a.rb != nil && a.rb.catchUp(ctx, a.cfg.PublishTimeout)
	if a.rb != nil && !caughtUp {
		a.log.Warn("aggregator: could not read what the group published; windows published before a crash may be published again",
			"partitions", parts)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	for _, p := range parts {
		committed, meta := int64(-1), ""
		if o, ok := offs.Lookup(a.cfg.SignalsTopic, p); ok && o.Err == nil && o.At >= 0 {
			committed, meta = o.At, o.Metadata
		}
		ps, err := newPartition(p, a.core.fc, committed, meta, now)
		if err != nil && !errors.Is(err, errNoCheckpoint) {
			a.cnt.checkpointBad.Add(1)
			a.log.Error("aggregator: window checkpoint unusable; the partition starts with empty windows",
				"partition", p, "offset", committed, "err", err)
		}
		if ps == nil {
			continue
		}
		if err == nil && committed >= 0 && caughtUp {
			// Restored: what it re-emits up to here is already out.
			ps.published = a.rb.publishedUpTo(p)
		}
		a.core.parts[p] = ps
	}
	a.partitionsMovedLocked(parts, nil)
	a.log.Info("aggregator: partitions assigned", "partitions", parts, "fitter", a.fitter.Load())
}

// fetchCommitted reads the group's committed offsets and their metadata,
// retrying for a while: without them a restored partition could double
// count (README.md, Guarantees).
func (a *Aggregator) fetchCommitted(ctx context.Context, cl *kgo.Client) kadm.OffsetResponses {
	adm := kadm.NewClient(cl)
	deadline := a.now().Add(a.cfg.PublishTimeout)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		fctx, cancel := context.WithTimeout(ctx, a.cfg.PublishTimeout)
		offs, err := adm.FetchOffsets(fctx, a.cfg.Group)
		cancel()
		if err == nil {
			return offs
		}
		if ctx.Err() != nil || a.now().After(deadline) {
			a.cnt.checkpointBad.Add(1)
			a.log.Error("aggregator: cannot read committed offsets; assigned partitions start with empty windows", "err", err)
			return nil
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
	}
}

// onRevoked publishes what is pending and commits the revoked partitions
// before they move, then forgets them.
func (a *Aggregator) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	parts := revoked[a.cfg.SignalsTopic]
	if len(parts) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.publishThenCommitLocked(ctx, cl, parts, "partitions revoked")
	a.forgetLocked(parts)
	a.partitionsMovedLocked(nil, parts)
}

// publishThenCommitLocked publishes what is pending and, if that worked,
// commits (only, or every dirty partition when nil), logging a failure:
// for the one-off flushes of a revoke or a shutdown.
func (a *Aggregator) publishThenCommitLocked(ctx context.Context, cl *kgo.Client, only []int32, why string) {
	if err := a.publishLocked(ctx, cl); err != nil {
		a.log.Warn("aggregator: publish failed; "+why, "err", err)
		return
	}
	if _, err := a.commitLocked(ctx, cl, only); err != nil {
		a.log.Warn("aggregator: commit failed; "+why, "err", err)
	}
}

// onLost forgets partitions that were taken away without a revoke: their
// uncommitted work is redone by the next owner.
func (a *Aggregator) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	parts := lost[a.cfg.SignalsTopic]
	a.forgetLocked(parts)
	a.partitionsMovedLocked(nil, parts)
	if len(parts) > 0 { // franz-go calls this after every failed rejoin too
		a.log.Warn("aggregator: partitions lost", "partitions", parts)
	}
}

func (a *Aggregator) forgetLocked(parts []int32) {
	for _, p := range parts {
		if ps := a.core.parts[p]; ps != nil {
			a.core.countWindowStats(ps)
		}
		a.core.drop(p)
		delete(a.emitted, p)
	}
}

// shutdown publishes and commits what it can, leaves the group, closes the
// client and finishes the output files.
func (a *Aggregator) shutdown(cl *kgo.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.PublishTimeout)
	defer cancel()
	a.mu.Lock()
	a.publishThenCommitLocked(ctx, cl, nil, "shutting down")
	a.mu.Unlock()
	if err := cl.LeaveGroupContext(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		a.log.Warn("aggregator: leave group", "err", err)
	}
	cl.Close()
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	if a.featFile != nil {
		errs = append(errs, a.featFile.close())
	}
	if a.profFile != nil {
		errs = append(errs, a.profFile.close())
	}
	return errors.Join(errs...)
}

// sortedParts returns the owned partitions in order (for logs and tests).
func (a *Aggregator) sortedParts() []int32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Sorted(maps.Keys(a.core.parts))
}

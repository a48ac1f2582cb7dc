package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Handler processes one polled batch. Returning nil marks the batch
// handled: its offsets will be committed. Returning an error ends RunGroup
// and the batch is not committed. The slice and records are the handler's
// to keep.
type Handler func(ctx context.Context, recs []*kgo.Record) error

// GroupConfig configures RunGroup.
type GroupConfig struct {
	Client ClientConfig
	// Group is the consumer group id.
	Group string
	// Topics are consumed by the group.
	Topics []string
	// MaxPollRecords bounds one handler batch.
	MaxPollRecords int
	// CommitInterval is how often handled offsets are committed while
	// running (they are also committed on revocation and on exit).
	CommitInterval time.Duration
	// StartAtEnd makes a group with no committed offsets start at the end
	// of each partition instead of the beginning.
	StartAtEnd bool
	// SessionTimeout is how long the group waits for a silent member
	// before giving its partitions away; HeartbeatInterval is how often a
	// member proves it is alive (and learns of rebalances).
	SessionTimeout, HeartbeatInterval time.Duration
	// CloseTimeout bounds the final commit and group leave.
	CloseTimeout time.Duration
	// Logger receives the loop's warnings; nil discards them.
	Logger *slog.Logger
}

// DefaultGroupConfig returns a configuration for group on topics against
// the local embedded broker.
func DefaultGroupConfig(group string, topics ...string) GroupConfig {
	return GroupConfig{
		Client:            DefaultClientConfig(),
		Group:             group,
		Topics:            topics,
		MaxPollRecords:    1000,
		CommitInterval:    time.Second,
		SessionTimeout:    10 * time.Second,
		HeartbeatInterval: time.Second,
		CloseTimeout:      10 * time.Second,
	}
}

// Validate reports the first problem with c.
func (c GroupConfig) Validate() error {
	if err := c.Client.Validate(); err != nil {
		return err
	}
	switch {
	case c.Group == "":
		return errors.New("kafka: group id is empty")
	case len(c.Topics) == 0:
		return errors.New("kafka: group has no topics")
	case c.MaxPollRecords < 1:
		return fmt.Errorf("kafka: max poll records %d must be at least 1", c.MaxPollRecords)
	case c.CommitInterval <= 0 || c.CloseTimeout <= 0:
		return fmt.Errorf("kafka: commit interval %v and close timeout %v must be positive", c.CommitInterval, c.CloseTimeout)
	case c.HeartbeatInterval <= 0 || c.SessionTimeout <= c.HeartbeatInterval:
		return fmt.Errorf("kafka: heartbeat interval %v must be positive and below the session timeout %v", c.HeartbeatInterval, c.SessionTimeout)
	}
	return nil
}

// RunGroup joins the consumer group and calls h with each polled batch
// until ctx is cancelled (then it returns nil) or h fails (then it returns
// h's error, wrapped). Before returning it commits every handled batch,
// leaves the group and closes its client.
//
// Rebalances happen only between handler calls, and revoked partitions
// get their handled offsets committed before they move, so a handled
// record is not redelivered in the normal course of events; a handler
// error or a crash redelivers from the last commit.
func RunGroup(ctx context.Context, cfg GroupConfig, h Handler) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if h == nil {
		return errors.New("kafka: nil handler")
	}
	g := &groupRun{cfg: cfg, h: h, log: cfg.Logger}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	opts, err := g.opts()
	if err != nil {
		return err
	}
	if g.cl, err = kgo.NewClient(opts...); err != nil {
		return fmt.Errorf("kafka: group %s: new client: %w", cfg.Group, err)
	}
	err = g.loop(ctx)
	return errors.Join(err, g.close())
}

type groupRun struct {
	cfg GroupConfig
	h   Handler
	log *slog.Logger
	cl  *kgo.Client
}

func (g *groupRun) opts() ([]kgo.Opt, error) {
	opts, err := g.cfg.Client.Opts()
	if err != nil {
		return nil, err
	}
	start := kgo.NewOffset().AtStart()
	if g.cfg.StartAtEnd {
		start = kgo.NewOffset().AtEnd()
	}
	return append(opts,
		kgo.ConsumerGroup(g.cfg.Group),
		kgo.ConsumeTopics(g.cfg.Topics...),
		kgo.ConsumeResetOffset(start),
		// Only records the handler finished are marked, and only marks
		// are committed: the periodic autocommit, the revoke callback
		// and the final commit all commit marks.
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(g.cfg.CommitInterval),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsRevoked(g.onRevoked),
		kgo.OnPartitionsLost(g.onLost),
		kgo.SessionTimeout(g.cfg.SessionTimeout),
		kgo.HeartbeatInterval(g.cfg.HeartbeatInterval),
	), nil
}

func (g *groupRun) loop(ctx context.Context) error {
	backoff := newBackoff(50*time.Millisecond, 5*time.Second)
	for {
		fs := g.cl.PollRecords(ctx, g.cfg.MaxPollRecords)
		if fs.IsClientClosed() || ctx.Err() != nil {
			return nil
		}
		failed := g.logFetchErrors(fs)
		recs := fs.Records()
		if len(recs) > 0 {
			if err := g.h(ctx, recs); err != nil {
				if ctx.Err() != nil {
					return nil // cancelled mid-batch: not handled, not committed
				}
				return fmt.Errorf("kafka: group %s: handler: %w", g.cfg.Group, err)
			}
			g.cl.MarkCommitRecords(recs...)
		}
		g.cl.AllowRebalance()
		if failed && len(recs) == 0 && !backoff.wait(ctx) {
			return nil // errors with nothing to do: do not spin
		}
		if !failed {
			backoff.reset()
		}
	}
}

func (g *groupRun) logFetchErrors(fs kgo.Fetches) bool {
	failed := false
	fs.EachError(func(topic string, p int32, err error) {
		if errors.Is(err, context.Canceled) {
			return
		}
		failed = true
		g.log.Warn("kafka: fetch failed", "group", g.cfg.Group, "topic", topic, "partition", p, "err", err)
	})
	return failed
}

// onRevoked commits what was handled on partitions about to move, so the
// next owner starts after it.
func (g *groupRun) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	if err := cl.CommitMarkedOffsets(ctx); err != nil {
		g.log.Warn("kafka: commit on revoke failed; the next owner will redeliver",
			"group", g.cfg.Group, "partitions", len(revoked), "err", err)
	}
}

func (g *groupRun) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	g.log.Warn("kafka: partitions lost; uncommitted work will be redelivered", "group", g.cfg.Group, "topics", len(lost))
}

// close commits handled offsets, leaves the group and closes the client,
// waiting at most CloseTimeout for the commit and the leave.
func (g *groupRun) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), g.cfg.CloseTimeout)
	defer cancel()
	err := g.cl.CommitMarkedOffsets(ctx)
	if err != nil {
		err = fmt.Errorf("kafka: group %s: final commit: %w", g.cfg.Group, err)
	}
	g.cl.AllowRebalance()
	if lerr := g.cl.LeaveGroupContext(ctx); lerr != nil && !errors.Is(lerr, context.DeadlineExceeded) {
		g.log.Warn("kafka: leave group", "group", g.cfg.Group, "err", lerr)
	}
	g.cl.Close()
	return err
}

// backoff doubles a wait from min to max.
type backoff struct{ cur, min, max time.Duration }

func newBackoff(lo, hi time.Duration) *backoff { return &backoff{cur: lo, min: lo, max: hi} }

func (b *backoff) reset() { b.cur = b.min }

// wait sleeps for the current delay and doubles it; false if ctx ended.
func (b *backoff) wait(ctx context.Context) bool {
	t := time.NewTimer(b.cur)
	defer t.Stop()
	b.cur = min(2*b.cur, b.max)
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

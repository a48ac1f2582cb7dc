package kv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// WatchOption tunes Watch.
type WatchOption func(*watchOptions)

type watchOptions struct {
	includeDeletes bool
	conn           *nats.Conn
	retryMin       time.Duration
	retryMax       time.Duration
	stallCheck     time.Duration
	log            *slog.Logger
}

// DefaultStallCheck is how often Watch checks, by default, that a watched
// key has not been written past what the watcher delivered.
const DefaultStallCheck = 2 * time.Second

// StallCheck sets how often Watch reads a watched key's latest revision
// to catch a watcher that stopped delivering (0 turns the check off; it
// only applies to a single key, not to a pattern). A watcher whose
// consumer lived on a cluster node that went away, or whose stream changed
// leader, delivers nothing until nats.go misses enough heartbeats (about
// 20 s, measured with nats.go v1.55 on a 3-node cluster); a key written
// past what was delivered for one whole period makes Watch re-create
// the watcher at once instead.
func StallCheck(every time.Duration) WatchOption {
	return func(o *watchOptions) { o.stallCheck = every }
}

// IncludeDeletes delivers deletes and purges too (Entry.Op says which);
// by default they are skipped, so a consumer keeps its last value.
func IncludeDeletes() WatchOption { return func(o *watchOptions) { o.includeDeletes = true } }

// RewatchOnReconnect re-creates the watcher as soon as nc reconnects;
// pass the connection kv was made from. Without it a watcher whose server
// restarted recovers on its own only once the client notices missed idle
// heartbeats: about 20 s after the restart, measured with nats.go v1.55.
func RewatchOnReconnect(nc *nats.Conn) WatchOption { return func(o *watchOptions) { o.conn = nc } }

// RetryBackoff sets the pause between attempts to re-create a failed
// watcher, doubling from lo to hi (default 100 ms to 5 s).
func RetryBackoff(lo, hi time.Duration) WatchOption {
	return func(o *watchOptions) { o.retryMin, o.retryMax = lo, hi }
}

// WatchLogger logs watcher restarts to log.
func WatchLogger(log *slog.Logger) WatchOption { return func(o *watchOptions) { o.log = log } }

// errReconnected and errWatchEnded end one watcher; Watch makes another.
var (
	errReconnected = errors.New("kv: connection re-established")
	errWatchEnded  = errors.New("kv: watcher ended")
	errStalled     = errors.New("kv: watcher stalled: the key was written past what it delivered")
)

// fatal marks an error that ends Watch instead of causing a re-watch.
type fatal struct{ err error }

func (f fatal) Error() string { return f.err.Error() }
func (f fatal) Unwrap() error { return f.err }

// Watch calls fn for the latest entry of every key matching keys (a key,
// or a pattern with * and >), then calls initialDone once (it may be nil),
// then calls fn for every update, until ctx ends (it returns nil) or fn
// fails (it returns fn's error) or the connection is closed.
//
// A watcher that ends or fails is re-created with backoff; each new
// watcher delivers the latest entries again (see the package doc on
// duplicates), but initialDone is not called again.
func Watch(ctx context.Context, kv jetstream.KeyValue, keys string, fn func(Entry) error, initialDone func(), opts ...WatchOption) error {
	if fn == nil {
		return errors.New("kv: watch: nil callback")
	}
	if err := validPattern(keys); err != nil {
		return fmt.Errorf("kv: watch: %w", err)
	}
	w := &watcher{kv: kv, keys: keys, fn: fn, initialDone: initialDone,
		o:         watchOptions{retryMin: 100 * time.Millisecond, retryMax: 5 * time.Second, stallCheck: DefaultStallCheck},
		delivered: map[string]uint64{}}
	for _, opt := range opts {
		opt(&w.o)
	}
	if w.o.retryMin <= 0 || w.o.retryMax < w.o.retryMin {
		return fmt.Errorf("kv: watch: bad retry backoff %v..%v", w.o.retryMin, w.o.retryMax)
	}
	if w.o.log == nil {
		w.o.log = slog.New(slog.DiscardHandler)
	}
	var status chan nats.Status
	if w.o.conn != nil {
		status = w.o.conn.StatusChanged(nats.CONNECTED)
		defer w.o.conn.RemoveStatusListener(status)
	}
	return w.run(ctx, status)
}

type watcher struct {
	kv          jetstream.KeyValue
	keys        string
	fn          func(Entry) error
	initialDone func()
	o           watchOptions
	doneCalled  bool
	delivered   map[string]uint64 // key -> newest revision delivered
	pending     uint64            // a revision of the key the stall check saw undelivered
}

func (w *watcher) run(ctx context.Context, status <-chan nats.Status) error {
	pause := w.o.retryMin
	for {
		err := w.once(ctx, status)
		var f fatal
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &f):
			return f.err
		case errors.Is(err, errReconnected):
			pause = w.o.retryMin
			continue
		case errors.Is(err, errStalled):
			w.o.log.Warn("kv: watcher stalled; watching again", "bucket", w.kv.Bucket(), "keys", w.keys)
			continue
		}
		w.o.log.Warn("kv: watch interrupted; watching again", "bucket", w.kv.Bucket(), "keys", w.keys, "err", err, "in", pause)
		if !sleep(ctx, pause, status) {
			return nil
		}
		pause = min(2*pause, w.o.retryMax)
	}
}

// once runs one watcher until it ends, the connection comes back, ctx
// ends or fn fails.
func (w *watcher) once(ctx context.Context, status <-chan nats.Status) error {
	var opts []jetstream.WatchOpt
	if !w.o.includeDeletes {
		opts = append(opts, jetstream.IgnoreDeletes())
	}
	kw, err := w.kv.Watch(ctx, w.keys, opts...)
	switch {
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, jetstream.ErrInvalidKey):
		return fatal{fmt.Errorf("kv: watch %s/%s: %w", w.kv.Bucket(), w.keys, err)}
	case err != nil:
		return fmt.Errorf("kv: watch %s/%s: %w", w.kv.Bucket(), w.keys, err)
	}
	defer kw.Stop()
	stall := w.newStallCheck()
	defer stall.stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-status:
			return errReconnected
		case <-stall.c:
			if w.stalled(ctx) {
				return errStalled
			}
		case e, ok := <-kw.Updates():
			if !ok {
				return errWatchEnded
			}
			if err := w.deliver(e); err != nil {
				return fatal{fmt.Errorf("kv: watch %s/%s: %w", w.kv.Bucket(), w.keys, err)}
			}
		}
	}
}

// deliver passes e to fn; nil is jetstream's "initial values done" marker.
func (w *watcher) deliver(e jetstream.KeyValueEntry) error {
	if e != nil {
		w.delivered[e.Key()] = max(w.delivered[e.Key()], e.Revision())
		return w.fn(toEntry(e))
	}
	if !w.doneCalled {
		w.doneCalled = true
		if w.initialDone != nil {
			w.initialDone()
		}
	}
	return nil
}

// validPattern checks a key pattern: dot-separated tokens, each a name,
// "*" (any one token) or a final ">" (the rest). A '*' or '>' inside a
// token is not a wildcard to NATS, and such a pattern would silently match
// nothing.
func validPattern(keys string) error {
	tokens := strings.Split(keys, ".")
	for i, tok := range tokens {
		switch {
		case tok == "":
			return fmt.Errorf("key pattern %q has an empty token", keys)
		case tok == ">" && i != len(tokens)-1:
			return fmt.Errorf("key pattern %q: '>' must be the last token", keys)
		case tok != "*" && tok != ">" && strings.ContainsAny(tok, "*> \t"):
			return fmt.Errorf("key pattern %q: token %q mixes a wildcard or space with other characters", keys, tok)
		}
	}
	return nil
}

// sleep waits d; false if ctx ended. A reconnect cuts the wait short.
func sleep(ctx context.Context, d time.Duration, status <-chan nats.Status) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-status:
	case <-ctx.Done():
		return false
	}
	return true
}

package dataplane

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ilb-router/ilb/services/internal/run"
	"github.com/ilb-router/ilb/streams/kv"
)

// runKV watches each served cluster's key in the weights bucket. The
// watch survives reconnects and re-delivers the latest value after each;
// re-deliveries of the snapshot in use are no-ops and older ones are
// rejected, so duplicates are harmless. A bad value is rejected (counted,
// logged) and the watch goes on: the previous snapshot keeps serving.
func (d *DataPlane) runKV(ctx context.Context) error {
	b := d.deps.Weights
	if b == nil {
		var err error
		if b, err = d.openBucket(ctx); err != nil {
			return err
		}
	}
	var g run.Group
	for _, c := range d.order {
		g.Add("watch "+c.name, func(ctx context.Context) error {
			return d.watchCluster(ctx, b, c.name)
		})
	}
	return g.Run(ctx)
}

// openBucket opens the weights bucket, waiting (with backoff) until NATS
// is reachable and the optimizer has created it. A connection closed for
// good (the server refused the credentials) ends the wait with the
// server's reason: it would never open.
func (d *DataPlane) openBucket(ctx context.Context) (jetstream.KeyValue, error) {
	pause := 100 * time.Millisecond
	for logged := false; ; {
		b, err := d.deps.JetStream.KeyValue(ctx, d.cfg.Bucket)
		if err == nil {
			return b, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, nats.ErrConnectionClosed) {
			return nil, fmt.Errorf("weights bucket %s: %w", d.cfg.Bucket, d.connError(err))
		}
		if !logged || pause >= 5*time.Second {
			attrs := []any{"bucket", d.cfg.Bucket, "err", err}
			if cerr := d.connError(nil); cerr != nil {
				attrs = append(attrs, "nats", cerr)
			}
			d.log.Warn("weights bucket not available yet; waiting", attrs...)
			logged = true
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, 5*time.Second)
	}
}

func (d *DataPlane) watchCluster(ctx context.Context, b jetstream.KeyValue, name string) error {
	opts := []kv.WatchOption{kv.WatchLogger(d.log)}
	if d.deps.NATS != nil {
		opts = append(opts, kv.RewatchOnReconnect(d.deps.NATS))
	}
	initial := func() {
		d.log.Info("weights watch: initial values received", "bucket", b.Bucket(), "cluster", name)
	}
	err := kv.Watch(ctx, b, name, func(e kv.Entry) error {
		if e.Op == kv.OpPut {
			_ = d.applyBytes(name, e.Value, sourceKV) // counted and logged when rejected
		}
		return nil
	}, initial, opts...)
	if errors.Is(err, nats.ErrConnectionClosed) {
		err = d.connError(err)
	}
	if err != nil {
		return fmt.Errorf("weights watch %s: %w", name, err)
	}
	return ctx.Err()
}

// connError is why the NATS connection is unusable (kv.ConnError: the
// server's reason and a hint), or err when that is unknown.
func (d *DataPlane) connError(err error) error {
	if d.deps.NATS == nil {
		return err
	}
	if cerr := kv.ConnError(d.deps.NATS); cerr != nil {
		return cerr
	}
	return err
}

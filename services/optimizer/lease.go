package optimizer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ilb-router/ilb/streams/kv"
)

// leaseValue is the JSON value of LeaseKey.
type leaseValue struct {
	Holder    string    `json:"holder"`
	ExpiresAt time.Time `json:"expires_at"`
}

// lease is a leader lease held in the weights bucket under LeaseKey
// (README.md, Leader election). The holder renews it every third of its
// duration with a compare-and-swap on the key's revision; another
// instance takes it over only after expires_at, also by compare-and-swap,
// so at most one instance wins each round. The lease only avoids wasted
// solves and conflicting churn: correctness never depends on it (nor on
// clocks), because every publish is fenced by the manifest's
// compare-and-swap.
type lease struct {
	pub *Publisher
	id  string
	dur time.Duration
	now func() time.Time
	// heldUntil is when this instance stops believing it leads, measured
	// from before its last successful write: renewing later than that, it
	// has lost the lease even if the write went through.
	heldUntil time.Time
	rev       uint64 // revision of our last write; 0 when not held
}

func newLease(pub *Publisher, id string, dur time.Duration, now func() time.Time) *lease {
	return &lease{pub: pub, id: id, dur: dur, now: now}
}

// held reports whether this instance leads at t.
func (l *lease) held(t time.Time) bool { return t.Before(l.heldUntil) }

// step acquires, renews or observes the lease once and reports whether
// this instance holds it afterwards.
func (l *lease) step(ctx context.Context) (bool, error) {
	start := l.now()
	cur, err := l.pub.latest(ctx, LeaseKey)
	if err != nil {
		return l.held(l.now()), err
	}
	var v leaseValue
	if cur.seq != 0 && !cur.deleted {
		if err := json.Unmarshal(cur.data, &v); err != nil {
			v = leaseValue{} // a garbled lease is free to take
		}
	}
	if v.Holder != "" && v.Holder != l.id && start.Before(v.ExpiresAt) {
		l.heldUntil, l.rev = time.Time{}, 0
		return false, nil
	}
	next, err := json.Marshal(leaseValue{Holder: l.id, ExpiresAt: start.Add(l.dur).UTC()})
	if err != nil {
		return false, err
	}
	rev, err := l.pub.put(ctx, LeaseKey, next, cur.seq)
	if errors.Is(err, kv.ErrRevisionConflict) {
		l.heldUntil, l.rev = time.Time{}, 0
		return false, nil
	}
	if err != nil {
		return l.held(l.now()), fmt.Errorf("optimizer: lease: %w", err)
	}
	l.heldUntil, l.rev = start.Add(l.dur), rev
	return true, nil
}

// release gives the lease up at once (expires_at now), so a standby need
// not wait for it to run out. It does nothing unless held.
func (l *lease) release(ctx context.Context) error {
	if l.rev == 0 {
		return nil
	}
	v, err := json.Marshal(leaseValue{Holder: l.id, ExpiresAt: l.now().UTC()})
	if err != nil {
		return err
	}
	_, err = l.pub.put(ctx, LeaseKey, v, l.rev)
	l.heldUntil, l.rev = time.Time{}, 0
	if errors.Is(err, kv.ErrRevisionConflict) {
		return nil // someone else has it already
	}
	return err
}

package dataplane

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/sched"
)

// Reasons a snapshot is rejected: the reason label of
// ilb_dataplane_snapshots_rejected_total.
const (
	RejectMalformed  = "malformed"          // not a JSON snapshot object
	RejectInvalid    = "invalid"            // fails schemas.Snapshot.Validate
	RejectCluster    = "cluster"            // a cluster this process does not serve, or the wrong key
	RejectOld        = "old_version"        // older than the snapshot in use
	RejectNotBumped  = "version_not_bumped" // same version as the one in use, different content
	RejectTable      = "table"              // the table does not decode or disagrees with the weights
	rejectedNoLabel  = "unknown"            // cluster label when the cluster is unknown
	tableShareSlack  = 0.01                 // table share vs weight, on top of one slot
	sourceKV         = "kv"
	sourceFile       = "file"
	sourceAPI        = "api"
	maxSnapshotBytes = 64 << 20
)

// RejectError says why a snapshot was not applied. The snapshot in use,
// if any, keeps serving.
type RejectError struct {
	Cluster string // the cluster it was meant for, when known
	Reason  string // one of the Reject constants
	Err     error
}

func (e *RejectError) Error() string {
	return fmt.Sprintf("dataplane: snapshot for cluster %q rejected (%s): %v", e.Cluster, e.Reason, e.Err)
}

func (e *RejectError) Unwrap() error { return e.Err }

// SetSnapshot applies s if it is valid and newer than the snapshot in use
// for its cluster (re-applying the snapshot in use is a no-op). s must not
// be changed afterwards. A rejected snapshot returns a *RejectError, is
// counted and logged, and changes nothing.
func (d *DataPlane) SetSnapshot(s *schemas.Snapshot) error {
	if s == nil {
		return d.reject("", sourceAPI, RejectMalformed, errors.New("nil snapshot"))
	}
	if err := s.Validate(); err != nil {
		return d.reject(s.Cluster, sourceAPI, RejectInvalid, err)
	}
	return d.apply("", s, sourceAPI)
}

// SetSnapshotJSON decodes a snapshot in the KV value format and applies it
// as SetSnapshot does.
func (d *DataPlane) SetSnapshotJSON(data []byte) error {
	return d.applyBytes("", data, sourceAPI)
}

// applyBytes decodes and applies a snapshot. key is the cluster the
// source holds it under ("" when the source does not say).
func (d *DataPlane) applyBytes(key string, data []byte, source string) error {
	if len(data) > maxSnapshotBytes {
		return d.reject(key, source, RejectMalformed, fmt.Errorf("%d bytes, max %d", len(data), maxSnapshotBytes))
	}
	s, err := schemas.DecodeSnapshot(data)
	switch {
	case errors.Is(err, schemas.ErrInvalid):
		return d.reject(firstNonEmpty(key, clusterOf(data)), source, RejectInvalid, err)
	case err != nil:
		return d.reject(key, source, RejectMalformed, err)
	}
	return d.apply(key, s, source)
}

// clusterOf reads the cluster field of a snapshot that failed validation,
// for the log and the counter label.
func clusterOf(data []byte) string {
	var v struct {
		Cluster string `json:"cluster"`
	}
	_ = json.Unmarshal(data, &v)
	return v.Cluster
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (d *DataPlane) apply(key string, s *schemas.Snapshot, source string) error {
	d.mu.Lock()
	_, err := d.applyLocked(key, s, source)
	d.mu.Unlock()
	if err != nil {
		return d.reject(firstNonEmpty(key, s.Cluster), source, err.Reason, err.Err)
	}
	return nil
}

// applyLocked checks s against the cluster's state and swaps it in. It
// reports false with no error for a re-delivery of the snapshot in use.
func (d *DataPlane) applyLocked(key string, s *schemas.Snapshot, source string) (bool, *RejectError) {
	c, ok := d.clusters[s.Cluster]
	switch {
	case key != "" && key != s.Cluster:
		return false, &RejectError{Reason: RejectCluster, Err: fmt.Errorf("key %q holds a snapshot for cluster %q", key, s.Cluster)}
	case !ok:
		return false, &RejectError{Reason: RejectCluster, Err: fmt.Errorf("this data plane serves %v, not %q", d.cfg.Clusters, s.Cluster)}
	}
	digest := digestOf(s)
	if c.snap != nil {
		switch {
		case s.Version < c.snap.Version:
			return false, &RejectError{Reason: RejectOld, Err: fmt.Errorf("version %d is older than version %d in use", s.Version, c.snap.Version)}
		case s.Version == c.snap.Version && digest == c.digest:
			return false, nil
		case s.Version == c.snap.Version:
			return false, &RejectError{Reason: RejectNotBumped, Err: fmt.Errorf(
				"content changed but version is still %d: bump \"version\" above %d to apply an edit", s.Version, c.snap.Version)}
		}
	}
	t, err := tableFor(&d.updater, c.table, s)
	if err != nil {
		return false, &RejectError{Reason: RejectTable, Err: err}
	}
	routes, bad, err := classRoutes(&d.updater, d.cat.Load(), s, c.routes)
	if err != nil {
		return false, &RejectError{Reason: RejectTable, Err: err}
	}
	if bad > 0 {
		c.ineligible.Add(int64(bad))
		d.log.Warn("snapshot gives request classes engines the fleet says do not serve them: those entries are skipped",
			"cluster", c.name, "version", s.Version, "entries", bad)
	}
	now := d.now()
	c.snap, c.digest, c.table, c.source, c.routes = s, digest, t, source, routes
	c.skipped = bad
	c.stale = c.isStaleLocked(now, d.cfg.StaleAfter)
	c.cur.Store(c.buildLocked(d.reg, d.pickerParamsLocked(now)))
	d.health.Set("snapshot:"+c.name, true)
	lag := now.Sub(s.CreatedAt).Seconds()
	if !s.CreatedAt.IsZero() && source != sourceFile { // a file's created_at is hand-written
		d.metrics.publishSwap.Record(context.Background(), max(0, lag))
	}
	d.log.Info("snapshot swapped in", "cluster", c.name, "version", s.Version, "source", source,
		"engines", len(s.Weights), "shed_fraction", s.ShedFraction, "table_sent", s.Table != nil,
		"lag_seconds", lag, "stale", c.stale)
	return true, nil
}

func (d *DataPlane) reject(clusterName, source, reason string, err error) error {
	label := clusterName
	if _, ok := d.clusters[clusterName]; !ok {
		label = rejectedNoLabel
	}
	d.metrics.rejected.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("cluster", label), attribute.String("reason", reason)))
	re := &RejectError{Cluster: clusterName, Reason: reason, Err: err}
	d.log.Warn("snapshot rejected; the previous one keeps serving", "cluster", clusterName,
		"source", source, "reason", reason, "err", err)
	return re
}

// digestOf identifies a snapshot's content. json.Marshal sorts map keys,
// so equal snapshots give equal digests.
func digestOf(s *schemas.Snapshot) [32]byte {
	b, _ := json.Marshal(s) // a validated snapshot always marshals
	return sha256.Sum256(b)
}

// isStaleLocked applies the stale rule: a snapshot from the live feed (KV
// or SetSnapshot) older than staleAfter. A file snapshot is an operator's
// static choice and never goes stale (its age is still exported).
func (c *cluster) isStaleLocked(now time.Time, staleAfter time.Duration) bool {
	if c.snap == nil || c.source == sourceFile || c.snap.CreatedAt.IsZero() {
		return false
	}
	return now.Sub(c.snap.CreatedAt) > staleAfter
}

// tableFor returns the selection table of s: its own table when it
// carries one (decoded, and checked against the weights), otherwise prev
// updated with minimal churn, or a table built from the weights when
// there is no prev. nil when s sheds everything (no positive weight). up
// is the update's working memory.
func tableFor(up *sched.Updater, prev *sched.Table, s *schemas.Snapshot) (*sched.Table, error) {
	if s.Table != nil {
		t, err := sched.Decode(s.Table.Slots, s.Table.Engines, s.Table.Encoding, s.Table.Data)
		if err != nil {
			return nil, err
		}
		return t, tableMatchesWeights(t, s.Weights)
	}
	names := sortedKeys(s.Weights)
	ws := make([]float64, len(names))
	total := 0.0
	for i, n := range names {
		ws[i] = s.Weights[n]
		total += ws[i]
	}
	if !(total > 0) {
		return nil, nil
	}
	return up.Rebalance(prev, names, ws)
}

// tableMatchesWeights checks that every engine's share of the table's
// slots is its share of the weights, within one slot plus tableShareSlack,
// so a table cannot route differently from the weights it travels with.
func tableMatchesWeights(t *sched.Table, weights map[string]float64) error {
	total := 0.0
	for _, n := range sortedKeys(weights) {
		total += weights[n]
	}
	if !(total > 0) {
		return errors.New("table sent with a snapshot that sheds everything")
	}
	tol := tableShareSlack + 1/float64(t.Slots())
	shares := t.Weights()
	for i := range t.Len() {
		name := t.Engine(i)
		if diff := math.Abs(shares[i] - weights[name]/total); diff > tol {
			return fmt.Errorf("engine %q has %.4f of the table but %.4f of the weights", name, shares[i], weights[name]/total)
		}
	}
	for _, name := range sortedKeys(weights) {
		if _, ok := t.Index(name); !ok && weights[name]/total > tol {
			return fmt.Errorf("engine %q has weight %.4f but is not in the table", name, weights[name]/total)
		}
	}
	return nil
}

package optimizer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/kv"
)

// HistoryEntry is one kept revision of a cluster's key.
type HistoryEntry struct {
	Cluster  string
	Revision uint64
	Op       string            // put, delete or purge
	Snapshot *schemas.Snapshot // nil for a delete, or a value that does not decode
	Err      error             // why Snapshot is nil for a put
}

// Clusters returns the clusters the manifest lists, sorted; none when
// there is no manifest.
func (p *Publisher) Clusters(ctx context.Context) ([]string, error) {
	m, _, err := p.Manifest(ctx)
	if err != nil || m == nil {
		return nil, err
	}
	return sortedKeys(m.Clusters), nil
}

// History returns the kept revisions of the given clusters' keys (all
// clusters of the manifest when none are given), newest version first,
// then by cluster.
func (p *Publisher) History(ctx context.Context, clusters []string) ([]HistoryEntry, error) {
	if len(clusters) == 0 {
		var err error
		if clusters, err = p.Clusters(ctx); err != nil {
			return nil, err
		}
	}
	var out []HistoryEntry
	for _, c := range clusters {
		if err := schemas.ValidClusterName(c); err != nil {
			return nil, fmt.Errorf("optimizer: history: %w", err)
		}
		es, err := kv.History(ctx, p.kv, c)
		if errors.Is(err, kv.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			out = append(out, historyEntry(c, e))
		}
	}
	slices.SortStableFunc(out, func(a, b HistoryEntry) int {
		if c := cmp.Compare(b.version(), a.version()); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Cluster, b.Cluster); c != 0 {
			return c
		}
		return cmp.Compare(b.Revision, a.Revision)
	})
	return out, nil
}

func historyEntry(cluster string, e kv.Entry) HistoryEntry {
	h := HistoryEntry{Cluster: cluster, Revision: e.Revision, Op: e.Op.String()}
	if e.Op == kv.OpPut {
		h.Snapshot, h.Err = schemas.DecodeSnapshot(e.Value)
	}
	return h
}

func (h HistoryEntry) version() uint64 {
	if h.Snapshot == nil {
		return 0
	}
	return h.Snapshot.Version
}

// Rollback republishes the snapshots of version `to` as a new version
// (versions never decrease; weights, shed fraction and table are those of
// `to`), through the same manifest protocol as Publish. With no clusters
// given it rolls back every cluster of the manifest, and each must still
// have version `to` in its history; ErrNotInHistory says which do not and
// which versions are kept.
func (p *Publisher) Rollback(ctx context.Context, to uint64, clusters []string) (Result, error) {
	if to == 0 {
		return Result{}, errors.New("optimizer: rollback: version must be > 0")
	}
	hist, err := p.History(ctx, clusters)
	if err != nil {
		return Result{}, err
	}
	if len(clusters) == 0 {
		for _, h := range hist {
			if !slices.Contains(clusters, h.Cluster) {
				clusters = append(clusters, h.Cluster)
			}
		}
		slices.Sort(clusters)
	}
	snaps, missing := pickVersion(hist, clusters, to)
	if len(missing) > 0 || len(snaps) == 0 {
		return Result{}, fmt.Errorf("%w: v%d of %s (kept: %s)", ErrNotInHistory, to,
			strings.Join(missing, ", "), keptRange(hist))
	}
	return p.Publish(ctx, snaps)
}

// pickVersion returns a copy of each cluster's snapshot at version v, and
// the clusters that have none.
func pickVersion(hist []HistoryEntry, clusters []string, v uint64) (snaps []*schemas.Snapshot, missing []string) {
	for _, c := range clusters {
		i := slices.IndexFunc(hist, func(h HistoryEntry) bool { return h.Cluster == c && h.version() == v })
		if i < 0 {
			missing = append(missing, c)
			continue
		}
		s := *hist[i].Snapshot
		s.InputsDigest = fmt.Sprintf("rollback-to-v%d", v)
		snaps = append(snaps, &s)
	}
	return snaps, missing
}

// keptRange describes the versions a history holds, e.g. "v3-v66".
func keptRange(hist []HistoryEntry) string {
	lo, hi := uint64(0), uint64(0)
	for _, h := range hist {
		if v := h.version(); v > 0 {
			if lo == 0 || v < lo {
				lo = v
			}
			hi = max(hi, v)
		}
	}
	if hi == 0 {
		return "none"
	}
	return fmt.Sprintf("v%d-v%d", lo, hi)
}

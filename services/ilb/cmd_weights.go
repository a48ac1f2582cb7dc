package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/optimizer"
	"github.com/ilb-router/ilb/streams/kv"
)

const weightsAbout = `Inspects and rolls back the weight snapshots in the JetStream KV bucket
(default ilb-weights). The bucket keeps the last 64 revisions of every
cluster's key.

  ilb weights history  [--nats URL] [--cluster NAME] [--limit N]
      the newest versions, one line per cluster: version, created_at, shed
      fraction, weights (largest first)
  ilb weights rollback --to VERSION [--nats URL] [--cluster NAME[,NAME]]
      republishes the snapshots of VERSION (weights, shed fraction, table)
      as a new, higher version: versions never decrease, so data planes
      apply it like any other. Without --cluster every cluster is rolled
      back and each must still have VERSION in its history.

A running optimizer notices the rollback at its next solve and continues
from the rolled-back weights (moving away from them no faster than its
churn price allows); stop it first to pin the old weights.`

func cmdWeights(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || isHelp(args[0]) {
		fmt.Fprintf(e.stdout, "Usage: ilb weights history|rollback [flags]\n\n%s\n", weightsAbout)
		if len(args) == 0 {
			return badInput("want a subcommand: history or rollback")
		}
		return errHelpShown
	}
	switch args[0] {
	case "history":
		return weightsHistory(ctx, e, args[1:])
	case "rollback":
		return weightsRollback(ctx, e, args[1:])
	}
	return badInput("unknown subcommand %q: want history or rollback (see ilb weights --help)", args[0])
}

// weightsFlags are the flags both subcommands share.
type weightsFlags struct {
	nats     *natsFlags
	bucket   string
	clusters string
}

func addWeightsFlags(fs *flag.FlagSet, nf *natsFlags) *weightsFlags {
	w := &weightsFlags{nats: nf}
	fs.StringVar(&w.bucket, "bucket", schemas.BucketWeights, "JetStream KV bucket of the weight snapshots")
	fs.StringVar(&w.clusters, "cluster", "", "only these clusters (comma-separated); default: every cluster of the manifest")
	return w
}

// publisher connects and opens the bucket; the caller closes the
// returned function.
func (w *weightsFlags) publisher(ctx context.Context, id string) (*optimizer.Publisher, func(), error) {
	nc, err := w.nats.config("ilb-weights")
	if err != nil {
		return nil, nil, err
	}
	nc.ConnectTimeout = 5 * time.Second
	conn, js, err := kv.Connect(ctx, nc)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (is NATS at --nats %s?)", err, kv.RedactURLs(nc.URL))
	}
	p, err := optimizer.NewPublisher(ctx, js, optimizer.PublisherConfig{Bucket: w.bucket, ID: id})
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("%w (has an optimizer published to %s yet?)", err, w.bucket)
	}
	return p, conn.Close, nil
}

func (w *weightsFlags) clusterList() ([]string, error) {
	list := commaList(w.clusters)
	for _, c := range list {
		if err := schemas.ValidClusterName(c); err != nil {
			return nil, badInput("--cluster: %v", err)
		}
	}
	return list, nil
}

func weightsHistory(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "weights history", "[--nats URL] [--cluster NAME] [--limit N]", weightsAbout)
	w := addWeightsFlags(fs, addNATSFlags(fs))
	limit := fs.Int("limit", 10, "show the newest N versions (0: all kept)")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	if *limit < 0 {
		return badInput("--limit %d: want 0 or more", *limit)
	}
	clusters, err := w.clusterList()
	if err != nil {
		return err
	}
	p, closeConn, err := w.publisher(ctx, "ilb-weights")
	if err != nil {
		return err
	}
	defer closeConn()
	hist, err := p.History(ctx, clusters)
	if err != nil {
		return err
	}
	if len(hist) == 0 {
		fmt.Fprintf(e.stdout, "no snapshots in %s\n", w.bucket)
		return nil
	}
	printHistory(e.stdout, newestVersions(hist, *limit))
	return nil
}

// newestVersions keeps the entries of the newest n versions (all when n
// is 0); entries without a version (deletes) are kept with their cluster's
// neighbours only when n is 0.
func newestVersions(hist []optimizer.HistoryEntry, n int) []optimizer.HistoryEntry {
	if n == 0 {
		return hist
	}
	var out []optimizer.HistoryEntry
	var versions []uint64
	for _, h := range hist {
		if h.Snapshot == nil {
			continue
		}
		v := h.Snapshot.Version
		if !slices.Contains(versions, v) {
			if len(versions) == n {
				break
			}
			versions = append(versions, v)
		}
		out = append(out, h)
	}
	return out
}

func printHistory(w io.Writer, hist []optimizer.HistoryEntry) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tCLUSTER\tCREATED_AT\tINPUTS_AS_OF\tSHED\tWEIGHTS\tREVISION")
	for _, h := range hist {
		s := h.Snapshot
		switch {
		case s != nil:
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%.3f\t%s\t%d\n", s.Version, h.Cluster, createdAt(s.CreatedAt),
				createdAt(s.InputsAsOf), s.ShedFraction, weightSummary(s.Weights), h.Revision)
		case h.Op != "put":
			fmt.Fprintf(tw, "-\t%s\t-\t-\t-\t(%s)\t%d\n", h.Cluster, h.Op, h.Revision)
		default:
			fmt.Fprintf(tw, "-\t%s\t-\t-\t-\t(unreadable: %v)\t%d\n", h.Cluster, h.Err, h.Revision)
		}
	}
	tw.Flush()
}

func createdAt(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// weightSummary lists weights largest first, ties by name: "a=0.600 b=0.400".
func weightSummary(w map[string]float64) string {
	if len(w) == 0 {
		return "(none: all shed)"
	}
	names := make([]string, 0, len(w))
	for n := range w {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(w[b], w[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s=%.3f", n, w[n])
	}
	return strings.Join(parts, " ")
}

func weightsRollback(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "weights rollback", "--to VERSION [--nats URL] [--cluster NAME[,NAME]]", weightsAbout)
	w := addWeightsFlags(fs, addNATSFlags(fs))
	to := fs.Uint64("to", 0, "version whose snapshots to republish; required")
	id := fs.String("id", "ilb-weights-rollback", "name written as the manifest's leader")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	if *to == 0 {
		return badInput("--to VERSION is required (see ilb weights history for the versions kept)")
	}
	clusters, err := w.clusterList()
	if err != nil {
		return err
	}
	p, closeConn, err := w.publisher(ctx, *id)
	if err != nil {
		return err
	}
	defer closeConn()
	r, err := p.Rollback(ctx, *to, clusters)
	switch {
	case errors.Is(err, optimizer.ErrNotInHistory):
		return badInput("%v", err)
	case errors.Is(err, optimizer.ErrConflict):
		return fmt.Errorf("%w; nothing was written, try again", err)
	case err != nil:
		return err
	}
	fmt.Fprintf(e.stdout, "rolled back to v%d: published as v%d for %s\n", *to, r.Version, strings.Join(r.Written, ", "))
	if len(r.Superseded) > 0 {
		fmt.Fprintf(e.stdout, "not written (a later version got there first): %s\n", strings.Join(r.Superseded, ", "))
	}
	return nil
}

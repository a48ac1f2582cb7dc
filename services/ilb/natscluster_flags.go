package main

import (
	"flag"
	"strings"

	"github.com/ilb-router/ilb/streams/embedded"
)

// addNATSClusterFlags registers the flags that make the embedded NATS a
// cluster (`ilb brokers`, `ilb dev`).
func addNATSClusterFlags(fs *flag.FlagSet, cfg *embedded.Config) {
	fs.IntVar(&cfg.NATSCluster, "nats-cluster", 0, "run this many NATS nodes clustered on loopback (0: one server, no cluster; 1: one node of a cluster whose other nodes are --nats-routes)")
	fs.StringVar(&cfg.NATSClusterListen, "nats-cluster-listen", embedded.DefaultNATSClusterListen, "route listener of the first cluster node; the next nodes take the next ports (port 0: free ports)")
	fs.StringVar(&cfg.NATSClusterName, "nats-cluster-name", "ilb", "NATS cluster name (the same on every node)")
	fs.StringVar(&cfg.NATSName, "nats-name", "ilb-embedded", "NATS server name (nodes NAME-0, NAME-1, ... with --nats-cluster > 1); unique in the cluster and the same across restarts")
	fs.Func("nats-routes", "comma-separated route URLs (nats://host:port) of cluster nodes run elsewhere", func(s string) error {
		cfg.NATSRoutes = nil
		for _, r := range strings.Split(s, ",") {
			if r = strings.TrimSpace(r); r != "" {
				cfg.NATSRoutes = append(cfg.NATSRoutes, r)
			}
		}
		return nil
	})
}

// syncClusters turns --sync-always on for a NATS cluster unless the
// command line set it: a node that crashes with unsynced writes can lose
// writes the cluster acknowledged (Jepsen's NATS 2.12.1 analysis).
func syncClusters(fs *flag.FlagSet, cfg *embedded.Config) {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "sync-always" })
	if !set && cfg.NATSCluster > 0 {
		cfg.SyncAlways = true
	}
}

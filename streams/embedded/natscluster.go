package embedded

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// DefaultNATSClusterListen is where the first clustered node listens for
// routes (the next nodes take the next ports): NATS's usual cluster port.
const DefaultNATSClusterListen = "127.0.0.1:6222"

// DefaultRoutePing is how often clustered nodes ping each other: a node
// that hangs loses its routes after about three times this, and with them
// the requests the others would route to it (NATSNode.RoutePing).
const DefaultRoutePing = 2 * time.Second

// maxNATSCluster bounds Config.NATSCluster: JetStream replicates at most
// 5 ways, and more in-process nodes only cost memory.
const maxNATSCluster = 9

// natsNodes returns the node configurations of cfg: one standalone
// server, or cfg.NATSCluster nodes that route to each other and to
// cfg.NATSRoutes.
func (c Config) natsNodes(storeDir string, log *slog.Logger) ([]NATSNode, error) {
	base := NATSNode{Name: c.natsName(), Listen: c.NATSListen, StoreDir: storeDir, SyncAlways: c.SyncAlways,
		StartTimeout: c.StartTimeout, Logger: log}
	if c.NATSCluster == 0 {
		return []NATSNode{base}, nil
	}
	clientAddrs, err := nextAddrs(c.NATSListen, c.NATSCluster, false)
	if err != nil {
		return nil, fmt.Errorf("embedded: nats listen: %w", err)
	}
	clusterAddrs, err := nextAddrs(c.NATSClusterListen, c.NATSCluster, true)
	if err != nil {
		return nil, fmt.Errorf("embedded: nats cluster listen: %w", err)
	}
	routes := append([]string(nil), c.NATSRoutes...)
	for _, a := range clusterAddrs {
		host, port, _ := net.SplitHostPort(a)
		routes = append(routes, (&url.URL{Scheme: "nats", Host: net.JoinHostPort(reachableHost(host), port)}).String())
	}
	// Once each: nats-server sizes the JetStream meta group from the
	// number of routes, and a node's own route given twice (in
	// NATSRoutes, as an operator lists every node, and here) would make
	// it expect a peer that does not exist.
	slices.Sort(routes)
	routes = slices.Compact(routes)
	nodes := make([]NATSNode, c.NATSCluster)
	for i := range nodes {
		n := base
		n.Listen, n.ClusterListen, n.ClusterName, n.Routes = clientAddrs[i], clusterAddrs[i], c.natsClusterName(), routes
		n.RoutePing = DefaultRoutePing
		if c.NATSCluster > 1 {
			n.Name = fmt.Sprintf("%s-%d", base.Name, i)
			n.StoreDir = filepath.Join(storeDir, n.Name)
		}
		nodes[i] = n
	}
	return nodes, nil
}

func (c Config) natsName() string {
	if c.NATSName == "" {
		return "ilb-embedded"
	}
	return c.NATSName
}

func (c Config) natsClusterName() string {
	if c.NATSClusterName == "" {
		return "ilb"
	}
	return c.NATSClusterName
}

// nextAddrs returns n listen addresses from addr: its port and the next
// ones, or, for port 0, port 0 for each (clients) or n distinct ports
// free a moment ago (routes: every node must know the others' route ports
// before it starts, so they are chosen here; another process could take
// one in between, and that node then fails to start with a clear error).
func nextAddrs(addr string, n int, pick bool) ([]string, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, err
	}
	ports := make([]int, n)
	switch {
	case port > 0:
		for i := range ports {
			ports[i] = port + i
		}
	case pick:
		if ports, err = freePorts(host, n); err != nil {
			return nil, err
		}
	}
	out := make([]string, n)
	for i, p := range ports {
		if p > 65535 {
			return nil, fmt.Errorf("%s: %d nodes need ports up to %d", addr, n, p)
		}
		out[i] = net.JoinHostPort(host, strconv.Itoa(p))
	}
	return out, nil
}

// freePorts returns n distinct TCP ports of host that were free a moment
// ago (all are held open until every one is chosen).
func freePorts(host string, n int) ([]int, error) {
	var out []int
	for range n {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

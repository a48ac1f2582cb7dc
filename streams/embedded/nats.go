package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// NATSNode configures one NATS server with JetStream: alone, or one node
// of a cluster when ClusterListen is set.
type NATSNode struct {
	// Name is the server name. In a cluster it must be unique and stay the
	// same across restarts: JetStream knows its peers by name.
	Name string
	// Listen is the client host:port; port 0 picks a free port.
	Listen string
	// ClusterName, ClusterListen and Routes make the server a cluster
	// node: it listens for routes on ClusterListen (host:port, port 0: a
	// free port) and connects to the route URLs in Routes
	// (nats://host:port), which may include its own (it is skipped).
	// nats-server sizes the JetStream meta group from len(Routes), so
	// list every node of the cluster, this one included.
	ClusterName   string
	ClusterListen string
	Routes        []string
	// RoutePing is how often a node pings its peers; two unanswered
	// pings drop the route. 0 is nats-server's default, 2 minutes: a peer
	// that hangs (paused, or cut off while its connections stay open)
	// then keeps receiving its share of the requests any replica may
	// answer (KV gets go to any replica) for minutes, and they time out.
	RoutePing time.Duration
	// StoreDir is where JetStream keeps its state.
	StoreDir string
	// SyncAlways fsyncs every JetStream write before acknowledging it.
	SyncAlways bool
	// StartTimeout bounds the wait for the server to accept clients.
	StartTimeout time.Duration
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
}

// StartNATSNode starts the server n describes and waits until it accepts
// clients. A cluster node's JetStream becomes usable once enough of its
// peers are up to elect a meta leader; StartNATSNode does not wait for
// that (WaitJetStreamCluster does).
func StartNATSNode(n NATSNode) (*server.Server, error) {
	log := n.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts, err := n.options()
	if err != nil {
		return nil, err
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded: nats %s: %w", n.Name, err)
	}
	s.SetLogger(natsLogger{log.With("node", n.Name)}, log.Enabled(context.Background(), slog.LevelDebug), false)
	s.Start()
	if !s.ReadyForConnections(n.StartTimeout) {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, fmt.Errorf("embedded: nats %s on %s not ready within %v (port in use?)", n.Name, n.Listen, n.StartTimeout)
	}
	if !s.JetStreamEnabled() {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, fmt.Errorf("embedded: nats %s started without JetStream (see the log for why)", n.Name)
	}
	return s, nil
}

// options maps n to nats-server options, failing fast on a taken port.
func (n NATSNode) options() (*server.Options, error) {
	host, port, err := listenPort(n.Listen)
	if err != nil {
		return nil, fmt.Errorf("embedded: nats listen: %w", err)
	}
	opts := &server.Options{
		ServerName: n.Name,
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   n.StoreDir,
		SyncAlways: n.SyncAlways,
		NoSigs:     true, // signals belong to the process, not the server
		NoLog:      true, // StartNATSNode installs its own logger
	}
	if n.ClusterListen == "" {
		return opts, nil
	}
	chost, cport, err := listenPort(n.ClusterListen)
	if err != nil {
		return nil, fmt.Errorf("embedded: nats cluster listen: %w", err)
	}
	opts.Cluster = server.ClusterOpts{Name: n.ClusterName, Host: chost, Port: cport}
	if n.RoutePing > 0 {
		opts.Cluster.PingInterval, opts.Cluster.MaxPingsOut = n.RoutePing, 2
	}
	for _, r := range n.Routes {
		u, err := url.Parse(r)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("embedded: nats route %q is not nats://host:port", r)
		}
		opts.Routes = append(opts.Routes, u)
	}
	return opts, nil
}

// listenPort splits a listen address into nats-server's host and port:
// Go's "all interfaces" (empty host) is 0.0.0.0 there, and port 0 is
// server.RANDOM_PORT (nats-server reads 0 as "the default port"). A fixed
// port is checked first: nats-server only logs a taken port and never
// becomes ready, so failing here gives a clear error instead of a timeout.
func listenPort(addr string) (string, int, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %w", portStr, err)
	}
	if port == 0 {
		return listenHost(host), server.RANDOM_PORT, nil
	}
	if err := checkFree(addr); err != nil {
		return "", 0, err
	}
	return listenHost(host), port, nil
}

// WaitJetStreamCluster waits, at most d, until one of the running
// servers leads the JetStream meta group and sees every running server
// online: then streams and buckets can be created and placed on any of
// them.
func WaitJetStreamCluster(servers []*server.Server, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		running := 0
		for _, s := range servers {
			if s.Running() {
				running++
			}
		}
		for _, s := range servers {
			if s.Running() && s.JetStreamIsLeader() && len(s.JetStreamClusterPeers()) >= running {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("embedded: no JetStream meta leader seeing all %d running nats nodes within %v", running, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startNATS starts the NATS node(s) of cfg: one server, or cfg.NATSCluster
// clustered nodes (natscluster.go). It returns them with their client URLs.
func startNATS(cfg Config, storeDir string, log *slog.Logger) ([]*server.Server, []string, error) {
	nodes, err := cfg.natsNodes(storeDir, log)
	if err != nil {
		return nil, nil, err
	}
	var (
		servers []*server.Server
		urls    []string
	)
	stopAll := func() {
		for _, s := range servers {
			s.Shutdown()
			s.WaitForShutdown()
		}
	}
	for _, n := range nodes {
		s, err := StartNATSNode(n)
		if err != nil {
			stopAll()
			return nil, nil, err
		}
		servers = append(servers, s)
		host, _, _ := net.SplitHostPort(n.Listen)
		urls = append(urls, clientURL(host, s.Addr()))
	}
	if cfg.NATSCluster > 1 && len(cfg.NATSRoutes) == 0 {
		// Every node is here: the cluster is usable once it has a leader.
		// The first election waits a raft timeout (4-9 s) after the nodes
		// meet, more on a busy machine: three start timeouts.
		if err := WaitJetStreamCluster(servers, 3*cfg.StartTimeout); err != nil {
			stopAll()
			return nil, nil, err
		}
	}
	return servers, urls, nil
}

// checkFree reports an error when addr cannot be listened on now.
func checkFree(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return ln.Close()
}

// listenHost maps Go's "all interfaces" spelling (empty host) to the one
// nats-server understands.
func listenHost(host string) string {
	if host == "" {
		return "0.0.0.0"
	}
	return host
}

// clientURL is the nats:// URL reaching a server listening on addr, asked
// to listen on host.
func clientURL(host string, addr net.Addr) string {
	_, port, _ := net.SplitHostPort(addr.String())
	u := url.URL{Scheme: "nats", Host: net.JoinHostPort(reachableHost(host), port)}
	return u.String()
}

// natsLogger sends nats-server's logs to slog.
type natsLogger struct{ log *slog.Logger }

// transient are nats-server warnings and errors that a cluster shows
// every time it starts or stops (nodes come up one after the other, and
// routes break as they go down): logged at info, not to alarm anyone.
// nats-server retries; a route that never comes up still shows as no
// meta leader, and JetStream refusing requests.
var transient = []string{
	"Error trying to connect to route",
	"Waiting for routing to be established",
	"JetStream has not established contact with a meta leader",
	"Error flushing",
	"Metalayer blocking snapshot",
}

func (l natsLogger) logf(lv slog.Level, format string, v []any) {
	ctx := context.Background()
	if !l.log.Enabled(ctx, min(lv, slog.LevelInfo)) {
		return
	}
	msg := fmt.Sprintf(format, v...)
	if lv > slog.LevelInfo && slices.ContainsFunc(transient, func(p string) bool { return strings.Contains(msg, p) }) {
		lv = slog.LevelInfo
	}
	if l.log.Enabled(ctx, lv) {
		l.log.Log(ctx, lv, msg, "broker", "nats")
	}
}

func (l natsLogger) Noticef(format string, v ...any) { l.logf(slog.LevelInfo, format, v) }
func (l natsLogger) Warnf(format string, v ...any)   { l.logf(slog.LevelWarn, format, v) }
func (l natsLogger) Fatalf(format string, v ...any)  { l.logf(slog.LevelError, format, v) }
func (l natsLogger) Errorf(format string, v ...any)  { l.logf(slog.LevelError, format, v) }
func (l natsLogger) Debugf(format string, v ...any)  { l.logf(slog.LevelDebug, format, v) }
func (l natsLogger) Tracef(format string, v ...any)  { l.logf(slog.LevelDebug-4, format, v) }

package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"

	"github.com/nats-io/nats-server/v2/server"
)

// startNATS starts a NATS server with JetStream storing in storeDir and
// returns it with the URL clients should use.
func startNATS(cfg Config, storeDir string, log *slog.Logger) (*server.Server, string, error) {
	host, portStr, _ := net.SplitHostPort(cfg.NATSListen)
	port, _ := strconv.Atoi(portStr)
	if port == 0 {
		port = server.RANDOM_PORT // nats-server reads 0 as "the default port"
	} else if err := checkFree(cfg.NATSListen); err != nil {
		// nats-server only logs a taken port and never becomes ready;
		// failing here gives a clear error instead of a start timeout.
		return nil, "", fmt.Errorf("embedded: nats listen: %w", err)
	}
	opts := &server.Options{
		ServerName: "ilb-embedded",
		Host:       listenHost(host),
		Port:       port,
		JetStream:  true,
		StoreDir:   storeDir,
		SyncAlways: cfg.SyncAlways,
		NoSigs:     true, // signals belong to the process, not the server
		NoLog:      true, // we install our own logger below
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, "", fmt.Errorf("embedded: nats: %w", err)
	}
	s.SetLogger(natsLogger{log}, log.Enabled(context.Background(), slog.LevelDebug), false)
	s.Start()
	if !s.ReadyForConnections(cfg.StartTimeout) {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, "", fmt.Errorf("embedded: nats on %s not ready within %v (port in use?)", cfg.NATSListen, cfg.StartTimeout)
	}
	if !s.JetStreamEnabled() {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, "", errors.New("embedded: nats started without JetStream (see the log for why)")
	}
	return s, clientURL(host, s.Addr()), nil
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

func (l natsLogger) logf(lv slog.Level, format string, v []any) {
	ctx := context.Background()
	if l.log.Enabled(ctx, lv) {
		l.log.Log(ctx, lv, fmt.Sprintf(format, v...), "broker", "nats")
	}
}

func (l natsLogger) Noticef(format string, v ...any) { l.logf(slog.LevelInfo, format, v) }
func (l natsLogger) Warnf(format string, v ...any)   { l.logf(slog.LevelWarn, format, v) }
func (l natsLogger) Fatalf(format string, v ...any)  { l.logf(slog.LevelError, format, v) }
func (l natsLogger) Errorf(format string, v ...any)  { l.logf(slog.LevelError, format, v) }
func (l natsLogger) Debugf(format string, v ...any)  { l.logf(slog.LevelDebug, format, v) }
func (l natsLogger) Tracef(format string, v ...any)  { l.logf(slog.LevelDebug-4, format, v) }

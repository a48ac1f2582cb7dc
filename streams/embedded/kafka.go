package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"

	"github.com/twmb/franz-go/pkg/kfake"
)

// startKafka starts a one-node kfake cluster on cfg.KafkaListen and returns
// it with the address clients should use.
//
// kfake always listens on 127.0.0.1; we listen ourselves (any host, a clear
// error when the port is taken) and hand kfake the listener. The listener
// reports the advertised address as its own, because kfake puts the
// listener's address in metadata responses and clients connect to that.
func startKafka(cfg Config, log *slog.Logger) (*kfake.Cluster, string, error) {
	ln, err := net.Listen("tcp", cfg.KafkaListen)
	if err != nil {
		return nil, "", fmt.Errorf("embedded: kafka listen: %w", err)
	}
	adv := advertised(cfg, ln.Addr())
	var once sync.Once
	listenFn := func(string, string) (net.Listener, error) {
		err := errors.New("embedded: kafka listener already used")
		once.Do(func() { err = nil })
		if err != nil {
			return nil, err
		}
		return advertisedListener{Listener: ln, addr: adv}, nil
	}
	c, err := kfake.NewCluster(kafkaOpts(cfg, log, listenFn)...)
	if err != nil {
		ln.Close()
		return nil, "", fmt.Errorf("embedded: start kafka: %w", err)
	}
	return c, adv.String(), nil
}

func kafkaOpts(cfg Config, log *slog.Logger, listenFn func(string, string) (net.Listener, error)) []kfake.Opt {
	parts := int32(cfg.Partitions)
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.ListenFn(listenFn),
		kfake.ClusterID("ilb-embedded"),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(cfg.Partitions),
		kfake.SeedTopics(parts, cfg.topics()...),
		kfake.WithLogger(kfakeLogger{log}),
	}
	if cfg.DataDir != "" {
		opts = append(opts, kfake.DataDir(filepath.Join(cfg.DataDir, "kafka")))
		if cfg.SyncAlways {
			opts = append(opts, kfake.SyncWrites())
		}
	}
	return opts
}

// advertised is the address put in Kafka metadata for listener address a.
func advertised(cfg Config, a net.Addr) hostPort {
	listenHost, _, _ := net.SplitHostPort(cfg.KafkaListen)
	_, port, _ := net.SplitHostPort(a.String())
	host := cfg.KafkaAdvertiseHost
	if host == "" {
		host = reachableHost(listenHost)
	}
	return hostPort(net.JoinHostPort(host, port))
}

// hostPort is a net.Addr naming a TCP host:port.
type hostPort string

func (h hostPort) Network() string { return "tcp" }
func (h hostPort) String() string  { return string(h) }

// advertisedListener is a listener that reports addr as its address.
type advertisedListener struct {
	net.Listener
	addr hostPort
}

func (l advertisedListener) Addr() net.Addr { return l.addr }

// kfakeLogger sends kfake's logs to slog. kfake logs every request at
// info, so its info and debug both become slog debug.
type kfakeLogger struct{ log *slog.Logger }

func (l kfakeLogger) Logf(level kfake.LogLevel, format string, args ...any) {
	var lv slog.Level
	switch level {
	case kfake.LogLevelError:
		lv = slog.LevelError
	case kfake.LogLevelWarn:
		lv = slog.LevelWarn
	case kfake.LogLevelNone:
		return
	default:
		lv = slog.LevelDebug
	}
	ctx := context.Background()
	if l.log.Enabled(ctx, lv) {
		l.log.Log(ctx, lv, fmt.Sprintf(format, args...), "broker", "kafka")
	}
}

package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Brokers is a running set of embedded brokers.
type Brokers struct {
	// Fixed at Start.
	cfg       Config
	log       *slog.Logger
	kafka     *kfake.Cluster
	kafkaAddr string
	nats      []*server.Server // one, or the nodes of an in-process cluster
	natsURLs  []string
	tempDir   string // JetStream store when there is no DataDir; removed on Close

	closeOnce sync.Once
	closeErr  error
}

// Start validates cfg and starts the configured brokers. On error nothing
// is left running.
func Start(ctx context.Context, cfg Config) (*Brokers, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b := &Brokers{cfg: cfg, log: cfg.Logger}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	err := b.start()
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, errors.Join(err, b.Close())
	}
	return b, nil
}

func (b *Brokers) start() error {
	if b.cfg.DataDir != "" {
		if err := os.MkdirAll(b.cfg.DataDir, 0o750); err != nil {
			return fmt.Errorf("embedded: data dir: %w", err)
		}
	}
	if b.cfg.NATSListen != "" {
		dir, err := b.storeDir()
		if err != nil {
			return err
		}
		if b.nats, b.natsURLs, err = startNATS(b.cfg, dir, b.log); err != nil {
			return err
		}
	}
	if b.cfg.KafkaListen != "" {
		var err error
		if b.kafka, b.kafkaAddr, err = startKafka(b.cfg, b.log); err != nil {
			return err
		}
	}
	return nil
}

// storeDir returns the JetStream store directory, creating a temporary
// one when there is no DataDir.
func (b *Brokers) storeDir() (string, error) {
	if b.cfg.DataDir != "" {
		return filepath.Join(b.cfg.DataDir, "jetstream"), nil
	}
	dir, err := os.MkdirTemp("", "ilb-jetstream-")
	if err != nil {
		return "", fmt.Errorf("embedded: jetstream temp dir: %w", err)
	}
	b.tempDir = dir
	return dir, nil
}

// KafkaAddrs returns the bootstrap addresses of the Kafka broker (empty
// when Kafka is off).
func (b *Brokers) KafkaAddrs() []string {
	if b.kafkaAddr == "" {
		return nil
	}
	return []string{b.kafkaAddr}
}

// NATSURL returns the nats:// URL of the NATS server, or the
// comma-separated URLs of every node of an in-process cluster (the form
// every service's --nats takes); empty when NATS is off.
func (b *Brokers) NATSURL() string { return strings.Join(b.natsURLs, ",") }

// NATSURLs returns the nats:// URL of each NATS node, in node order.
func (b *Brokers) NATSURLs() []string { return slices.Clone(b.natsURLs) }

// NATSServers returns the running NATS nodes, in node order, for tests
// and tools that inspect them (which node leads a stream, routes).
func (b *Brokers) NATSServers() []*server.Server { return slices.Clone(b.nats) }

// Run blocks until ctx is done, then closes the brokers and returns
// Close's error: a nil return means a clean shutdown.
func (b *Brokers) Run(ctx context.Context) error {
	<-ctx.Done()
	return b.Close()
}

// Close stops the brokers, waiting at most Config.ShutdownTimeout. With a
// DataDir, state is flushed to disk first. Later calls return the first
// call's result.
func (b *Brokers) Close() error {
	b.closeOnce.Do(func() { b.closeErr = b.shutdown() })
	return b.closeErr
}

func (b *Brokers) shutdown() error {
	var wg sync.WaitGroup
	if b.kafka != nil {
		wg.Go(b.kafka.Close)
	}
	for _, s := range b.nats {
		wg.Go(func() {
			s.Shutdown()
			s.WaitForShutdown()
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	timer := time.NewTimer(b.cfg.ShutdownTimeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		return fmt.Errorf("embedded: brokers did not stop within %v", b.cfg.ShutdownTimeout)
	}
	if b.tempDir != "" {
		if err := os.RemoveAll(b.tempDir); err != nil {
			return fmt.Errorf("embedded: remove jetstream temp dir: %w", err)
		}
	}
	return nil
}

package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
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
	nats      *server.Server
	natsURL   string
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
		if b.nats, b.natsURL, err = startNATS(b.cfg, dir, b.log); err != nil {
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

// NATSURL returns the nats:// URL of the NATS server (empty when NATS is
// off).
func (b *Brokers) NATSURL() string { return b.natsURL }

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
	if b.nats != nil {
		wg.Go(func() {
			b.nats.Shutdown()
			b.nats.WaitForShutdown()
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

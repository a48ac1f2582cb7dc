package dataplane

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"time"
)

// rehashEvery makes the poller read the file every this many polls even
// when its size and modification time look unchanged (a coarse mtime
// could hide an edit of the same size).
const rehashEvery = 10

// fileWatch is the state of the snapshot-file poller, owned by its
// goroutine.
type fileWatch struct {
	path    string
	modTime time.Time
	size    int64
	digest  [32]byte // of the last content tried, applied or rejected
	tried   bool
	polls   int
}

// LoadSnapshotFile reads Config.SnapshotFile once and applies it, so a
// command can refuse to start on a missing or bad file. Run polls it
// afterwards.
func (d *DataPlane) LoadSnapshotFile() error {
	if d.cfg.SnapshotFile == "" {
		return fmt.Errorf("dataplane: no snapshot file configured")
	}
	data, err := readFile(d.cfg.SnapshotFile)
	if err != nil {
		return fmt.Errorf("dataplane: snapshot file: %w", err)
	}
	return d.applyBytes("", data, sourceFile)
}

// runFile polls the snapshot file and applies its content whenever it
// changes. A bad edit is rejected (counted, logged) and the previous
// snapshot keeps serving; the same bad content is not retried until the
// file changes again. See README.md for the version rule.
func (d *DataPlane) runFile(ctx context.Context) error {
	w := &fileWatch{path: d.cfg.SnapshotFile}
	t := time.NewTicker(d.cfg.FilePollInterval)
	defer t.Stop()
	for {
		d.pollFile(w)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (d *DataPlane) pollFile(w *fileWatch) {
	w.polls++
	fi, err := os.Stat(w.path)
	if err != nil {
		if w.polls%rehashEvery == 1 {
			d.log.Warn("snapshot file unreadable; the previous snapshot keeps serving", "path", w.path, "err", err)
		}
		return
	}
	if w.tried && fi.ModTime().Equal(w.modTime) && fi.Size() == w.size && w.polls%rehashEvery != 0 {
		return
	}
	w.modTime, w.size = fi.ModTime(), fi.Size()
	data, err := readFile(w.path)
	if err != nil {
		d.log.Warn("snapshot file unreadable; the previous snapshot keeps serving", "path", w.path, "err", err)
		return
	}
	sum := sha256.Sum256(data)
	if w.tried && sum == w.digest {
		return
	}
	w.digest, w.tried = sum, true
	_ = d.applyBytes("", data, sourceFile) // logged and counted either way
}

// readFile reads at most maxSnapshotBytes+1 bytes, so an oversized file is
// rejected by size rather than read whole.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxSnapshotBytes+1))
}

package aggregator

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/ilb-router/ilb/streams/arrowipc"
)

// rollingFile appends record batches to Arrow IPC files named
// PREFIX-YYYYMMDD-HHMMSS.arrow (UTC, when the file was started) in a
// directory, starting a new file every roll interval. A file is written
// as NAME.partial and renamed when it is closed (rolled or at shutdown), so
// a finished name is always a complete file; a crash leaves a .partial
// that arrowipc.RecoverFile reads.
type rollingFile struct {
	dir, prefix string
	schema      *arrow.Schema
	roll        time.Duration

	w      *arrowipc.FileWriter
	opened time.Time
}

func newRollingFile(dir, prefix string, schema *arrow.Schema, roll time.Duration) *rollingFile {
	return &rollingFile{dir: dir, prefix: prefix, schema: schema, roll: roll}
}

// write appends rec, starting a file first if none is open or the open
// one is older than the roll interval.
func (f *rollingFile) write(rec arrow.RecordBatch, now time.Time) error {
	if f.w != nil && now.Sub(f.opened) >= f.roll {
		if err := f.close(); err != nil {
			return err
		}
	}
	if f.w == nil {
		if err := f.open(now); err != nil {
			return err
		}
	}
	return f.w.Write(rec)
}

func (f *rollingFile) open(now time.Time) error {
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return fmt.Errorf("aggregator: output directory: %w", err)
	}
	base := fmt.Sprintf("%s-%s", f.prefix, now.UTC().Format("20060102-150405"))
	path := filepath.Join(f.dir, base+".arrow")
	for i := 1; exists(path) || exists(path+arrowipc.PartialSuffix); i++ {
		path = filepath.Join(f.dir, fmt.Sprintf("%s-%d.arrow", base, i))
	}
	w, err := arrowipc.NewFileWriter(path, f.schema)
	if err != nil {
		return fmt.Errorf("aggregator: %w", err)
	}
	f.w, f.opened = w, now
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}

// close finishes the open file, if any.
func (f *rollingFile) close() error {
	if f.w == nil {
		return nil
	}
	err := f.w.Close()
	f.w = nil
	if err != nil {
		return fmt.Errorf("aggregator: %w", err)
	}
	return nil
}

package arrowipc

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// FileWriter writes an Arrow IPC file batch by batch, for output that
// grows over a long run. Batches go to PartialPath as they are written;
// Close adds the file footer and renames the file to its final path, so
// readers never see a half-written file under that name. If the process
// dies first, RecoverFile reads the batches already written from
// PartialPath.
type FileWriter struct {
	path, partial string
	f             *os.File
	bw            *bufio.Writer
	w             *ipc.FileWriter
	schema        *arrow.Schema
	rows          int64
	batches       int
	done          bool
}

// PartialSuffix is appended to a FileWriter's path while it is writing.
const PartialSuffix = ".partial"

// NewFileWriter starts a file for batches of schema, to be named path
// once closed. An existing partial file of the same name is replaced.
func NewFileWriter(path string, schema *arrow.Schema) (*FileWriter, error) {
	if schema == nil {
		return nil, errors.New("arrowipc: nil schema")
	}
	partial := path + PartialSuffix
	f, err := os.OpenFile(partial, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("arrowipc: %w", err)
	}
	bw := bufio.NewWriterSize(f, 64<<10)
	w, err := ipc.NewFileWriter(bw, ipc.WithSchema(schema))
	if err != nil {
		f.Close()
		os.Remove(partial)
		return nil, fmt.Errorf("arrowipc: new file writer: %w", err)
	}
	return &FileWriter{path: path, partial: partial, f: f, bw: bw, w: w, schema: schema}, nil
}

// Path returns the final path of the file.
func (w *FileWriter) Path() string { return w.path }

// PartialPath returns where the file is while it is being written.
func (w *FileWriter) PartialPath() string { return w.partial }

// Rows returns the rows written so far.
func (w *FileWriter) Rows() int64 { return w.rows }

// Batches returns the batches written so far.
func (w *FileWriter) Batches() int { return w.batches }

// Write appends rec (which must have the writer's schema) and hands it to
// the operating system, so a crash of this process loses nothing already
// written; use Sync to survive a machine crash too.
func (w *FileWriter) Write(rec arrow.RecordBatch) error {
	if w.done {
		return errors.New("arrowipc: write to a closed file writer")
	}
	if err := checkSchemas(w.schema, []arrow.RecordBatch{rec}); err != nil {
		return err
	}
	if err := w.w.Write(rec); err != nil {
		return fmt.Errorf("arrowipc: write %s: %w", filepath.Base(w.partial), err)
	}
	if err := w.bw.Flush(); err != nil {
		return fmt.Errorf("arrowipc: write %s: %w", filepath.Base(w.partial), err)
	}
	w.rows += rec.NumRows()
	w.batches++
	return nil
}

// Sync flushes the written batches to stable storage.
func (w *FileWriter) Sync() error {
	if w.done {
		return errors.New("arrowipc: sync of a closed file writer")
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("arrowipc: sync %s: %w", filepath.Base(w.partial), err)
	}
	return nil
}

// Close finishes the file (footer, sync) and renames it to Path. On error
// the partial file is left for RecoverFile. Closing twice is an error.
func (w *FileWriter) Close() error {
	if w.done {
		return errors.New("arrowipc: file writer closed twice")
	}
	w.done = true
	err := w.w.Close()
	if err == nil {
		err = w.bw.Flush()
	}
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(w.partial, w.path)
	}
	if err != nil {
		return fmt.Errorf("arrowipc: close %s: %w", filepath.Base(w.path), err)
	}
	return nil
}

// Abort stops writing and removes the partial file.
func (w *FileWriter) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	w.w.Close()
	w.f.Close()
	if err := os.Remove(w.partial); err != nil {
		return fmt.Errorf("arrowipc: abort: %w", err)
	}
	return nil
}

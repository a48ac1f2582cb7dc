// Package arrowipc reads and writes Arrow IPC data: streams (one Kafka
// record of ilb.features holds one encoded stream) and files (the
// aggregator's feature and profile tables, recordings), including a file
// writer for long-running output that leaves a recoverable file behind if
// the process dies.
//
// Decoding treats its input as untrusted: sizes are bounded by the input,
// every decoded batch is checked (buffer sizes, offsets, dictionary
// indices) before it is returned, and a malformed input gives an error,
// never a panic or a batch that panics later.
//
// Ownership follows Arrow's rules: the caller releases every RecordBatch
// it receives. Decoders allocate from the allocator they are given, so
// tests pass a memory.CheckedAllocator and assert that nothing leaks.
//
// # Concurrency
//
// Functions are safe for concurrent use on distinct inputs. A FileWriter
// belongs to one goroutine.
package arrowipc

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// EncodeStream encodes recs, which must all have schema, as one Arrow IPC
// stream.
func EncodeStream(schema *arrow.Schema, recs ...arrow.RecordBatch) ([]byte, error) {
	var buf bytes.Buffer
	if err := WriteStream(&buf, schema, recs...); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteStream writes recs, which must all have schema, to w as one Arrow
// IPC stream.
func WriteStream(w io.Writer, schema *arrow.Schema, recs ...arrow.RecordBatch) error {
	if err := checkSchemas(schema, recs); err != nil {
		return err
	}
	iw := ipc.NewWriter(w, ipc.WithSchema(schema))
	for i, rec := range recs {
		if err := iw.Write(rec); err != nil {
			iw.Close()
			return fmt.Errorf("arrowipc: write batch %d: %w", i, err)
		}
	}
	if err := iw.Close(); err != nil {
		return fmt.Errorf("arrowipc: finish stream: %w", err)
	}
	return nil
}

// DecodeStream decodes one Arrow IPC stream. The caller releases the
// returned batches.
func DecodeStream(data []byte, mem memory.Allocator) (recs []arrow.RecordBatch, schema *arrow.Schema, err error) {
	if _, err := scanStream(data); err != nil {
		return nil, nil, fmt.Errorf("arrowipc: decode stream: %w", err)
	}
	recs, schema, err = decodeScanned(data, mem)
	if err != nil {
		return nil, nil, fmt.Errorf("arrowipc: decode stream: %w", err)
	}
	return recs, schema, nil
}

// decodeScanned decodes a stream that scanStream accepted. On error it
// returns to mem whatever arrow-go's decoder failed to release.
func decodeScanned(data []byte, mem memory.Allocator) ([]arrow.RecordBatch, *arrow.Schema, error) {
	tr := newTracker(mem)
	recs, schema, err := decodeTracked(data, tr)
	if err != nil {
		tr.reclaim()
		return nil, nil, err
	}
	tr.keep()
	return recs, schema, nil
}

func decodeTracked(data []byte, mem memory.Allocator) (recs []arrow.RecordBatch, schema *arrow.Schema, err error) {
	defer recoverDecode(&recs, &err)
	limit := int64(len(data)) + 1 // no message can be larger than the input
	r, err := ipc.NewReader(bytes.NewReader(data), ipc.WithAllocator(mem),
		ipc.WithBodySizeLimit(limit), ipc.WithMetadataSizeLimit(limit))
	if err != nil {
		return nil, nil, err
	}
	defer r.Release()
	if recs, err = readAll(r); err != nil {
		return nil, nil, err
	}
	return recs, r.Schema(), nil
}

// readAll reads and validates every batch of r, retaining each; on error
// it releases what it read. Schema mismatches are reported by the reader.
func readAll(r *ipc.Reader) ([]arrow.RecordBatch, error) {
	var recs []arrow.RecordBatch
	for r.Next() {
		rec := r.RecordBatch()
		if err := validateRecord(rec); err != nil {
			Release(recs)
			return nil, fmt.Errorf("batch %d: %w", len(recs), err)
		}
		rec.Retain()
		recs = append(recs, rec)
	}
	if err := r.Err(); err != nil {
		Release(recs)
		return nil, err
	}
	return recs, nil
}

// Release releases every batch in recs.
func Release(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

// Rows returns the total number of rows in recs.
func Rows(recs []arrow.RecordBatch) int64 {
	var n int64
	for _, r := range recs {
		n += r.NumRows()
	}
	return n
}

func checkSchemas(schema *arrow.Schema, recs []arrow.RecordBatch) error {
	if schema == nil {
		return errors.New("arrowipc: nil schema")
	}
	for i, rec := range recs {
		if !rec.Schema().Equal(schema) {
			return fmt.Errorf("arrowipc: batch %d has schema %v, want %v", i, rec.Schema(), schema)
		}
	}
	return nil
}

// recoverDecode turns a panic inside arrow-go's decoder into an error (it
// recovers from most malformed inputs itself; this is the backstop for
// untrusted bytes) and releases what had been decoded.
func recoverDecode(recs *[]arrow.RecordBatch, err *error) {
	if p := recover(); p != nil {
		Release(*recs)
		*recs = nil
		*err = fmt.Errorf("malformed input: %v", p)
	}
}

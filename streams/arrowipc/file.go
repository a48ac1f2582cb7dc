package arrowipc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// fileMagic starts (and ends) every Arrow IPC file; the stream part of the
// file begins after it and two bytes of padding.
var fileMagic = []byte("ARROW1")

const streamStart = 8

// WriteFile writes recs, which must all have schema, as an Arrow IPC file
// at path. The file appears complete or not at all: it is written beside
// path, synced, then renamed over it.
func WriteFile(path string, schema *arrow.Schema, recs ...arrow.RecordBatch) error {
	if err := checkSchemas(schema, recs); err != nil {
		return err
	}
	w, err := NewFileWriter(path, schema)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if err := w.Write(rec); err != nil {
			return errors.Join(err, w.Abort())
		}
	}
	return w.Close()
}

// ReadFile reads every batch of the Arrow IPC file at path. The caller
// releases the returned batches.
func ReadFile(path string, mem memory.Allocator) ([]arrow.RecordBatch, *arrow.Schema, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("arrowipc: %w", err)
	}
	recs, schema, err := DecodeFile(data, mem)
	if err != nil {
		return nil, nil, fmt.Errorf("arrowipc: %s: %w", filepath.Base(path), err)
	}
	return recs, schema, nil
}

// DecodeFile decodes an Arrow IPC file held in memory. The caller
// releases the returned batches.
//
// A file is its magic, an IPC stream, a footer indexing that stream and
// the magic again. DecodeFile reads the batches from the stream, in
// order, and does not use the footer: a footer that disagrees with the
// stream cannot make it read anything else.
func DecodeFile(data []byte, mem memory.Allocator) ([]arrow.RecordBatch, *arrow.Schema, error) {
	if len(data) < 2*streamStart || !bytes.Equal(data[:len(fileMagic)], fileMagic) ||
		!bytes.Equal(data[len(data)-len(fileMagic):], fileMagic) {
		return nil, nil, errors.New("decode file: not a complete Arrow IPC file (magic missing)")
	}
	stream := data[streamStart:]
	if _, err := scanStream(stream); err != nil {
		return nil, nil, fmt.Errorf("decode file: %w", err)
	}
	recs, schema, err := decodeScanned(stream, mem)
	if err != nil {
		return nil, nil, fmt.Errorf("decode file: %w", err)
	}
	return recs, schema, nil
}

// RecoverFile reads the complete batches of an Arrow IPC file whose writer
// died before Close (a FileWriter's PartialPath): the file has no footer,
// and its last batch may be cut off. It returns the batches before the
// first damaged one; an error means not even the schema could be read.
func RecoverFile(path string, mem memory.Allocator) ([]arrow.RecordBatch, *arrow.Schema, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("arrowipc: %w", err)
	}
	if len(data) < streamStart || !bytes.Equal(data[:len(fileMagic)], fileMagic) {
		return nil, nil, fmt.Errorf("arrowipc: %s is not an Arrow IPC file", filepath.Base(path))
	}
	stream := data[streamStart:]
	ends, _ := scanStream(stream) // a cut or damaged tail is what a crash leaves
	n := longestDecodable(stream, ends)
	if n == 0 {
		return nil, nil, fmt.Errorf("arrowipc: recover %s: no readable schema", filepath.Base(path))
	}
	recs, schema, err := decodeScanned(stream[:n], mem)
	if err != nil {
		return nil, nil, fmt.Errorf("arrowipc: recover %s: %w", filepath.Base(path), err)
	}
	return recs, schema, nil
}

// longestDecodable returns the longest prefix of stream, ending at one of
// the message boundaries ends, that decodes without error (0 if none).
// Prefixes that stop between the schema and its dictionaries do not
// decode; from the first prefix that does, decodability only shrinks as
// the prefix grows, so a binary search finds the longest. Trial decodes
// use a throwaway allocator.
func longestDecodable(stream []byte, ends []int) int {
	scratch := memory.NewGoAllocator()
	ok := func(i int) bool {
		recs, _, err := decodeScanned(stream[:ends[i]], scratch)
		Release(recs)
		return err == nil
	}
	lo := 0
	for lo < len(ends) && lo < maxLeadingMessages && !ok(lo) {
		lo++
	}
	if lo == len(ends) || lo == maxLeadingMessages {
		return 0
	}
	for hi := len(ends) - 1; lo < hi; {
		mid := (lo + hi + 1) / 2
		if ok(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return ends[lo]
}

// maxLeadingMessages bounds the schema and dictionary messages searched
// for the first decodable prefix.
const maxLeadingMessages = 256

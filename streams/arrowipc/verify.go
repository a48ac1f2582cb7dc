package arrowipc

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// arrow-go trusts the counts inside IPC metadata (flatbuffers): a corrupt
// schema declaring four billion fields makes it allocate for all of them
// and the process dies of memory exhaustion, which no recover can catch.
// scanStream therefore walks the framing and every message's metadata
// first, checking that each table, string and vector lies inside its
// buffer, so that every count arrow-go later reads is bounded by the
// input's size. It knows the parts of Arrow's Message.fbs and Schema.fbs
// that arrow-go reads; field numbers below refer to those files.

var (
	errTruncated  = errors.New("truncated")
	errCompressed = errors.New("compressed record batches are not accepted (ilb writes uncompressed IPC)")
)

// Message header types (Message.fbs MessageHeader).
const (
	headerSchema          = 1
	headerDictionaryBatch = 2
	headerRecordBatch     = 3
)

// Type union members (Schema.fbs Type) whose tables hold offsets.
const (
	typeTimestamp = 10 // timezone: string
	typeUnion     = 14 // typeIds: [int]
)

const maxTables = 1 << 16 // bound on tables visited per message

// scanStream checks the IPC stream in data and returns the end offset of
// every complete, well-formed message, stopping after an end-of-stream
// marker, and the reason it stopped before the end of data, if it did.
func scanStream(data []byte) ([]int, error) {
	var ends []int
	pos := 0
	for pos < len(data) {
		hdr, msgLen, eos, err := frame(data[pos:])
		if err != nil {
			return ends, fmt.Errorf("message at byte %d: %w", pos, err)
		}
		if eos {
			return ends, nil
		}
		meta := data[pos+hdr : pos+hdr+msgLen]
		bodyLen, err := verifyMessage(meta)
		if err != nil {
			return ends, fmt.Errorf("message at byte %d: %w", pos, err)
		}
		if bodyLen > int64(len(data)-pos-hdr-msgLen) {
			return ends, fmt.Errorf("message at byte %d: body: %w", pos, errTruncated)
		}
		pos += hdr + msgLen + int(bodyLen)
		ends = append(ends, pos)
	}
	return ends, nil
}

// frame reads a message prefix: the continuation marker (or, in the
// pre-0.15 format, none) and the metadata length.
func frame(b []byte) (hdr, msgLen int, eos bool, err error) {
	if len(b) < 4 {
		return 0, 0, false, errTruncated
	}
	cid := binary.LittleEndian.Uint32(b)
	n := cid
	hdr = 4
	switch cid {
	case 0:
		return 4, 0, true, nil
	case 0xFFFFFFFF:
		if len(b) < 8 {
			return 0, 0, false, errTruncated
		}
		n, hdr = binary.LittleEndian.Uint32(b[4:]), 8
		if n == 0 {
			return 8, 0, true, nil
		}
	}
	switch {
	case int32(n) < 4:
		return 0, 0, false, fmt.Errorf("metadata length %d", int32(n))
	case int64(n) > int64(len(b)-hdr):
		return 0, 0, false, fmt.Errorf("metadata: %w", errTruncated)
	}
	return hdr, int(n), false, nil
}

// verifyMessage checks one Message flatbuffer and returns its body length.
func verifyMessage(meta []byte) (int64, error) {
	f := &fb{b: meta, budget: maxTables}
	msg, err := f.root()
	if err != nil {
		return 0, err
	}
	bodyLen, err := f.int64Field(msg, 3)
	if err != nil || bodyLen < 0 {
		return 0, fmt.Errorf("body length %d: %v", bodyLen, err)
	}
	if err := f.keyValues(msg, 4); err != nil {
		return 0, err
	}
	kind, err := f.byteField(msg, 1)
	if err != nil {
		return 0, err
	}
	h, ok, err := f.subtable(msg, 2)
	if err != nil || !ok {
		return 0, fmt.Errorf("message header: missing or bad (%v)", err)
	}
	switch kind {
	case headerSchema:
		err = f.schema(h)
	case headerDictionaryBatch:
		err = f.dictionaryBatch(h)
	case headerRecordBatch:
		err = f.recordBatch(h)
	default:
		err = fmt.Errorf("unsupported message type %d", kind)
	}
	return bodyLen, err
}

func (f *fb) schema(t table) error {
	if err := f.keyValues(t, 2); err != nil {
		return err
	}
	if _, _, err := f.vector(t, 3, 8); err != nil { // features: [long]
		return err
	}
	return f.tables(t, 1, func(fl table) error { return f.field(fl, 0) })
}

func (f *fb) field(t table, depth int) error {
	if depth > maxNesting {
		return errors.New("fields nested too deeply")
	}
	if _, _, err := f.vector(t, 0, 1); err != nil { // name
		return err
	}
	if err := f.fieldType(t); err != nil {
		return err
	}
	if dict, ok, err := f.subtable(t, 4); err != nil {
		return err
	} else if ok {
		if _, _, err := f.subtable(dict, 1); err != nil { // indexType: Int
			return err
		}
	}
	if err := f.keyValues(t, 6); err != nil {
		return err
	}
	return f.tables(t, 5, func(c table) error { return f.field(c, depth+1) })
}

func (f *fb) fieldType(t table) error {
	kind, err := f.byteField(t, 2)
	if err != nil {
		return err
	}
	typ, ok, err := f.subtable(t, 3)
	if err != nil || !ok {
		return err
	}
	switch kind {
	case typeTimestamp:
		_, _, err = f.vector(typ, 1, 1)
	case typeUnion:
		_, _, err = f.vector(typ, 1, 4)
	}
	return err
}

func (f *fb) recordBatch(t table) error {
	if _, ok, err := f.subtable(t, 3); err != nil {
		return err
	} else if ok {
		return errCompressed
	}
	for i, size := range []int{0, 16, 16, 0, 8} { // nodes, buffers: structs; variadic counts: longs
		if size == 0 {
			continue
		}
		if _, _, err := f.vector(t, i, size); err != nil {
			return err
		}
	}
	return nil
}

func (f *fb) dictionaryBatch(t table) error {
	data, ok, err := f.subtable(t, 1)
	if err != nil || !ok {
		return fmt.Errorf("dictionary batch without data (%v)", err)
	}
	return f.recordBatch(data)
}

func (f *fb) keyValues(t table, i int) error {
	return f.tables(t, i, func(kv table) error {
		if _, _, err := f.vector(kv, 0, 1); err != nil {
			return err
		}
		_, _, err := f.vector(kv, 1, 1)
		return err
	})
}

package sched

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// EncodingRLE names the slot encoding Encode produces: the slots in
// ascending order as runs, each run an (engine index, run length) pair of
// unsigned LEB128 varints (encoding/binary's Uvarint). See README.md.
const EncodingRLE = "rle-uvarint-v1"

// Encode returns the table in the form a snapshot carries it: the slot
// count, the engine names (index order, ascending), the encoding name and
// the encoded slots. Decode of these values gives back an equal table.
func (t *Table) Encode() (slots int, engines []string, encoding string, data []byte) {
	for _, sp := range t.spans {
		data = binary.AppendUvarint(data, uint64(sp.e))
		data = binary.AppendUvarint(data, uint64(sp.n))
	}
	return t.n, slices.Clone(t.names), EncodingRLE, data
}

// Decode rebuilds a table from the values Encode returned. It accepts only
// the canonical form Encode writes, so every accepted input re-encodes to
// the same bytes: slots a power of two up to MaxSlots; names non-empty and
// strictly ascending; runs of length >= 1 covering the slots exactly, each
// naming a listed engine and a different one from the run before;
// varints in their shortest form; no trailing bytes. It never panics, and
// it allocates only after checking slots
// (at most MaxSlots).
func Decode(slots int, engines []string, encoding string, data []byte) (*Table, error) {
	if encoding != EncodingRLE {
		return nil, fmt.Errorf("sched: decode: encoding %q, want %q", encoding, EncodingRLE)
	}
	if err := checkSlots(slots); err != nil {
		return nil, fmt.Errorf("sched: decode: %w", err)
	}
	if len(engines) == 0 || len(engines) > MaxEngines {
		return nil, fmt.Errorf("sched: decode: %d engines, want 1 to %d", len(engines), MaxEngines)
	}
	if err := checkNames(engines); err != nil {
		return nil, fmt.Errorf("sched: decode: %w", err)
	}
	owner, err := decodeRuns(data, slots, len(engines))
	if err != nil {
		return nil, fmt.Errorf("sched: decode: %w", err)
	}
	return newTable(slices.Clone(engines), owner), nil
}

func decodeRuns(data []byte, slots, engines int) ([]uint16, error) {
	owner := make([]uint16, slots)
	pos, prev := 0, uint64(engines) // no engine has index engines
	for off := 0; off < len(data); {
		at := off
		e, n, err := readPair(data, &off)
		if err != nil {
			return nil, fmt.Errorf("run at byte %d: %w", at, err)
		}
		switch {
		case e >= uint64(engines):
			return nil, fmt.Errorf("run at slot %d: engine index %d, have %d engines", pos, e, engines)
		case e == prev:
			return nil, fmt.Errorf("run at slot %d: same engine %d as the run before", pos, e)
		case n == 0:
			return nil, fmt.Errorf("run at slot %d: length 0", pos)
		case n > uint64(slots-pos):
			return nil, fmt.Errorf("run at slot %d: length %d overflows %d slots", pos, n, slots)
		}
		run := owner[pos : pos+int(n)]
		for i := range run {
			run[i] = uint16(e)
		}
		pos, prev = pos+int(n), e
	}
	if pos != slots {
		return nil, fmt.Errorf("runs cover %d of %d slots", pos, slots)
	}
	return owner, nil
}

// readPair reads two shortest-form uvarints at *off and advances it.
func readPair(data []byte, off *int) (a, b uint64, err error) {
	if a, err = readUvarint(data, off); err != nil {
		return 0, 0, fmt.Errorf("engine index: %w", err)
	}
	if b, err = readUvarint(data, off); err != nil {
		return 0, 0, fmt.Errorf("run length: %w", err)
	}
	return a, b, nil
}

func readUvarint(data []byte, off *int) (uint64, error) {
	v, n := binary.Uvarint(data[*off:])
	switch {
	case n == 0:
		return 0, fmt.Errorf("truncated varint")
	case n < 0:
		return 0, fmt.Errorf("varint overflows 64 bits")
	case n != uvarintLen(v):
		return 0, fmt.Errorf("varint not in shortest form")
	}
	*off += n
	return v, nil
}

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

package window

import (
	"encoding/binary"
	"fmt"
)

// The binary form of a Checkpoint, for a service to store next to its
// committed offsets. Integers are varints (zig-zag for signed):
//
//	'W' version(=1)
//	size hop started(0|1) watermark closed emitted
//	nPartitions { partition commit position closedStart }
//	nSteps { closedStart position x nPartitions }
const checkpointVersion = 1

// AppendBinary appends the binary form of cp to b.
func (cp Checkpoint) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, 'W', checkpointVersion)
	b = binary.AppendVarint(b, cp.SizeNs)
	b = binary.AppendVarint(b, cp.HopNs)
	started := byte(0)
	if cp.Started {
		started = 1
	}
	b = append(b, started)
	b = binary.AppendVarint(b, cp.WatermarkNs)
	b = binary.AppendVarint(b, cp.ClosedStartNs)
	b = binary.AppendVarint(b, cp.EmittedStartNs)
	b = binary.AppendUvarint(b, uint64(len(cp.Partitions)))
	for _, p := range cp.Partitions {
		b = binary.AppendVarint(b, int64(p.Partition))
		b = binary.AppendVarint(b, p.Commit)
		b = binary.AppendVarint(b, p.Position)
		b = binary.AppendVarint(b, p.ClosedStartNs)
	}
	b = binary.AppendUvarint(b, uint64(len(cp.Steps)))
	for i, s := range cp.Steps {
		if len(s.Positions) != len(cp.Partitions) {
			return nil, fmt.Errorf("%w: step %d has %d positions for %d partitions", ErrCheckpoint, i, len(s.Positions), len(cp.Partitions))
		}
		b = binary.AppendVarint(b, s.ClosedStartNs)
		for _, v := range s.Positions {
			b = binary.AppendVarint(b, v)
		}
	}
	return b, nil
}

// MarshalBinary returns the binary form of cp.
func (cp Checkpoint) MarshalBinary() ([]byte, error) { return cp.AppendBinary(nil) }

// UnmarshalBinary decodes the binary form into cp and validates it.
func (cp *Checkpoint) UnmarshalBinary(data []byte) error {
	if len(data) < 2 || data[0] != 'W' {
		return fmt.Errorf("%w: not a checkpoint", ErrCheckpoint)
	}
	if data[1] != checkpointVersion {
		return fmt.Errorf("%w: version %d, want %d", ErrCheckpoint, data[1], checkpointVersion)
	}
	r := reader{b: data[2:]}
	c := r.header()
	c.Partitions = r.partitions()
	c.Steps = r.steps(len(c.Partitions))
	if r.err == nil && len(r.b) > 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return r.err
	}
	if err := c.Validate(); err != nil {
		return err
	}
	*cp = c
	return nil
}

func (r *reader) header() Checkpoint {
	var c Checkpoint
	c.SizeNs, c.HopNs = r.varint(), r.varint()
	switch r.byte() {
	case 0:
	case 1:
		c.Started = true
	default:
		r.fail("started flag")
	}
	c.WatermarkNs, c.ClosedStartNs, c.EmittedStartNs = r.varint(), r.varint(), r.varint()
	return c
}

func (r *reader) partitions() []PartitionCheckpoint {
	n := r.count(4)
	var ps []PartitionCheckpoint
	for i := 0; i < n && r.err == nil; i++ {
		ps = append(ps, PartitionCheckpoint{Partition: r.int32(), Commit: r.varint(), Position: r.varint(), ClosedStartNs: r.varint()})
	}
	return ps
}

func (r *reader) steps(parts int) []StepCheckpoint {
	n := r.count(1 + parts)
	var ss []StepCheckpoint
	for i := 0; i < n && r.err == nil; i++ {
		s := StepCheckpoint{ClosedStartNs: r.varint(), Positions: make([]int64, parts)}
		for j := range s.Positions {
			s.Positions[j] = r.varint()
		}
		ss = append(ss, s)
	}
	return ss
}

// reader decodes varints and remembers the first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: bad %s", ErrCheckpoint, what)
	}
	r.b = nil
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) int32() int32 {
	v := r.varint()
	if int64(int32(v)) != v {
		r.fail("partition")
	}
	return int32(v)
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.fail("byte")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// count reads a length whose items take at least minBytes each, and
// rejects one the remaining input cannot hold.
func (r *reader) count(minBytes int) int {
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > uint64(len(r.b)-n)/uint64(minBytes) {
		r.fail("count")
		return 0
	}
	r.b = r.b[n:]
	return int(v)
}

package arrowipc

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// fb is a bounds-checked reader of one flatbuffer: every position it
// returns lies inside b. It follows the flatbuffers binary format: a table
// starts with a signed offset back to its vtable; the vtable lists the
// vtable size, the table's inline size and one 16-bit offset per field.
type fb struct {
	b      []byte
	budget int // tables left to visit; bounds work on shared sub-tables
}

type table struct {
	pos, vt, vtLen, inline int
}

func (f *fb) u32(pos int) (uint32, error) {
	if pos < 0 || pos > len(f.b)-4 {
		return 0, errTruncated
	}
	return binary.LittleEndian.Uint32(f.b[pos:]), nil
}

func (f *fb) u16(pos int) (int, error) {
	if pos < 0 || pos > len(f.b)-2 {
		return 0, errTruncated
	}
	return int(binary.LittleEndian.Uint16(f.b[pos:])), nil
}

func (f *fb) root() (table, error) {
	off, err := f.u32(0)
	if err != nil {
		return table{}, err
	}
	return f.table(int(off))
}

func (f *fb) table(pos int) (table, error) {
	if f.budget--; f.budget < 0 {
		return table{}, errors.New("metadata has too many tables")
	}
	soff, err := f.u32(pos)
	if err != nil {
		return table{}, err
	}
	t := table{pos: pos, vt: pos - int(int32(soff))}
	if t.vtLen, err = f.u16(t.vt); err != nil {
		return table{}, err
	}
	if t.inline, err = f.u16(t.vt + 2); err != nil {
		return table{}, err
	}
	if t.vtLen < 4 || t.vtLen%2 != 0 || t.vt+t.vtLen > len(f.b) || t.inline < 4 || pos+t.inline > len(f.b) {
		return table{}, fmt.Errorf("bad table at %d", pos)
	}
	return t, nil
}

// slot returns the position of field i of t holding size bytes, or false
// when the field is absent (its default applies).
func (f *fb) slot(t table, i, size int) (int, bool, error) {
	o := 4 + 2*i
	if o+2 > t.vtLen {
		return 0, false, nil
	}
	off, err := f.u16(t.vt + o)
	if err != nil || off == 0 {
		return 0, false, err
	}
	if off+size > t.inline {
		return 0, false, fmt.Errorf("field %d outside its table", i)
	}
	return t.pos + off, true, nil
}

func (f *fb) byteField(t table, i int) (byte, error) {
	p, ok, err := f.slot(t, i, 1)
	if err != nil || !ok {
		return 0, err
	}
	return f.b[p], nil
}

func (f *fb) int64Field(t table, i int) (int64, error) {
	p, ok, err := f.slot(t, i, 8)
	if err != nil || !ok {
		return 0, err
	}
	return int64(binary.LittleEndian.Uint64(f.b[p:])), nil
}

// ref follows the offset stored in field i of t.
func (f *fb) ref(t table, i int) (int, bool, error) {
	p, ok, err := f.slot(t, i, 4)
	if err != nil || !ok {
		return 0, ok, err
	}
	off, err := f.u32(p)
	if err != nil {
		return 0, false, err
	}
	target := int64(p) + int64(off)
	if target >= int64(len(f.b)) {
		return 0, false, fmt.Errorf("field %d points outside the metadata", i)
	}
	return int(target), true, nil
}

func (f *fb) subtable(t table, i int) (table, bool, error) {
	p, ok, err := f.ref(t, i)
	if err != nil || !ok {
		return table{}, false, err
	}
	sub, err := f.table(p)
	return sub, err == nil, err
}

// vector checks the vector (or string, with size 1) in field i of t and
// returns the position of its first element and its length.
func (f *fb) vector(t table, i, size int) (int, int, error) {
	p, ok, err := f.ref(t, i)
	if err != nil || !ok {
		return 0, 0, err
	}
	n, err := f.u32(p)
	if err != nil {
		return 0, 0, err
	}
	if int64(n)*int64(size) > int64(len(f.b)-p-4) {
		return 0, 0, fmt.Errorf("field %d: vector of %d elements does not fit: %w", i, n, errTruncated)
	}
	return p + 4, int(n), nil
}

// tables calls fn for every table of the vector of tables in field i.
func (f *fb) tables(t table, i int, fn func(table) error) error {
	start, n, err := f.vector(t, i, 4)
	if err != nil {
		return err
	}
	for j := range n {
		p := start + 4*j
		off, _ := f.u32(p) // in bounds: checked by vector
		sub, err := f.table(p + int(off))
		if err != nil {
			return fmt.Errorf("field %d element %d: %w", i, j, err)
		}
		if err := fn(sub); err != nil {
			return err
		}
	}
	return nil
}

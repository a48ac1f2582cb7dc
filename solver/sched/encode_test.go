package sched

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestEncodeKnownAnswer(t *testing.T) {
	tab, err := Build([]string{"a", "b", "c"}, []float64{2, 1, 1}, 8)
	if err != nil {
		t.Fatal(err)
	}
	slots, engines, enc, data := tab.Encode()
	if slots != 8 || !slices.Equal(engines, []string{"a", "b", "c"}) || enc != "rle-uvarint-v1" {
		t.Fatalf("Encode = %d, %v, %q", slots, engines, enc)
	}
	if want := []byte{0, 4, 1, 2, 2, 2}; !bytes.Equal(data, want) {
		t.Errorf("data = %v, want %v", data, want)
	}
	// Two-byte varints: engine 200 owning the whole table of 256 slots.
	names := engineNames(201)
	ws := make([]float64, 201)
	ws[200] = 1
	big, err := Build(names, ws, 256)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, data := big.Encode(); !bytes.Equal(data, []byte{0xc8, 0x01, 0x80, 0x02}) {
		t.Errorf("data = %#v, want c8 01 80 02", data)
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	r := newRand(15)
	for _, n := range []int{1, 10, 300} {
		names := engineNames(n)
		base := randomWeights(r, n)
		w := base
		tab, err := Build(names, w, 4096)
		if err != nil {
			t.Fatal(err)
		}
		for range 10 {
			w = perturb(r, base, w, 0.5, 0.5)
			if tab, err = tab.Update(names, w); err != nil {
				t.Fatal(err)
			}
			slots, engines, enc, data := tab.Encode()
			back, err := Decode(slots, engines, enc, data)
			if err != nil {
				t.Fatal(err)
			}
			if !back.Equal(tab) || !slices.Equal(back.Counts(), tab.Counts()) {
				t.Fatalf("engines=%d: decoded table differs", n)
			}
		}
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	ab := []string{"a", "b"}
	tests := []struct {
		name    string
		slots   int
		engines []string
		enc     string
		data    []byte
		want    string
	}{
		{"unknown encoding", 4, ab, "rle-v0", []byte{0, 4}, "encoding"},
		{"slots zero", 0, ab, EncodingRLE, nil, "slots 0"},
		{"slots not a power of two", 6, ab, EncodingRLE, []byte{0, 6}, "slots 6"},
		{"slots too many", MaxSlots * 2, ab, EncodingRLE, nil, "slots"},
		{"no engines", 4, nil, EncodingRLE, []byte{0, 4}, "0 engines"},
		{"empty name", 4, []string{"", "a"}, EncodingRLE, []byte{0, 4}, "empty name"},
		{"unsorted names", 4, []string{"b", "a"}, EncodingRLE, []byte{0, 4}, "not sorted"},
		{"duplicate names", 4, []string{"a", "a"}, EncodingRLE, []byte{0, 4}, "twice"},
		{"empty data", 4, ab, EncodingRLE, nil, "cover 0 of 4"},
		{"short coverage", 4, ab, EncodingRLE, []byte{0, 3}, "cover 3 of 4"},
		{"index out of range", 4, ab, EncodingRLE, []byte{2, 4}, "engine index 2"},
		{"zero length", 4, ab, EncodingRLE, []byte{0, 0, 1, 4}, "length 0"},
		{"overflowing run", 4, ab, EncodingRLE, []byte{0, 5}, "overflows"},
		{"extra run", 4, ab, EncodingRLE, []byte{0, 4, 1, 1}, "overflows"},
		{"same engine twice in a row", 4, ab, EncodingRLE, []byte{0, 2, 0, 2}, "same engine"},
		{"truncated pair", 4, ab, EncodingRLE, []byte{0, 4, 1}, "run length: truncated"},
		{"truncated varint", 4, ab, EncodingRLE, []byte{0x80}, "truncated"},
		{"overlong varint", 4, ab, EncodingRLE, []byte{0x80, 0x00, 4}, "shortest form"},
		{"varint over 64 bits", 4, ab, EncodingRLE, bytes.Repeat([]byte{0xff}, 11), "64 bits"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tab, err := Decode(tc.slots, tc.engines, tc.enc, tc.data)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode = %v, %v; want an error containing %q", tab, err, tc.want)
			}
		})
	}
}

// Decode never panics, and whatever it accepts is canonical: encoding it
// again gives back the same bytes, and the table picks within range.
func FuzzDecode(f *testing.F) {
	small, _ := Build([]string{"a", "b", "c"}, []float64{2, 1, 1}, 8)
	_, _, _, data := small.Encode()
	f.Add(uint32(8), "a,b,c", data)
	f.Add(uint32(16), "x", []byte{0, 16})
	f.Add(uint32(4), "a,b", []byte{0x80, 0x00, 4})
	f.Add(uint32(1024), "e1,e2,e3,e4", []byte{0, 200, 3, 1, 1, 0x80, 0x06, 2, 23})
	f.Fuzz(func(t *testing.T, slots uint32, names string, data []byte) {
		engines := strings.Split(names, ",")
		tab, err := Decode(int(slots), engines, EncodingRLE, data)
		if err != nil {
			return
		}
		s2, e2, enc2, d2 := tab.Encode()
		if s2 != int(slots) || !slices.Equal(e2, engines) || enc2 != EncodingRLE || !bytes.Equal(d2, data) {
			t.Fatalf("accepted input does not re-encode to itself: %d %q %x -> %d %q %x", slots, engines, data, s2, e2, d2)
		}
		for h := range uint64(64) {
			if e := tab.PickHash(h * 0x9e3779b97f4a7c15); e < 0 || e >= tab.Len() || tab.Counts()[e] == 0 {
				t.Fatalf("picked engine %d of %d", e, tab.Len())
			}
		}
	})
}

package schemas

import (
	"errors"
	"testing"
)

func FuzzDecodeEvent(f *testing.F) {
	for _, seed := range goldenSeeds(f) {
		f.Add(seed)
		f.Add(seed[:len(seed)/2])
	}
	f.Add([]byte{})
	dec := NewDecoder(16)
	f.Fuzz(func(t *testing.T, data []byte) {
		var ev Event
		err := DecodeEvent(data, &ev)
		var ev2 Event
		err2 := dec.Decode(data, &ev2)
		if (err == nil) != (err2 == nil) || (err == nil && !sameEvent(ev, ev2)) {
			t.Fatalf("DecodeEvent and Decoder disagree: %v / %v", err, err2)
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrUnsupportedVersion) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		enc, err := AppendEvent(nil, &ev)
		if err != nil {
			t.Fatalf("decoded event does not re-encode: %v", err)
		}
		var back Event
		if err := DecodeEvent(enc, &back); err != nil {
			t.Fatalf("re-encoded event does not decode: %v", err)
		}
		if !sameEvent(back, ev) {
			t.Fatalf("round trip changed the event:\n got %+v\nwant %+v", back, ev)
		}
	})
}

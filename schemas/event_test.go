package schemas

import (
	"errors"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// eventTime is 2026-11-29T22:00:00Z in ns.
const eventTime int64 = 1795989600_000000000

func sampleStatus() Event {
	return Event{Kind: KindStatus, Status: EngineStatus{
		Engine: "east-h100-0", TimeUnixNano: eventTime, Health: HealthHealthy,
		ReadyReplicas: 2, TotalReplicas: 2, Running: 37, Waiting: 4, KVCacheUtilization: 0.625,
	}}
}

func sampleCompletion() Event {
	return Event{Kind: KindCompletion, Completion: Completion{
		Engine: "east-h100-0", TimeUnixNano: eventTime + 1500, ConversationID: "conv-42",
		Cluster: "fe-east", PromptTokens: 1830, CachedPromptTokens: 1536, OutputTokens: 212,
		TTFTMs: 184.5, TBOTMs: 31.25,
	}}
}

func TestEventRoundTrip(t *testing.T) {
	failed := sampleCompletion()
	failed.Completion.Error = "upstream reset: connection refused"
	failed.Completion.OutputTokens, failed.Completion.TBOTMs = 0, 0
	minimal := Event{Kind: KindStatus, Status: EngineStatus{Engine: "e", TimeUnixNano: 1}}
	negZero := sampleCompletion()
	negZero.Completion.TTFTMs = math.Copysign(0, -1)
	for name, ev := range map[string]Event{
		"status": sampleStatus(), "completion": sampleCompletion(),
		"failed": failed, "minimal": minimal, "negative-zero": negZero,
	} {
		t.Run(name, func(t *testing.T) {
			b, err := AppendEvent(nil, &ev)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != EncodedSize(&ev) {
				t.Errorf("EncodedSize = %d, encoded %d bytes", EncodedSize(&ev), len(b))
			}
			var got Event
			if err := DecodeEvent(b, &got); err != nil {
				t.Fatal(err)
			}
			if !sameEvent(got, ev) {
				t.Errorf("round trip:\n got %+v\nwant %+v", got, ev)
			}
		})
	}
}

// sameEvent compares events bit for bit (so -0 and +0 differ).
func sameEvent(a, b Event) bool {
	return a.Kind == b.Kind && statusBits(a.Status) == statusBits(b.Status) && completionBits(a.Completion) == completionBits(b.Completion)
}

type statusKey struct {
	EngineStatus
	kv uint64
}

func statusBits(s EngineStatus) statusKey {
	kv := math.Float64bits(s.KVCacheUtilization)
	s.KVCacheUtilization = 0
	return statusKey{s, kv}
}

type completionKey struct {
	Completion
	ttft, tbot uint64
}

func completionBits(c Completion) completionKey {
	k := completionKey{Completion: c, ttft: math.Float64bits(c.TTFTMs), tbot: math.Float64bits(c.TBOTMs)}
	k.TTFTMs, k.TBOTMs = 0, 0
	return k
}

func TestAppendEventAppends(t *testing.T) {
	ev := sampleStatus()
	prefix := []byte("prefix")
	b, err := AppendEvent(prefix, &ev)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "prefix") {
		t.Fatalf("AppendEvent dropped dst contents: %q", b[:6])
	}
	var got Event
	if err := DecodeEvent(b[len(prefix):], &got); err != nil || !sameEvent(got, ev) {
		t.Fatalf("decode appended event: %v, %+v", err, got)
	}
}

func TestValidateEvent(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Event)
		want   string // substring of the error; "" means valid
	}{
		{"status ok", func(*Event) {}, ""},
		{"no kind", func(e *Event) { e.Kind = 0 }, "kind 0"},
		{"bad kind", func(e *Event) { e.Kind = 9 }, "kind 9"},
		{"no engine", func(e *Event) { e.Status.Engine = "" }, "engine name is empty"},
		{"long engine", func(e *Event) { e.Status.Engine = strings.Repeat("e", MaxNameLen+1) }, "engine is 257 bytes"},
		{"bad utf8", func(e *Event) { e.Status.Engine = "e\xff" }, "not valid UTF-8"},
		{"zero time", func(e *Event) { e.Status.TimeUnixNano = 0 }, "time_unix_nano 0 must be > 0"},
		{"negative time", func(e *Event) { e.Status.TimeUnixNano = -5 }, "time_unix_nano -5"},
		{"health", func(e *Event) { e.Status.Health = 4 }, "health 4 out of range"},
		{"kv above 1", func(e *Event) { e.Status.KVCacheUtilization = 1.01 }, "kv_cache_utilization 1.01"},
		{"kv negative", func(e *Event) { e.Status.KVCacheUtilization = -0.1 }, "kv_cache_utilization -0.1"},
		{"kv NaN", func(e *Event) { e.Status.KVCacheUtilization = math.NaN() }, "kv_cache_utilization NaN"},
		{"ready above total ok", func(e *Event) { e.Status.ReadyReplicas = 3 }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := sampleStatus()
			tc.mutate(&ev)
			checkErr(t, ev.Validate(), tc.want, ErrInvalid)
		})
	}
}

func TestValidateCompletion(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Completion)
		want   string
	}{
		{"ok", func(*Completion) {}, ""},
		{"no cluster ok", func(c *Completion) { c.Cluster = "" }, ""},
		{"no engine", func(c *Completion) { c.Engine = "" }, "engine name is empty"},
		{"zero time", func(c *Completion) { c.TimeUnixNano = 0 }, "time_unix_nano 0"},
		{"cached > prompt", func(c *Completion) { c.CachedPromptTokens = 1831 }, "cached_prompt_tokens 1831 > prompt_tokens 1830"},
		{"ttft inf", func(c *Completion) { c.TTFTMs = math.Inf(1) }, "ttft_ms +Inf"},
		{"ttft negative", func(c *Completion) { c.TTFTMs = -1 }, "ttft_ms -1"},
		{"tbot NaN", func(c *Completion) { c.TBOTMs = math.NaN() }, "tbot_ms NaN"},
		{"bad cluster", func(c *Completion) { c.Cluster = "fe east" }, `contains ' '`},
		{"manifest cluster", func(c *Completion) { c.Cluster = ManifestKey }, "reserved"},
		{"long conversation", func(c *Completion) { c.ConversationID = strings.Repeat("c", 1025) }, "conversation_id is 1025 bytes"},
		{"long error", func(c *Completion) { c.Error = strings.Repeat("x", 4097) }, "error is 4097 bytes"},
		{"bad utf8 error", func(c *Completion) { c.Error = "\xc3" }, "error is not valid UTF-8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := sampleCompletion()
			tc.mutate(&ev.Completion)
			checkErr(t, ev.Validate(), tc.want, ErrInvalid)
			if _, err := AppendEvent(nil, &ev); (err == nil) != (tc.want == "") {
				t.Errorf("AppendEvent error = %v, want validation to decide", err)
			}
		})
	}
}

// checkErr asserts err is nil when want is empty, else that it contains
// want and wraps sentinel.
func checkErr(t *testing.T, err error, want string, sentinel error) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want == "":
	case err == nil:
		t.Fatalf("no error, want one containing %q", want)
	case !strings.Contains(err.Error(), want):
		t.Fatalf("error %q does not contain %q", err, want)
	case !errors.Is(err, sentinel):
		t.Fatalf("error %q does not wrap %v", err, sentinel)
	}
}

// wire builds protobuf bytes field by field for hand-made test inputs.
type wire []byte

func (w wire) varint(num protowire.Number, v uint64) wire {
	w = protowire.AppendTag(w, num, protowire.VarintType)
	return protowire.AppendVarint(w, v)
}

func (w wire) bytes(num protowire.Number, v []byte) wire {
	w = protowire.AppendTag(w, num, protowire.BytesType)
	return protowire.AppendBytes(w, v)
}

func (w wire) fixed64(num protowire.Number, v uint64) wire {
	w = protowire.AppendTag(w, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(w, v)
}

func (w wire) fixed32(num protowire.Number, v uint32) wire {
	w = protowire.AppendTag(w, num, protowire.Fixed32Type)
	return protowire.AppendFixed32(w, v)
}

func minimalStatus() wire {
	return wire(nil).bytes(1, []byte("e")).fixed64(2, 7)
}

func TestDecodeEventForwardCompatible(t *testing.T) {
	status := minimalStatus().
		varint(99, 5).                // unknown varint
		fixed32(100, 1).              // unknown fixed32
		bytes(101, []byte("future")). // unknown bytes
		varint(1, 12345)              // known number, wrong wire type: skipped like protobuf-go
	group := protowire.AppendTag(nil, 102, protowire.StartGroupType)
	group = protowire.AppendTag(protowire.AppendVarint(protowire.AppendTag(group, 1, protowire.VarintType), 3),
		102, protowire.EndGroupType)
	data := wire(nil).varint(1, 1).bytes(2, append(status, group...)).
		bytes(7, []byte{0xff, 0xff}) // unknown envelope field: opaque bytes
	var ev Event
	if err := DecodeEvent(data, &ev); err != nil {
		t.Fatal(err)
	}
	want := Event{Kind: KindStatus, Status: EngineStatus{Engine: "e", TimeUnixNano: 7}}
	if ev != want {
		t.Fatalf("got %+v, want %+v", ev, want)
	}
}

func TestDecodeEventUnknownHealth(t *testing.T) {
	data := wire(nil).varint(1, 1).bytes(2, minimalStatus().varint(3, 9))
	var ev Event
	if err := DecodeEvent(data, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Status.Health != HealthUnknown {
		t.Fatalf("health 9 decoded as %d, want HealthUnknown", ev.Status.Health)
	}
}

func TestDecodeEventErrors(t *testing.T) {
	good, _ := AppendEvent(nil, ptr(sampleCompletion()))
	cases := []struct {
		name     string
		data     []byte
		want     string
		sentinel error
	}{
		{"empty", nil, "schema_version missing", ErrMalformed},
		{"no version", wire(nil).bytes(2, minimalStatus()), "schema_version missing", ErrMalformed},
		{"newer version", wire(nil).varint(1, 2).bytes(2, minimalStatus()), "unsupported schema version: 2", ErrUnsupportedVersion},
		{"no payload", wire(nil).varint(1, 1), "kind 0", ErrInvalid},
		{"truncated", good[:len(good)-3], "unexpected EOF", ErrMalformed},
		{"truncated tag", []byte{0x80}, "unexpected EOF", ErrMalformed},
		{"field zero", []byte{0x00, 0x01}, "invalid field number", ErrMalformed},
		{"end group", protowire.AppendTag(wire(nil).varint(1, 1), 5, protowire.EndGroupType), "end group", ErrMalformed},
		{"reserved wire type", []byte{0x0f}, "reserved wire type", ErrMalformed},
		{"varint overflow", []byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, "overflow", ErrMalformed},
		{"uint32 overflow", wire(nil).varint(1, 1).bytes(2, minimalStatus().varint(6, 1<<32)), "uint32", ErrMalformed},
		{"bad inner length", wire(nil).varint(1, 1).bytes(3, []byte{0x0a, 0x09, 'x'}), "unexpected EOF", ErrMalformed},
		{"invalid payload", wire(nil).varint(1, 1).bytes(2, wire(nil).fixed64(2, 7)), "engine name is empty", ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := sampleStatus()
			checkErr(t, DecodeEvent(tc.data, &ev), tc.want, tc.sentinel)
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestDecodeEventOneofLastWins(t *testing.T) {
	comp, _ := AppendEvent(nil, ptr(sampleCompletion()))
	st := minimalStatus().varint(6, 3)
	data := append(wire(nil).varint(1, 1).bytes(2, st), comp[2:]...) // status, then completion
	var ev Event
	if err := DecodeEvent(data, &ev); err != nil {
		t.Fatal(err)
	}
	if want := sampleCompletion(); !sameEvent(ev, want) {
		t.Fatalf("status then completion: got %+v, want the completion only", ev)
	}
	// The same member twice merges: the second status sets waiting only.
	data = wire(nil).varint(1, 1).bytes(2, st).bytes(2, wire(nil).varint(7, 9))
	if err := DecodeEvent(data, &ev); err != nil {
		t.Fatal(err)
	}
	want := EngineStatus{Engine: "e", TimeUnixNano: 7, Running: 3, Waiting: 9}
	if ev.Kind != KindStatus || ev.Status != want || ev.Completion != (Completion{}) {
		t.Fatalf("merged status: got %+v, want %+v", ev, want)
	}
}

func TestDecodeEventReusesEvent(t *testing.T) {
	comp, _ := AppendEvent(nil, ptr(sampleCompletion()))
	st, _ := AppendEvent(nil, ptr(sampleStatus()))
	ev := sampleCompletion()
	if err := DecodeEvent(st, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Completion != (Completion{}) || ev.Status != sampleStatus().Status {
		t.Fatalf("decoding a status over a completion left %+v", ev)
	}
	if err := DecodeEvent(comp, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Status != (EngineStatus{}) || ev.Completion != sampleCompletion().Completion {
		t.Fatalf("decoding a completion over a status left %+v", ev)
	}
}

func TestDecodeEventAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	st, _ := AppendEvent(nil, ptr(sampleStatus()))
	comp, _ := AppendEvent(nil, ptr(sampleCompletion()))
	var ev Event
	if a := testing.AllocsPerRun(100, func() { _ = DecodeEvent(st, &ev) }); a != 0 {
		t.Errorf("status decode into a reused Event: %v allocs, want 0", a)
	}
	// Interleaved engines defeat the previous-value reuse; the Decoder's
	// table does not care.
	other := sampleStatus()
	other.Status.Engine = "west-a100-0"
	st2, _ := AppendEvent(nil, &other)
	dec := NewDecoder(64)
	if a := testing.AllocsPerRun(100, func() { _ = dec.Decode(st, &ev); _ = dec.Decode(st2, &ev) }); a != 0 {
		t.Errorf("interleaved status decode with a Decoder: %v allocs, want 0", a)
	}
	// A completion's conversation id is new each time in real streams;
	// here it repeats, so nothing at all is allocated.
	if a := testing.AllocsPerRun(100, func() { _ = dec.Decode(comp, &ev) }); a != 0 {
		t.Errorf("completion decode with repeated names: %v allocs, want 0", a)
	}
	var enc []byte
	if a := testing.AllocsPerRun(100, func() { enc, _ = AppendEvent(enc[:0], ptr(sampleCompletion())) }); a != 0 {
		t.Errorf("AppendEvent into a buffer with room: %v allocs, want 0", a)
	}
}

func TestDecoderTableBounded(t *testing.T) {
	dec := NewDecoder(2)
	var ev Event
	for _, name := range []string{"a", "b", "c", "a"} {
		e := Event{Kind: KindStatus, Status: EngineStatus{Engine: name, TimeUnixNano: 1}}
		b, _ := AppendEvent(nil, &e)
		if err := dec.Decode(b, &ev); err != nil || ev.Status.Engine != name {
			t.Fatalf("decode %q: %v, got %q", name, err, ev.Status.Engine)
		}
	}
	if len(dec.names) != 2 {
		t.Fatalf("table holds %d names, want the bound 2", len(dec.names))
	}
}

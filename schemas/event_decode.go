package schemas

import (
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

var (
	errUint32Overflow = errors.New("varint does not fit in uint32")
	errNoVersion      = errors.New("schema_version missing or 0")
)

// DecodeEvent decodes a SignalEvent (see signal.proto) into ev and
// validates it. ev is overwritten entirely and may be reused across calls.
//
// Unknown fields are skipped, so producers may add fields without a version
// bump. A schema_version newer than EventSchemaVersion gives an error
// wrapping ErrUnsupportedVersion; bytes that are not a SignalEvent give
// ErrMalformed; a decoded event that fails Validate gives ErrInvalid.
// DecodeEvent never panics and never reads past data. After an error ev
// holds partial data and must not be used.
//
// To save allocations, a name (engine, cluster, conversation id) equal to
// the one ev held before the call is kept rather than copied again, so
// decoding a run of events from one engine into one Event allocates
// nothing for status events. Decoder does the same across many engines.
func DecodeEvent(data []byte, ev *Event) error {
	return decodeEvent(data, ev, nil)
}

// Decoder decodes signal events like DecodeEvent, and also interns engine
// and cluster names in a bounded table, so that decoding an interleaved
// stream from many engines allocates nothing for those names. A Decoder
// is not safe for concurrent use: give each consumer goroutine its own.
type Decoder struct {
	names    map[string]string
	maxNames int
}

// NewDecoder returns a Decoder that interns up to maxNames distinct names.
// Once full it stops adding (names are still decoded, just copied), so a
// stream of garbage names cannot grow it without bound.
func NewDecoder(maxNames int) *Decoder {
	return &Decoder{names: make(map[string]string, min(max(maxNames, 0), 1024)), maxNames: maxNames}
}

// Decode is DecodeEvent with name interning.
func (d *Decoder) Decode(data []byte, ev *Event) error {
	return decodeEvent(data, ev, d)
}

func (d *Decoder) intern(b []byte) string {
	if s, ok := d.names[string(b)]; ok { // no allocation for the lookup
		return s
	}
	s := string(b)
	if len(d.names) < d.maxNames && len(b) <= MaxNameLen {
		d.names[s] = s
	}
	return s
}

// nameSource turns name bytes into strings, reusing an equal string from
// the previous contents of the Event or from the Decoder's table.
type nameSource struct {
	d                          *Decoder // nil for DecodeEvent
	engine, cluster, converstn string   // from the event being overwritten
	model                      string
}

func (ns *nameSource) name(b []byte, prev string) string {
	switch {
	case len(b) == 0:
		return ""
	case string(b) == prev: // the comparison does not allocate
		return prev
	case ns.d != nil:
		return ns.d.intern(b)
	}
	return string(b)
}

func decodeEvent(data []byte, ev *Event, d *Decoder) error {
	ns := nameSource{d: d, engine: ev.Completion.Engine, cluster: ev.Completion.Cluster,
		converstn: ev.Completion.ConversationID, model: ev.Completion.Model}
	if ev.Kind == KindStatus {
		ns.engine = ev.Status.Engine
	}
	*ev = Event{}
	if err := decodeEnvelope(data, ev, &ns); err != nil {
		return err
	}
	if err := ev.Validate(); err != nil {
		return fmt.Errorf("schemas: decode event: %w", err)
	}
	return nil
}

func decodeEnvelope(b []byte, ev *Event, ns *nameSource) error {
	var version uint64
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return malformed("event", protowire.ParseError(n))
		}
		b = b[n:]
		var err error
		switch {
		case num == fieldEventVersion && typ == protowire.VarintType:
			version, n = protowire.ConsumeVarint(b)
			if n >= 0 && version > EventSchemaVersion {
				return fmt.Errorf("schemas: decode event: %w: %d, this build reads up to %d",
					ErrUnsupportedVersion, version, EventSchemaVersion)
			}
		case num == fieldEventStatus && typ == protowire.BytesType:
			var msg []byte
			if msg, n = protowire.ConsumeBytes(b); n >= 0 {
				ev.setKind(KindStatus)
				err = decodeStatus(msg, &ev.Status, ns)
			}
		case num == fieldEventCompletion && typ == protowire.BytesType:
			var msg []byte
			if msg, n = protowire.ConsumeBytes(b); n >= 0 {
				ev.setKind(KindCompletion)
				err = decodeCompletion(msg, &ev.Completion, ns)
			}
		default: // unknown field, or a known one with another wire type
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if err == nil && n < 0 {
			err = protowire.ParseError(n)
		}
		if err != nil {
			return malformed("event", err)
		}
		b = b[n:]
	}
	if version == 0 {
		return malformed("event", errNoVersion)
	}
	return nil
}

// setKind selects a oneof member. As in protobuf, a message that sets one
// member and then another keeps only the last; the same member twice is
// merged, which decoding into the same struct does by itself.
func (ev *Event) setKind(k EventKind) {
	if ev.Kind != k {
		ev.Kind, ev.Status, ev.Completion = k, EngineStatus{}, Completion{}
	}
}

func malformed(what string, err error) error {
	return fmt.Errorf("schemas: decode %s: %w: %w", what, ErrMalformed, err)
}

func decodeStatus(b []byte, s *EngineStatus, ns *nameSource) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var err error
		switch {
		case num == fieldStatusEngine && typ == protowire.BytesType:
			var v []byte
			if v, n = protowire.ConsumeBytes(b); n >= 0 {
				s.Engine = ns.name(v, ns.engine)
			}
		case num == fieldStatusTime && typ == protowire.Fixed64Type:
			var v uint64
			v, n = protowire.ConsumeFixed64(b)
			s.TimeUnixNano = int64(v)
		case num == fieldStatusHealth && typ == protowire.VarintType:
			var v uint64
			v, n = protowire.ConsumeVarint(b)
			s.Health = decodeHealth(v)
		case num == fieldStatusKVUtilization && typ == protowire.Fixed64Type:
			var v uint64
			v, n = protowire.ConsumeFixed64(b)
			s.KVCacheUtilization = math.Float64frombits(v)
		case typ == protowire.VarintType && num >= fieldStatusReady && num <= fieldStatusWaiting:
			n, err = consumeUint32(b, s.uint32Field(num))
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if err != nil {
			return err
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
	}
	return nil
}

func (s *EngineStatus) uint32Field(num protowire.Number) *uint32 {
	switch num {
	case fieldStatusReady:
		return &s.ReadyReplicas
	case fieldStatusTotal:
		return &s.TotalReplicas
	case fieldStatusRunning:
		return &s.Running
	}
	return &s.Waiting
}

// decodeHealth maps values this build does not know to HealthUnknown, so
// that adding a health value is a compatible change (proto3 open enums).
func decodeHealth(v uint64) Health {
	if v > uint64(HealthUnhealthy) {
		return HealthUnknown
	}
	return Health(v)
}

// consumeUint32 reads a varint into dst. Values above MaxUint32 are
// rejected rather than truncated: no honest producer writes them.
func consumeUint32(b []byte, dst *uint32) (int, error) {
	v, n := protowire.ConsumeVarint(b)
	if n < 0 {
		return n, protowire.ParseError(n)
	}
	if v > math.MaxUint32 {
		return n, errUint32Overflow
	}
	*dst = uint32(v)
	return n, nil
}

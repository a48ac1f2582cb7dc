package aggregator

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/arrowipc"
	"github.com/ilb-router/ilb/streams/window"
)

// Kafka headers the aggregator writes besides schemas.HeaderSchema and
// schemas.HeaderDLQReason.
const (
	// HeaderWindow (schemas.HeaderWindow) on an ilb.features record
	// identifies the window and the signals partition it comes from:
	// "PARTITION/START_NS/END_NS". A record re-emitted after a restart
	// carries the same value and the same rows.
	HeaderWindow = schemas.HeaderWindow
	// HeaderDLQClass is the DLQ reason as a counter label: decode,
	// validate or unknown_schema.
	HeaderDLQClass = "ilb-dlq-class"
	// HeaderDLQTopic, HeaderDLQPartition and HeaderDLQOffset say where the
	// rejected record was.
	HeaderDLQTopic     = "ilb-dlq-topic"
	HeaderDLQPartition = "ilb-dlq-partition"
	HeaderDLQOffset    = "ilb-dlq-offset"
)

// DLQ reasons, the values of the ilb_aggregator_dlq_total reason label.
const (
	ReasonDecode        = "decode"
	ReasonValidate      = "validate"
	ReasonUnknownSchema = "unknown_schema"
)

// sink receives what the core emits. The Aggregator implements it; the
// benchmark discards.
type sink interface {
	// window is called for each emitted window with its rows (sorted by
	// engine then cluster), valid only during the call.
	window(p int32, rows []schemas.Feature)
}

// core is the state the consumer loop owns: the window state of each
// owned partition, what waits to be published, and the counters. It does
// no I/O besides encoding, so the benchmark drives it without Kafka.
type core struct {
	cfg    Config
	fc     window.FeaturesConfig
	dec    *schemas.Decoder
	ev     schemas.Event
	parts  map[int32]*partition
	sink   sink
	outbox []*kgo.Record
	rows   []schemas.Feature
	cnt    *counters
	emits  int // windows emitted since the last commit
	// profilesAsOf is the as-of time of the latest profiles record queued
	// (event clock); features records carry it (schemas.HeaderProfilesAsOf).
	profilesAsOf int64
}

func newCore(cfg Config, s sink, cnt *counters) *core {
	return &core{
		cfg:   cfg,
		fc:    cfg.windowConfig(),
		dec:   schemas.NewDecoder(2 * cfg.MaxEngines),
		parts: map[int32]*partition{},
		sink:  s,
		cnt:   cnt,
	}
}

// part returns the state of partition p, creating an empty one for a
// partition the group gave without an assignment callback (a fresh state
// is what an unknown commit means).
func (c *core) part(p int32, now time.Time) *partition {
	if ps := c.parts[p]; ps != nil {
		return ps
	}
	ps, _ := newPartition(p, c.fc, -1, "", now)
	c.parts[p] = ps
	return ps
}

// batchCounts are one batch's counters, added to the shared atomics once.
type batchCounts struct {
	status, completion      uint64
	dlq                     [numReasons]uint64
	dup, replayed, overflow uint64
}

// add handles one signals record: decode, validate, window update, or
// DLQ. It never fails: bad input is routed, counted and skipped.
func (c *core) add(r *kgo.Record, now time.Time, bc *batchCounts) {
	ps := c.part(r.Partition, now)
	ps.lastOffset, ps.lastArrival, ps.fetched = r.Offset, now, true
	if reason, err := c.decode(r); err != nil {
		c.dlq(r, reason, err, bc)
		return
	}
	t := eventTime(&c.ev)
	ps.maxEventNs = max(ps.maxEventNs, t)
	switch ps.f.Add(window.Position{Partition: r.Partition, Offset: r.Offset}, &c.ev) {
	case window.Invalid:
		c.dlq(r, reasonValidate, fmt.Errorf("event time %d ns outside 0..%d", t, window.MaxEventTimeNs), bc)
		return
	case window.Duplicate:
		bc.dup++
		return
	case window.Replayed:
		bc.replayed++
		return
	case window.Overflow:
		bc.overflow++
	}
	if c.ev.Kind == schemas.KindStatus {
		bc.status++
	} else {
		bc.completion++
	}
}

// decode reads the record into c.ev; on failure it returns the DLQ reason.
func (c *core) decode(r *kgo.Record) (reason, error) {
	for i := range r.Headers {
		h := &r.Headers[i]
		if h.Key == schemas.HeaderSchema && string(h.Value) != schemas.SchemaSignalV1 {
			return reasonUnknownSchema, fmt.Errorf("schema %q, want %q", h.Value, schemas.SchemaSignalV1)
		}
	}
	err := c.dec.Decode(r.Value, &c.ev)
	switch {
	case err == nil:
		return 0, nil
	case errors.Is(err, schemas.ErrUnsupportedVersion):
		return reasonUnknownSchema, err
	case errors.Is(err, schemas.ErrInvalid):
		return reasonValidate, err
	}
	return reasonDecode, err
}

func eventTime(ev *schemas.Event) int64 {
	if ev.Kind == schemas.KindStatus {
		return ev.Status.TimeUnixNano
	}
	return ev.Completion.TimeUnixNano
}

// dlq queues the raw record for the DLQ topic with the reason and origin
// in headers.
func (c *core) dlq(r *kgo.Record, why reason, err error, bc *batchCounts) {
	bc.dlq[why]++
	text := err.Error()
	if len(text) > schemas.MaxErrorLen {
		text = text[:schemas.MaxErrorLen]
	}
	h := make([]kgo.RecordHeader, 0, len(r.Headers)+5)
	h = append(h, r.Headers...)
	h = append(h,
		kgo.RecordHeader{Key: schemas.HeaderDLQReason, Value: []byte(text)},
		kgo.RecordHeader{Key: HeaderDLQClass, Value: []byte(why.String())},
		kgo.RecordHeader{Key: HeaderDLQTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: HeaderDLQPartition, Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
		kgo.RecordHeader{Key: HeaderDLQOffset, Value: strconv.AppendInt(nil, r.Offset, 10)},
	)
	c.outbox = append(c.outbox, &kgo.Record{
		Topic: c.cfg.DLQTopic, Key: r.Key, Value: r.Value, Headers: h, Timestamp: r.Timestamp,
	})
}

// drain emits the closed windows of every partition, in partition order,
// and works out each partition's commit point. It returns the windows
// emitted.
func (c *core) drain(now time.Time) (int, error) {
	var errs []error
	n := 0
	for _, p := range slices.Sorted(maps.Keys(c.parts)) {
		ps := c.parts[p]
		if ps.idle(now, c.cfg.IdleTimeout, c.cfg.OutOfOrder) {
			errs = append(errs, fmt.Errorf("aggregator: partition %d: replayed records did not arrive within %v; emitting without them", p, c.cfg.IdleTimeout))
		}
		if ps.f.Ready() {
			c.rows = ps.f.Drain(c.rows[:0])
			k, err := c.emit(p, c.rows)
			n += k
			errs = append(errs, err)
		}
		if err := ps.commitPoint(c.cfg.MaxCheckpointBytes); err != nil {
			c.cnt.checkpointBad.Add(1)
			errs = append(errs, err)
		}
		c.countWindowStats(ps)
	}
	c.emits += n
	return n, errors.Join(errs...)
}

// emit splits drained rows into windows and queues one ilb.features
// record per window.
func (c *core) emit(p int32, rows []schemas.Feature) (int, error) {
	n := 0
	for len(rows) > 0 {
		k := 1
		for k < len(rows) && rows[k].WindowEndUnixNano == rows[0].WindowEndUnixNano {
			k++
		}
		w := rows[:k]
		rows = rows[k:]
		if ps := c.parts[p]; ps != nil && w[0].WindowEndUnixNano <= ps.published {
			// Published by the previous owner after its last commit.
			c.cnt.republished.Add(1)
			if c.sink != nil {
				c.sink.window(p, w)
			}
			continue
		}
		rec, err := featureRecord(c.cfg.FeaturesTopic, p, w)
		if err != nil {
			return n, err
		}
		if c.profilesAsOf > 0 {
			setProfilesAsOf(rec, c.profilesAsOf)
		}
		c.outbox = append(c.outbox, rec)
		if c.sink != nil {
			c.sink.window(p, w)
		}
		n++
	}
	return n, nil
}

// featureRecord encodes one window's rows as an ilb.features record.
func featureRecord(topic string, p int32, rows []schemas.Feature) (*kgo.Record, error) {
	batch := schemas.FeaturesToRecord(nil, rows)
	defer batch.Release()
	value, err := arrowipc.EncodeStream(schemas.FeatureSchema, batch)
	if err != nil {
		return nil, fmt.Errorf("aggregator: encode features: %w", err)
	}
	end := rows[0].WindowEndUnixNano
	id := schemas.WindowID{Partition: p, Start: rows[0].WindowStartUnixNano, End: end}.String()
	return &kgo.Record{
		Topic: topic,
		// Keyed by signals partition: one partition's windows land on one
		// features partition, in order, so a reader can tell that a
		// partition has moved past a window (the optimizer's event clock).
		Key:   strconv.AppendInt(nil, int64(p), 10),
		Value: value,
		Headers: []kgo.RecordHeader{
			{Key: schemas.HeaderSchema, Value: []byte(schemas.FeatureSchemaVersion)},
			{Key: HeaderWindow, Value: []byte(id)},
		},
		Timestamp: time.Unix(0, end),
	}, nil
}

// countWindowStats adds the Windower counters the per-record outcomes do
// not show (late counts of events also applied to a later window).
func (c *core) countWindowStats(ps *partition) {
	st := ps.f.Stats()
	c.cnt.windows.Add(st.Windows - ps.stats.Windows)
	c.cnt.lateAny.Add(st.Late - ps.stats.Late)
	ps.stats = st
}

// drop forgets partition p (revoked or lost): its open windows are
// rebuilt by the next owner from the committed offset.
func (c *core) drop(p int32) { delete(c.parts, p) }

// setProfilesAsOf sets rec's schemas.HeaderProfilesAsOf to asOf unless it
// already names a later one.
func setProfilesAsOf(rec *kgo.Record, asOf int64) {
	v := strconv.AppendInt(nil, asOf, 10)
	for i, h := range rec.Headers {
		if h.Key == schemas.HeaderProfilesAsOf {
			if old, err := strconv.ParseInt(string(h.Value), 10, 64); err != nil || old < asOf {
				rec.Headers[i].Value = v
			}
			return
		}
	}
	rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: schemas.HeaderProfilesAsOf, Value: v})
}

// announceProfiles records that a profiles record as of asOf is queued:
// every features record still waiting in the outbox for a window ending
// after asOf, and every one emitted from now on, says so. A reader then
// learns of the fit no later than from the first window after it of the
// partition whose windows the fit waited for.
func (c *core) announceProfiles(asOf int64) {
	c.profilesAsOf = max(c.profilesAsOf, asOf)
	for _, rec := range c.outbox {
		if rec.Topic != c.cfg.FeaturesTopic {
			continue
		}
		if id, err := windowID(rec); err == nil && id.End > asOf {
			setProfilesAsOf(rec, asOf)
		}
	}
}

// windowID reads a features record's schemas.HeaderWindow.
func windowID(rec *kgo.Record) (schemas.WindowID, error) {
	for _, h := range rec.Headers {
		if h.Key == schemas.HeaderWindow {
			return schemas.ParseWindowID(string(h.Value))
		}
	}
	return schemas.WindowID{}, fmt.Errorf("no %s header", schemas.HeaderWindow)
}

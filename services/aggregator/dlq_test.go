package aggregator

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// rawEvent hand-encodes a SignalEvent with the given schema version and a
// completion payload, bypassing AppendEvent's validation.
func rawEvent(version uint64, engine string, tNs int64, prompt, cached uint64) []byte {
	var c []byte
	c = protowire.AppendTag(c, 1, protowire.BytesType)
	c = protowire.AppendString(c, engine)
	c = protowire.AppendTag(c, 2, protowire.Fixed64Type)
	c = protowire.AppendFixed64(c, uint64(tNs))
	c = protowire.AppendTag(c, 5, protowire.VarintType)
	c = protowire.AppendVarint(c, prompt)
	c = protowire.AppendTag(c, 6, protowire.VarintType)
	c = protowire.AppendVarint(c, cached)
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, version)
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	return protowire.AppendBytes(b, c)
}

func TestMalformedRecordsGoToDLQ(t *testing.T) {
	addrs := streamstest.Kafka(t)
	withSchema := func(v []byte, schema string) *kgo.Record {
		r := &kgo.Record{Topic: schemas.TopicSignals, Partition: 2, Key: []byte("e3"), Value: v}
		if schema != "" {
			r.Headers = []kgo.RecordHeader{{Key: schemas.HeaderSchema, Value: []byte(schema)}, {Key: "traceparent", Value: []byte("x")}}
		}
		return r
	}
	bad := []struct {
		rec   *kgo.Record
		class string
	}{
		{withSchema([]byte("not a protobuf message \xff\xff"), schemas.SchemaSignalV1), ReasonDecode},
		{withSchema(rawEvent(1, "e3", at(0.2), 10, 20), schemas.SchemaSignalV1), ReasonValidate}, // cached > prompt
		{withSchema(rawEvent(99, "e3", at(0.2), 10, 5), ""), ReasonUnknownSchema},                // newer version
		{withSchema(rawEvent(1, "e3", at(0.2), 10, 5), "signal/v9"), ReasonUnknownSchema},
	}
	send := producer(t, addrs)
	send(signal(t, 2, completion("e3", "", at(0.1), 50, 5)))
	for _, b := range bad {
		send(b.rec)
	}
	send(signal(t, 2, completion("e3", "", at(0.7), 70, 5)), signal(t, 2, status("e3", at(2.5), 0)))

	r := start(t, testConfig(addrs, "g-dlq"), Deps{})
	dlq := readTopic(t, addrs, schemas.TopicSignalsDLQ).waitN(t, len(bad), 20*time.Second)
	for i, d := range dlq {
		want := bad[i]
		if header(d, HeaderDLQClass) != want.class || header(d, schemas.HeaderDLQReason) == "" {
			t.Errorf("DLQ record %d: class %q reason %q, want class %q", i, header(d, HeaderDLQClass), header(d, schemas.HeaderDLQReason), want.class)
		}
		if header(d, HeaderDLQTopic) != schemas.TopicSignals || header(d, HeaderDLQPartition) != "2" ||
			header(d, HeaderDLQOffset) != strconv.Itoa(i+1) {
			t.Errorf("DLQ record %d origin: %s/%s/%s", i, header(d, HeaderDLQTopic), header(d, HeaderDLQPartition), header(d, HeaderDLQOffset))
		}
		if !bytes.Equal(d.Value, want.rec.Value) || string(d.Key) != "e3" {
			t.Errorf("DLQ record %d: value or key changed", i)
		}
		if want.rec.Headers != nil && header(d, "traceparent") != "x" {
			t.Errorf("DLQ record %d lost the original headers: %v", i, d.Headers)
		}
	}
	// The aggregator went on: the good events around the bad ones make a
	// window.
	got := features(t, readTopic(t, addrs, schemas.TopicFeatures).waitN(t, 1, 20*time.Second))
	if e, ok := row(got, at(1), "e3", ""); !ok || e.Requests != 2 {
		t.Errorf("window after bad input: %+v (found %v)", e, ok)
	}
	waitFor(t, 5*time.Second, "counters", func() bool { return r.a.cnt.completion.Load() == 2 })
	for i, want := range []uint64{1, 1, 2} {
		if got := r.a.cnt.dlq[i].Load(); got != want {
			t.Errorf("dlq counter %s = %d, want %d", reason(i), got, want)
		}
	}
}

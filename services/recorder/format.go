package recorder

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/schemas"
)

// RecordingSchemaVersion is the value of the "ilb.schema" metadata key of a
// recording (README.md, Recording format).
const RecordingSchemaVersion = "recording/v1"

// headerType is one Kafka record header.
var headerType = arrow.StructOf(
	arrow.Field{Name: "key", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "value", Type: arrow.BinaryTypes.Binary, Nullable: true},
)

// RecordingSchema is the Arrow schema of a recording: one row per Kafka
// record, in the order the recorder consumed them (which keeps the order of
// each partition). Treat it as read-only.
var RecordingSchema = func() *arrow.Schema {
	md := arrow.NewMetadata([]string{schemas.SchemaMetadataKey}, []string{RecordingSchemaVersion})
	return arrow.NewSchema([]arrow.Field{
		{Name: "topic", Type: arrow.BinaryTypes.String},
		{Name: "partition", Type: arrow.PrimitiveTypes.Int32},
		{Name: "offset", Type: arrow.PrimitiveTypes.Int64},
		{Name: "timestamp", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}},
		{Name: "key", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "value", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "headers", Type: arrow.ListOf(headerType)},
	}, &md)
}()

// Column indices of RecordingSchema.
const (
	colTopic = iota
	colPartition
	colOffset
	colTimestamp
	colKey
	colValue
	colHeaders
	numCols
)

// ErrFormat is wrapped by every error about a file that is not a valid
// recording.
var ErrFormat = errors.New("recorder: not a valid recording")

// batchBuilder accumulates Kafka records into recording batches.
type batchBuilder struct {
	b *array.RecordBuilder
	n int
	// bytes counts keys, values and headers appended since creation.
	bytes int64
}

func newBatchBuilder(mem memory.Allocator) *batchBuilder {
	return &batchBuilder{b: array.NewRecordBuilder(mem, RecordingSchema)}
}

func (bb *batchBuilder) add(r *kgo.Record) {
	b := bb.b
	b.Field(colTopic).(*array.StringBuilder).Append(r.Topic)
	b.Field(colPartition).(*array.Int32Builder).Append(r.Partition)
	b.Field(colOffset).(*array.Int64Builder).Append(r.Offset)
	b.Field(colTimestamp).(*array.TimestampBuilder).Append(arrow.Timestamp(r.Timestamp.UnixNano()))
	appendBytes(b.Field(colKey).(*array.BinaryBuilder), r.Key)
	appendBytes(b.Field(colValue).(*array.BinaryBuilder), r.Value)
	lb := b.Field(colHeaders).(*array.ListBuilder)
	lb.Append(true)
	sb := lb.ValueBuilder().(*array.StructBuilder)
	for _, h := range r.Headers {
		sb.Append(true)
		sb.FieldBuilder(0).(*array.StringBuilder).Append(h.Key)
		appendBytes(sb.FieldBuilder(1).(*array.BinaryBuilder), h.Value)
		bb.bytes += int64(len(h.Key) + len(h.Value))
	}
	bb.bytes += int64(len(r.Key) + len(r.Value))
	bb.n++
}

// appendBytes keeps nil (a Kafka null) apart from empty.
func appendBytes(b *array.BinaryBuilder, v []byte) {
	if v == nil {
		b.AppendNull()
		return
	}
	b.Append(v)
}

// flush returns the accumulated batch (nil when empty) and starts a new one.
func (bb *batchBuilder) flush() arrow.RecordBatch {
	if bb.n == 0 {
		return nil
	}
	bb.n = 0
	return bb.b.NewRecordBatch()
}

func (bb *batchBuilder) release() { bb.b.Release() }

// recordsFromBatch converts one recording batch back to Kafka records with
// their original topic, partition, offset, timestamp, key, value and
// headers. Byte slices are copied: the records outlive the batch.
func recordsFromBatch(rec arrow.RecordBatch) ([]*kgo.Record, error) {
	if err := checkSchema(rec.Schema()); err != nil {
		return nil, err
	}
	c, err := columnsOf(rec)
	if err != nil {
		return nil, err
	}
	out := make([]*kgo.Record, rec.NumRows())
	for i := range out {
		r, err := c.record(i)
		if err != nil {
			return nil, fmt.Errorf("%w: row %d: %w", ErrFormat, i, err)
		}
		out[i] = r
	}
	return out, nil
}

// checkSchema accepts a schema equal to RecordingSchema, field by field
// (names, types, nullability) and by its version metadata.
func checkSchema(sc *arrow.Schema) error {
	if v, _ := sc.Metadata().GetValue(schemas.SchemaMetadataKey); v != RecordingSchemaVersion {
		return fmt.Errorf("%w: metadata %s is %q, want %q", ErrFormat, schemas.SchemaMetadataKey, v, RecordingSchemaVersion)
	}
	if sc.NumFields() != numCols {
		return fmt.Errorf("%w: %d columns, want %d", ErrFormat, sc.NumFields(), numCols)
	}
	for i, want := range RecordingSchema.Fields() {
		got := sc.Field(i)
		if got.Name != want.Name || !arrow.TypeEqual(got.Type, want.Type) || (got.Nullable && !want.Nullable) {
			return fmt.Errorf("%w: column %d is %s %s, want %s %s", ErrFormat, i, got.Name, got.Type, want.Name, want.Type)
		}
	}
	return nil
}

// columns are a batch's typed columns.
type columns struct {
	topic     *array.String
	partition *array.Int32
	offset    *array.Int64
	ts        *array.Timestamp
	key       *array.Binary
	value     *array.Binary
	headers   *array.List
	hkey      *array.String
	hvalue    *array.Binary
}

func columnsOf(rec arrow.RecordBatch) (*columns, error) {
	var c columns
	var ok [9]bool
	c.topic, ok[0] = rec.Column(colTopic).(*array.String)
	c.partition, ok[1] = rec.Column(colPartition).(*array.Int32)
	c.offset, ok[2] = rec.Column(colOffset).(*array.Int64)
	c.ts, ok[3] = rec.Column(colTimestamp).(*array.Timestamp)
	c.key, ok[4] = rec.Column(colKey).(*array.Binary)
	c.value, ok[5] = rec.Column(colValue).(*array.Binary)
	c.headers, ok[6] = rec.Column(colHeaders).(*array.List)
	if ok[6] {
		st, sok := c.headers.ListValues().(*array.Struct)
		if sok && st.NumField() == 2 {
			c.hkey, ok[7] = st.Field(0).(*array.String)
			c.hvalue, ok[8] = st.Field(1).(*array.Binary)
		}
	}
	for i, v := range ok {
		if !v {
			return nil, fmt.Errorf("%w: column part %d has an unexpected array type", ErrFormat, i)
		}
	}
	return &c, nil
}

func (c *columns) record(i int) (*kgo.Record, error) {
	for _, a := range []arrow.Array{c.topic, c.partition, c.offset, c.ts, c.headers} {
		if a.IsNull(i) {
			return nil, errors.New("null in a required column")
		}
	}
	r := &kgo.Record{
		Topic:     strings.Clone(c.topic.Value(i)),
		Partition: c.partition.Value(i),
		Offset:    c.offset.Value(i),
		Timestamp: time.Unix(0, int64(c.ts.Value(i))).UTC(),
		Key:       cloneBytes(c.key, i),
		Value:     cloneBytes(c.value, i),
	}
	if err := schemas.ValidTopicName(r.Topic); err != nil {
		return nil, err
	}
	if r.Partition < 0 || r.Offset < 0 {
		return nil, fmt.Errorf("partition %d, offset %d", r.Partition, r.Offset)
	}
	start, end := c.headers.ValueOffsets(i)
	if start < 0 || end < start || end > int64(c.hkey.Len()) || end > int64(c.hvalue.Len()) {
		return nil, fmt.Errorf("header offsets %d..%d out of range", start, end)
	}
	for j := start; j < end; j++ {
		if c.hkey.IsNull(int(j)) {
			return nil, errors.New("null header key")
		}
		r.Headers = append(r.Headers, kgo.RecordHeader{
			Key:   strings.Clone(c.hkey.Value(int(j))),
			Value: cloneBytes(c.hvalue, int(j)),
		})
	}
	return r, nil
}

func cloneBytes(a *array.Binary, i int) []byte {
	if a.IsNull(i) {
		return nil
	}
	return append([]byte{}, a.Value(i)...)
}

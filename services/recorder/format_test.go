package recorder

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"
)

// encode builds a complete recording of recs in memory.
func encode(t testing.TB, recs []*kgo.Record) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := ipc.NewFileWriter(&buf, ipc.WithSchema(RecordingSchema))
	if err != nil {
		t.Fatal(err)
	}
	bb := newBatchBuilder(memory.DefaultAllocator)
	defer bb.release()
	for _, r := range recs {
		bb.add(r)
	}
	rec := bb.flush()
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sample() []*kgo.Record {
	ts := time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)
	return []*kgo.Record{
		{Topic: "ilb.signals", Partition: 2, Offset: 7, Timestamp: ts, Key: []byte("e1"), Value: []byte{1, 2},
			Headers: []kgo.RecordHeader{{Key: "ilb-schema", Value: []byte("signal/v1")}, {Key: "nil"}}},
		{Topic: "ilb.signals", Partition: 0, Offset: 0, Timestamp: ts.Add(time.Millisecond), Value: []byte{}},
	}
}

func TestEncodeDecodeKeepsNullsAndHeaders(t *testing.T) {
	got, err := DecodeRecording(encode(t, sample()))
	if err != nil {
		t.Fatal(err)
	}
	want := sample()
	if len(got) != len(want) {
		t.Fatalf("%d records", len(got))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Topic != w.Topic || g.Partition != w.Partition || g.Offset != w.Offset || !g.Timestamp.Equal(w.Timestamp) ||
			!bytes.Equal(g.Key, w.Key) || (g.Key == nil) != (w.Key == nil) ||
			!bytes.Equal(g.Value, w.Value) || (g.Value == nil) != (w.Value == nil) || len(g.Headers) != len(w.Headers) {
			t.Fatalf("record %d: got %+v, want %+v", i, g, w)
		}
		for j := range w.Headers {
			if g.Headers[j].Key != w.Headers[j].Key || !bytes.Equal(g.Headers[j].Value, w.Headers[j].Value) {
				t.Errorf("record %d header %d: %+v", i, j, g.Headers[j])
			}
		}
	}
}

func FuzzDecodeRecording(f *testing.F) {
	good := encode(f, sample())
	f.Add(good)
	f.Add(good[:len(good)-9])
	f.Add([]byte("ARROW1\x00\x00garbageARROW1"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := DecodeRecording(data)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		for _, r := range recs {
			if r.Topic == "" || r.Partition < 0 || r.Offset < 0 {
				t.Fatalf("decoded an invalid record %+v", r)
			}
		}
	})
}

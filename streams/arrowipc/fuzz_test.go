package arrowipc_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/ilb-router/ilb/streams/arrowipc"
)

func seedStream(f *testing.F) []byte {
	mem := memory.NewGoAllocator()
	recs := batches(f, mem, 3, 0, 4)
	defer arrowipc.Release(recs)
	data, err := arrowipc.EncodeStream(featureSchema, recs...)
	if err != nil {
		f.Fatal(err)
	}
	return data
}

// FuzzDecodeStream: any input decodes to an error or to batches whose
// every value can be read; nothing leaks either way.
func FuzzDecodeStream(f *testing.F) {
	data := seedStream(f)
	f.Add(data)
	f.Add(data[:len(data)/2])
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		recs, schema, err := arrowipc.DecodeStream(in, mem)
		if err == nil {
			if schema == nil {
				t.Fatal("nil schema without error")
			}
			touch(recs)
		}
		arrowipc.Release(recs)
		mem.AssertSize(t, 0)
	})
}

func FuzzDecodeFile(f *testing.F) {
	mem := memory.NewGoAllocator()
	recs := batches(f, mem, 3, 5)
	path := filepath.Join(f.TempDir(), "seed.arrow")
	if err := arrowipc.WriteFile(path, featureSchema, recs...); err != nil {
		f.Fatal(err)
	}
	arrowipc.Release(recs)
	data, _ := os.ReadFile(path)
	f.Add(data)
	f.Add(data[:len(data)-12])
	f.Fuzz(func(t *testing.T, in []byte) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		recs, _, err := arrowipc.DecodeFile(in, mem)
		if err == nil {
			touch(recs)
		}
		arrowipc.Release(recs)
		mem.AssertSize(t, 0)
	})
}

func BenchmarkEncodeStream(b *testing.B) {
	mem := memory.NewGoAllocator()
	rec := makeBatch(b, mem, 1024, 1)
	defer rec.Release()
	b.ReportAllocs()
	var size int
	for b.Loop() {
		data, err := arrowipc.EncodeStream(featureSchema, rec)
		if err != nil {
			b.Fatal(err)
		}
		size = len(data)
	}
	b.ReportMetric(float64(1024*b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(size), "bytes/batch")
}

func BenchmarkDecodeStream(b *testing.B) {
	mem := memory.NewGoAllocator()
	rec := makeBatch(b, mem, 1024, 1)
	data, err := arrowipc.EncodeStream(featureSchema, rec)
	rec.Release()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		recs, _, err := arrowipc.DecodeStream(data, mem)
		if err != nil {
			b.Fatal(err)
		}
		arrowipc.Release(recs)
	}
	b.ReportMetric(float64(1024*b.N)/b.Elapsed().Seconds(), "rows/s")
}

func ExampleDecodeStream() {
	mem := memory.NewGoAllocator()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "engine", Type: arrow.BinaryTypes.String},
		{Name: "load_rps", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	b.Field(0).(*array.StringBuilder).AppendValues([]string{"eng-a", "eng-b"}, nil)
	b.Field(1).(*array.Float64Builder).AppendValues([]float64{81, 9.5}, nil)
	rec := b.NewRecordBatch()
	b.Release()

	payload, _ := arrowipc.EncodeStream(schema, rec) // e.g. one Kafka record value
	rec.Release()

	recs, _, err := arrowipc.DecodeStream(payload, mem)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer arrowipc.Release(recs)
	var out bytes.Buffer
	for _, r := range recs {
		names := r.Column(0).(*array.String)
		loads := r.Column(1).(*array.Float64)
		for i := range int(r.NumRows()) {
			fmt.Fprintf(&out, "%s %.1f\n", names.Value(i), loads.Value(i))
		}
	}
	fmt.Print(out.String())
	_, _, err = arrowipc.DecodeStream(payload[:len(payload)/2], mem)
	fmt.Println("truncated:", err != nil)
	// Output:
	// eng-a 81.0
	// eng-b 9.5
	// truncated: true
}

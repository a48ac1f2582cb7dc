package arrowipc_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/goleak"

	"github.com/ilb-router/ilb/streams/arrowipc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// featureSchema looks like a windowed-feature table: strings, timestamps,
// nullable floats, a dictionary column and a list column, so that every
// buffer kind is exercised.
var featureMeta = arrow.NewMetadata([]string{"ilb-schema"}, []string{"features/v1"})

var featureSchema = arrow.NewSchema([]arrow.Field{
	{Name: "engine", Type: arrow.BinaryTypes.String},
	{Name: "window_end", Type: arrow.FixedWidthTypes.Timestamp_ms},
	{Name: "ttft_p50_ms", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "requests", Type: arrow.PrimitiveTypes.Int64},
	{Name: "healthy", Type: arrow.FixedWidthTypes.Boolean},
	{Name: "region", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}},
	{Name: "batch_sizes", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)},
}, &featureMeta)

// makeBatch builds a batch of n rows whose values depend on seed.
func makeBatch(t testing.TB, mem memory.Allocator, n, seed int) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(mem, featureSchema)
	defer b.Release()
	t0 := time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC).UnixMilli()
	for i := range n {
		k := seed*1000 + i
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("eng-%d", k%7))
		b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(t0 + int64(k)*1000))
		if k%5 == 0 {
			b.Field(2).(*array.Float64Builder).AppendNull()
		} else {
			b.Field(2).(*array.Float64Builder).Append(float64(k) * 1.5)
		}
		b.Field(3).(*array.Int64Builder).Append(int64(k))
		b.Field(4).(*array.BooleanBuilder).Append(k%3 != 0)
		if err := b.Field(5).(*array.BinaryDictionaryBuilder).AppendString([]string{"east-us", "west-europe"}[k%2]); err != nil {
			t.Fatal(err)
		}
		lb := b.Field(6).(*array.ListBuilder)
		lb.Append(true)
		for j := range k % 4 {
			lb.ValueBuilder().(*array.Int32Builder).Append(int32(j))
		}
	}
	return b.NewRecordBatch()
}

func checked(t testing.TB) *memory.CheckedAllocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

func batches(t testing.TB, mem memory.Allocator, sizes ...int) []arrow.RecordBatch {
	recs := make([]arrow.RecordBatch, len(sizes))
	for i, n := range sizes {
		recs[i] = makeBatch(t, mem, n, i)
	}
	return recs
}

func assertEqual(t *testing.T, got, want []arrow.RecordBatch) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d batches, want %d", len(got), len(want))
	}
	for i := range want {
		if !array.RecordEqual(got[i], want[i]) {
			t.Fatalf("batch %d differs:\ngot  %v\nwant %v", i, got[i], want[i])
		}
	}
}

func TestStreamRoundTrip(t *testing.T) {
	mem := checked(t)
	want := batches(t, mem, 10, 1, 0, 250)
	defer arrowipc.Release(want)
	data, err := arrowipc.EncodeStream(featureSchema, want...)
	if err != nil {
		t.Fatal(err)
	}
	got, schema, err := arrowipc.DecodeStream(data, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer arrowipc.Release(got)
	if !schema.Equal(featureSchema) || schema.Metadata().FindKey("ilb-schema") < 0 {
		t.Fatalf("schema %v, want %v with metadata", schema, featureSchema)
	}
	assertEqual(t, got, want)
	if arrowipc.Rows(got) != 261 {
		t.Fatalf("Rows = %d, want 261", arrowipc.Rows(got))
	}
}

func TestEmptyStream(t *testing.T) {
	mem := checked(t)
	data, err := arrowipc.EncodeStream(featureSchema)
	if err != nil {
		t.Fatal(err)
	}
	got, schema, err := arrowipc.DecodeStream(data, mem)
	if err != nil || len(got) != 0 || !schema.Equal(featureSchema) {
		t.Fatalf("empty stream: %d batches, schema %v, err %v", len(got), schema, err)
	}
}

func TestEncodeRejectsOtherSchema(t *testing.T) {
	mem := checked(t)
	rec := makeBatch(t, mem, 3, 0)
	defer rec.Release()
	other := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)
	if _, err := arrowipc.EncodeStream(other, rec); err == nil {
		t.Fatal("EncodeStream accepted a batch of another schema")
	}
	if _, err := arrowipc.EncodeStream(nil); err == nil {
		t.Fatal("EncodeStream accepted a nil schema")
	}
	if err := arrowipc.WriteFile(filepath.Join(t.TempDir(), "f.arrow"), other, rec); err == nil {
		t.Fatal("WriteFile accepted a batch of another schema")
	}
}

// TestDecodeCorruptStream cuts and flips a valid stream in many places;
// every result must be an error or valid batches, never a panic or a leak.
func TestDecodeCorruptStream(t *testing.T) {
	mem := checked(t)
	recs := batches(t, mem, 20, 5)
	data, err := arrowipc.EncodeStream(featureSchema, recs...)
	arrowipc.Release(recs)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"empty":   {},
		"garbage": []byte("definitely not arrow"),
		"zeros":   make([]byte, 64),
	}
	for _, cut := range []int{1, 4, 8, 100, len(data) / 2, len(data) - 9} {
		cases[fmt.Sprint("cut at ", cut)] = data[:cut]
	}
	errs := 0
	for name, in := range cases {
		got, _, err := arrowipc.DecodeStream(in, mem)
		arrowipc.Release(got)
		if err != nil {
			errs++
		} else if name != "empty" && len(got) == len(recs) {
			t.Errorf("%s: decoded as the whole stream", name)
		}
	}
	if errs < len(cases)-2 {
		t.Errorf("only %d of %d corrupt inputs gave an error", errs, len(cases))
	}
	for i := range len(data) {
		flipped := append([]byte(nil), data...)
		flipped[i] ^= 0xff
		got, _, err := arrowipc.DecodeStream(flipped, mem)
		if err == nil {
			touch(got)
		}
		arrowipc.Release(got)
	}
}

// touch reads every value of recs, as a consumer would.
func touch(recs []arrow.RecordBatch) int {
	n := 0
	for _, r := range recs {
		for _, c := range r.Columns() {
			for i := range c.Len() {
				n += len(c.ValueStr(i))
			}
		}
	}
	return n
}

func TestFileRoundTrip(t *testing.T) {
	mem := checked(t)
	want := batches(t, mem, 7, 300)
	defer arrowipc.Release(want)
	path := filepath.Join(t.TempDir(), "features.arrow")
	if err := arrowipc.WriteFile(path, featureSchema, want...); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + arrowipc.PartialSuffix); !os.IsNotExist(err) {
		t.Fatalf("partial file left behind: %v", err)
	}
	got, schema, err := arrowipc.ReadFile(path, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer arrowipc.Release(got)
	if !schema.Equal(featureSchema) {
		t.Fatalf("schema %v", schema)
	}
	assertEqual(t, got, want)
	if _, _, err := arrowipc.ReadFile(filepath.Join(t.TempDir(), "missing"), mem); err == nil {
		t.Fatal("ReadFile of a missing file succeeded")
	}
}

func TestDecodeCorruptFile(t *testing.T) {
	mem := checked(t)
	recs := batches(t, mem, 9, 9)
	path := filepath.Join(t.TempDir(), "f.arrow")
	err := arrowipc.WriteFile(path, featureSchema, recs...)
	arrowipc.Release(recs)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	for _, cut := range []int{0, 6, 8, 64, len(data) / 2, len(data) - 1} {
		got, _, err := arrowipc.DecodeFile(data[:cut], mem)
		arrowipc.Release(got)
		if err == nil {
			t.Errorf("file cut at %d of %d decoded", cut, len(data))
		}
	}
	for i := 0; i < len(data); i += 3 {
		flipped := append([]byte(nil), data...)
		flipped[i] ^= 0x5a
		got, _, err := arrowipc.DecodeFile(flipped, mem)
		if err == nil {
			touch(got)
		}
		arrowipc.Release(got)
	}
}

func TestFileWriterRecoverAndClose(t *testing.T) {
	mem := checked(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "out.arrow")
	w, err := arrowipc.NewFileWriter(path, featureSchema)
	if err != nil {
		t.Fatal(err)
	}
	want := batches(t, mem, 5, 6, 7)
	defer arrowipc.Release(want)
	for _, rec := range want {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if w.Rows() != 18 || w.Batches() != 3 {
		t.Fatalf("Rows %d Batches %d", w.Rows(), w.Batches())
	}
	// The process "dies" here: what is on disk must be recoverable.
	got, schema, err := arrowipc.RecoverFile(w.PartialPath(), mem)
	if err != nil || !schema.Equal(featureSchema) {
		t.Fatalf("RecoverFile: %v", err)
	}
	assertEqual(t, got, want)
	arrowipc.Release(got)

	// A cut in the last batch loses only that batch.
	data, _ := os.ReadFile(w.PartialPath())
	cut := filepath.Join(dir, "cut.partial")
	os.WriteFile(cut, data[:len(data)-10], 0o644)
	got, _, err = arrowipc.RecoverFile(cut, mem)
	if err != nil {
		t.Fatal(err)
	}
	assertEqual(t, got, want[:2])
	arrowipc.Release(got)

	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err == nil {
		t.Fatal("second Close succeeded")
	}
	if err := w.Write(want[0]); err == nil {
		t.Fatal("Write after Close succeeded")
	}
	got, _, err = arrowipc.ReadFile(path, mem)
	if err != nil {
		t.Fatal(err)
	}
	assertEqual(t, got, want)
	arrowipc.Release(got)
	if _, err := os.Stat(w.PartialPath()); !os.IsNotExist(err) {
		t.Fatal("partial file still there after Close")
	}
	if _, _, err := arrowipc.RecoverFile(filepath.Join(dir, "cut.partial"+"x"), mem); err == nil {
		t.Fatal("RecoverFile of a missing file succeeded")
	}
	os.WriteFile(filepath.Join(dir, "junk"), []byte("not arrow at all"), 0o644)
	if _, _, err := arrowipc.RecoverFile(filepath.Join(dir, "junk"), mem); err == nil {
		t.Fatal("RecoverFile accepted junk")
	}
}

func TestFileWriterAbort(t *testing.T) {
	mem := checked(t)
	path := filepath.Join(t.TempDir(), "a.arrow")
	w, err := arrowipc.NewFileWriter(path, featureSchema)
	if err != nil {
		t.Fatal(err)
	}
	rec := makeBatch(t, mem, 2, 0)
	defer rec.Release()
	w.Write(rec)
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, w.PartialPath()} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s exists after Abort", p)
		}
	}
	other := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)
	w2, _ := arrowipc.NewFileWriter(path, other)
	defer w2.Abort()
	if err := w2.Write(rec); err == nil {
		t.Fatal("FileWriter accepted a batch of another schema")
	}
}

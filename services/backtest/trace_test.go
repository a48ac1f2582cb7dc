package backtest

import (
	"bytes"
	"compress/gzip"
	"errors"
	"slices"
	"strings"
	"testing"
)

func readString(t *testing.T, s string, opt ReadOptions) *Trace {
	t.Helper()
	tr, err := ReadTrace(strings.NewReader(s), opt)
	if err != nil {
		t.Fatalf("ReadTrace: %v", err)
	}
	return tr
}

func TestReadCSV(t *testing.T) {
	in := "timestamp_ms,cluster,conversation_id,input_tokens,output_tokens,prefix_blocks\n" +
		"1500.5,fe-a,c1,1024,10,7 8\n" +
		"\n" +
		`1000,fe-b,"conv, with comma",100,1,` + "\n" +
		"1000,,,5,2,9\n"
	tr := readString(t, in, ReadOptions{})
	want := []Request{ // sorted by time, equal times in file order, first at 0
		{ArrivalNs: 0, Cluster: "fe-b", Conversation: "conv, with comma", InputTokens: 100, OutputTokens: 1},
		{ArrivalNs: 0, InputTokens: 5, OutputTokens: 2, Blocks: []uint64{9}},
		{ArrivalNs: 500_500_000, Cluster: "fe-a", Conversation: "c1", InputTokens: 1024, OutputTokens: 10, Blocks: []uint64{7, 8}},
	}
	if tr.Format != FormatCSV || !equalRequests(tr.Requests, want) {
		t.Fatalf("got %s %+v\nwant %+v", tr.Format, tr.Requests, want)
	}
}

func TestReadMooncake(t *testing.T) {
	in := `{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 2353]}
{"timestamp": 30535, "input_length": 6472, "output_length": 26, "hash_ids": [46, 47, 2366], "extra": true}
{"timestamp": 27000, "input_length": 10, "output_length": 1}
`
	tr := readString(t, in, ReadOptions{})
	want := []Request{
		{ArrivalNs: 0, InputTokens: 10, OutputTokens: 1},
		{ArrivalNs: 482_000_000, InputTokens: 6955, OutputTokens: 52, Blocks: []uint64{46, 47, 2353}},
		{ArrivalNs: 3_535_000_000, InputTokens: 6472, OutputTokens: 26, Blocks: []uint64{46, 47, 2366}},
	}
	if tr.Format != FormatMooncake || !equalRequests(tr.Requests, want) {
		t.Fatalf("got %s %+v", tr.Format, tr.Requests)
	}
}

func TestReadAzure(t *testing.T) {
	in := "TIMESTAMP,ContextTokens,GeneratedTokens\n" +
		"2023-11-16 18:15:46.6805900,374,44\n" +
		"2023-11-16 18:15:50.9951690,396,109\n"
	tr := readString(t, in, ReadOptions{})
	want := []Request{
		{ArrivalNs: 0, InputTokens: 374, OutputTokens: 44},
		{ArrivalNs: 4_314_579_000, InputTokens: 396, OutputTokens: 109},
	}
	if tr.Format != FormatAzure || !equalRequests(tr.Requests, want) {
		t.Fatalf("got %s %+v", tr.Format, tr.Requests)
	}
}

func equalRequests(a, b []Request) bool {
	return slices.EqualFunc(a, b, func(x, y Request) bool {
		return x.ArrivalNs == y.ArrivalNs && x.Cluster == y.Cluster && x.Conversation == y.Conversation &&
			x.InputTokens == y.InputTokens && x.OutputTokens == y.OutputTokens && slices.Equal(x.Blocks, y.Blocks)
	})
}

func TestBadLines(t *testing.T) {
	const csvHead = "timestamp_ms,cluster,conversation_id,input_tokens,output_tokens,prefix_blocks\n"
	const azureHead = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
	for _, tc := range []struct {
		name, in string
		line     int
		msg      string
	}{
		{"csv header", "timestamp_ms,cluster\n1,a,b,1,1,\n", 1, "header"},
		{"csv fields", csvHead + "1,a,b,1,1\n", 2, "5 fields"},
		{"csv time", csvHead + "x,a,b,1,1,\n", 2, "timestamp_ms"},
		{"csv negative time", csvHead + "-5,a,b,1,1,\n", 2, "timestamp"},
		{"csv nan time", csvHead + "NaN,a,b,1,1,\n", 2, "timestamp"},
		{"csv zero output", csvHead + "1,a,b,1,0,\n", 2, "output tokens"},
		{"csv huge input", csvHead + "1,a,b,99999999999,1,\n", 2, "input tokens"},
		{"csv block", csvHead + "1,a,b,1,1,3 -4\n", 2, "prefix block"},
		{"csv quote", csvHead + "1,\"a,b,1,1,\n", 2, "bad CSV"},
		{"mooncake json", `{"timestamp": 1, "input_length": 1` + "\n", 1, "bad JSON"},
		{"mooncake missing", `{"timestamp": 1, "input_length": 1}` + "\n", 1, "required"},
		{"mooncake negative hash", `{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [-1]}` + "\n", 1, "bad JSON"},
		{"mooncake second line", `{"timestamp": 1, "input_length": 1, "output_length": 1}` + "\n" + `{"timestamp": "x"}` + "\n", 2, "bad JSON"},
		{"azure time", azureHead + "yesterday,1,1\n", 2, "TIMESTAMP"},
		{"azure tokens", azureHead + "2023-11-16 18:15:46.68,1.5,1\n", 2, "integers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadTrace(strings.NewReader(tc.in), ReadOptions{})
			var le *LineError
			if !errors.As(err, &le) || le.Line != tc.line || !errors.Is(err, ErrBadTrace) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want line %d mentioning %q", err, tc.line, tc.msg)
			}
		})
	}
}

func TestSkipBad(t *testing.T) {
	in := "timestamp_ms,cluster,conversation_id,input_tokens,output_tokens,prefix_blocks\n" +
		"1,a,b,1,1,\n" + "oops\n" + "2,a,b,1,1,\n" + "3,a,b,-1,1,\n"
	tr, err := ReadTrace(strings.NewReader(in), ReadOptions{SkipBad: true})
	if err != nil {
		t.Fatal(err)
	}
	var le *LineError
	if len(tr.Requests) != 2 || tr.Skipped != 2 || !errors.As(tr.FirstError, &le) || le.Line != 3 {
		t.Fatalf("requests %d, skipped %d, first %v", len(tr.Requests), tr.Skipped, tr.FirstError)
	}
}

func TestReadTraceRejects(t *testing.T) {
	for _, tc := range []struct{ name, in, msg string }{
		{"empty", "", "empty"},
		{"blank", "\n \n", "empty"},
		{"unknown", "a,b,c\n1,2,3\n", "cannot tell"},
		{"header only", "TIMESTAMP,ContextTokens,GeneratedTokens\n", "no requests"},
		{"long line", `{"timestamp": 1, "hash_ids": [` + strings.Repeat("1,", MaxLineBytes/2) + "1]}\n", "longer than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ReadTrace(strings.NewReader(tc.in), ReadOptions{}); err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %q", err, tc.msg)
			}
		})
	}
	if _, err := ReadTrace(strings.NewReader("x"), ReadOptions{Format: "parquet"}); err == nil {
		t.Fatal("unknown format accepted")
	}
}

func TestWriteCSVRoundTrip(t *testing.T) {
	in := `{"timestamp": 0, "input_length": 1000, "output_length": 5, "hash_ids": [0, 1]}
{"timestamp": 0.000001, "input_length": 600, "output_length": 7, "hash_ids": [0, 2]}
{"timestamp": 2500.25, "input_length": 1500, "output_length": 3, "hash_ids": [0, 1, 3]}
`
	tr := readString(t, in, ReadOptions{})
	tr.Requests[1].Cluster, tr.Requests[1].Conversation = "fe-a", `quoted "id", too`
	var buf bytes.Buffer
	if err := WriteCSV(&buf, tr); err != nil {
		t.Fatal(err)
	}
	back := readString(t, buf.String(), ReadOptions{Format: FormatCSV})
	if !equalRequests(back.Requests, tr.Requests) {
		t.Fatalf("round trip:\n%s\ngot %+v\nwant %+v", buf.String(), back.Requests, tr.Requests)
	}
	if !strings.Contains(buf.String(), "\n2500.25,,,1500,3,0 1 3\n") {
		t.Fatalf("unexpected CSV:\n%s", buf.String())
	}
}

// fuzzTrace checks that a reader never panics and that what it accepts is
// valid and survives a CSV round trip.
func fuzzTrace(f *testing.F, format Format, seeds ...string) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		tr, err := ReadTrace(strings.NewReader(in), ReadOptions{Format: format, SkipBad: len(in)%2 == 0})
		if err != nil {
			return
		}
		for _, r := range tr.Requests {
			if r.ArrivalNs < 0 || r.InputTokens < 0 || r.OutputTokens < 1 || r.InputTokens > MaxTokens || r.OutputTokens > MaxTokens {
				t.Fatalf("accepted bad request %+v", r)
			}
		}
		var buf bytes.Buffer
		if err := WriteCSV(&buf, tr); err != nil {
			t.Fatal(err)
		}
		back, err := ReadTrace(&buf, ReadOptions{Format: FormatCSV})
		if err != nil || !equalRequests(back.Requests, tr.Requests) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func FuzzReadCSV(f *testing.F) {
	fuzzTrace(f, FormatCSV,
		"timestamp_ms,cluster,conversation_id,input_tokens,output_tokens,prefix_blocks\n1,a,b,2,3,4 5\n",
		"timestamp_ms,cluster,conversation_id,input_tokens,output_tokens,prefix_blocks\n1e3,\"a\",,0,1,\n")
}

func FuzzReadMooncake(f *testing.F) {
	fuzzTrace(f, FormatMooncake,
		`{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47]}`+"\n",
		`{"timestamp": 1.5, "input_length": 0, "output_length": 1, "hash_ids": []}`)
}

func FuzzReadAzure(f *testing.F) {
	fuzzTrace(f, FormatAzure,
		"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n",
		"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,0,1\n2023-11-16 18:15:45.1,3,2\n")
}

// A gzip-compressed trace reads as its content; a corrupt one is a bad
// trace, never a panic.
func TestReadGzip(t *testing.T) {
	const plain = `{"timestamp": 5, "input_length": 900, "output_length": 7, "hash_ids": [0, 1]}
{"timestamp": 1005, "input_length": 1500, "output_length": 9, "hash_ids": [0, 1, 2]}
`
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	if _, err := zw.Write([]byte(plain)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	want := readString(t, plain, ReadOptions{})
	got, err := ReadTrace(bytes.NewReader(zb.Bytes()), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Format != FormatMooncake || len(got.Requests) != 2 || !equalRequests(got.Requests, want.Requests) {
		t.Fatalf("gzip trace %+v, want %+v", got.Requests, want.Requests)
	}
	corrupt := slices.Clone(zb.Bytes())
	corrupt[len(corrupt)-6] ^= 0xff // the CRC
	for name, b := range map[string][]byte{"bad checksum": corrupt, "truncated": zb.Bytes()[:20], "header only": {0x1f, 0x8b}} {
		if _, err := ReadTrace(bytes.NewReader(b), ReadOptions{}); !errors.Is(err, ErrBadTrace) {
			t.Errorf("%s: %v, want ErrBadTrace", name, err)
		}
	}
	// The committed stretches are gzip files.
	tr, err := ReadTraceFile("testdata/mooncake_conversation_20-40m.jsonl.gz", ReadOptions{})
	if err != nil || len(tr.Requests) != 4193 {
		t.Fatalf("minutes 20-40: %v requests, err %v; want 4193", len(tr.Requests), err)
	}
}

package schemas

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func sampleSnapshot() *Snapshot {
	return &Snapshot{
		Version: 7, Cluster: "fe-east", CreatedAt: time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC),
		Weights:      map[string]float64{"east-h100-0": 0.5, "east-h100-1": 0.3, "west-a100-0": 0.15},
		ShedFraction: 0.05,
		Table: &SnapshotTable{Slots: 1024, Encoding: TableEncodingRLEUvarintV1,
			Engines: []string{"east-h100-0", "east-h100-1", "west-a100-0"},
			Data:    rle(0, 539, 1, 323, 2, 162)}, // slots in proportion to the weights
		InputsDigest: "sha256:0f3a",
	}
}

// rle encodes (engine index, run length) pairs as rle-uvarint-v1.
func rle(pairs ...uint64) []byte {
	var b []byte
	for _, v := range pairs {
		b = binary.AppendUvarint(b, v)
	}
	return b
}

func TestDecodeDesignSnapshot(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "snapshot_design.json"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := DecodeSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	want := &Snapshot{Version: 42, Cluster: "fe-a", CreatedAt: time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC),
		Weights: map[string]float64{"eng-a": 0.7, "eng-b": 0.3}}
	if !sameSnapshot(s, want) {
		t.Fatalf("got %+v, want %+v", s, want)
	}
}

func sameSnapshot(a, b *Snapshot) bool {
	ca, cb := *a, *b
	ca.CreatedAt, cb.CreatedAt = time.Time{}, time.Time{}
	return a.CreatedAt.Equal(b.CreatedAt) && reflect.DeepEqual(ca, cb)
}

func TestSnapshotGolden(t *testing.T) {
	got, err := EncodeSnapshot(sampleSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "snapshot_table.json")
	if *update {
		var pretty bytes.Buffer
		_ = json.Indent(&pretty, got, "", "  ")
		if err := os.WriteFile(path, append(pretty.Bytes(), '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, want); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, compact.Bytes()) {
		t.Errorf("encoding changed:\n got %s\nwant %s", got, compact.Bytes())
	}
	back, err := DecodeSnapshot(want)
	if err != nil || !sameSnapshot(back, sampleSnapshot()) {
		t.Errorf("golden decodes to %+v, %v", back, err)
	}
}

func TestSnapshotValidate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Snapshot)
		want   string
	}{
		{"ok", func(*Snapshot) {}, ""},
		{"no table ok", func(s *Snapshot) { s.Table = nil }, ""},
		{"all shed ok", func(s *Snapshot) { s.Weights, s.ShedFraction, s.Table = nil, 1, nil }, ""},
		{"all shed zero weights ok", func(s *Snapshot) {
			s.Weights, s.ShedFraction = map[string]float64{"a": 0, "b": 0}, 1
		}, ""},
		{"within tolerance", func(s *Snapshot) { s.Weights["west-a100-0"] += 5e-7 }, ""},
		{"version 0", func(s *Snapshot) { s.Version = 0 }, "version must be > 0"},
		{"no cluster", func(s *Snapshot) { s.Cluster = "" }, "cluster name is empty"},
		{"cluster with space", func(s *Snapshot) { s.Cluster = "fe east" }, "contains ' '"},
		{"cluster leading dot", func(s *Snapshot) { s.Cluster = ".fe" }, "starts or ends with '.'"},
		{"manifest cluster", func(s *Snapshot) { s.Cluster = "manifest" }, "reserved for the manifest"},
		{"sum low", func(s *Snapshot) { s.Weights["west-a100-0"] = 0.1 }, "weights sum to 0.9"},
		{"sum ignores shed", func(s *Snapshot) { s.ShedFraction = 0 }, "want 1 - shed_fraction = 1"},
		{"weight above 1", func(s *Snapshot) { s.Weights = map[string]float64{"a": 1.5, "b": -0.5} }, "weights[a] 1.5"},
		{"negative weight", func(s *Snapshot) { s.Weights = map[string]float64{"a": 0.9, "b": -0.1, "c": 0.25} }, "weights[b] -0.1"},
		{"NaN weight", func(s *Snapshot) { s.Weights["east-h100-0"] = math.NaN() }, "NaN must be in [0, 1]"},
		{"empty engine", func(s *Snapshot) { s.Weights[""] = 0 }, "empty engine name"},
		{"shed above 1", func(s *Snapshot) { s.ShedFraction = 1.2 }, "shed_fraction 1.2"},
		{"queue limits ok", func(s *Snapshot) { s.QueueLimits = map[string]float64{"east-h100-0": 12.5, "other": 0} }, ""},
		{"queue limit negative", func(s *Snapshot) { s.QueueLimits = map[string]float64{"a": -1} }, "queue_limits[a] -1"},
		{"queue limit NaN", func(s *Snapshot) { s.QueueLimits = map[string]float64{"a": math.NaN()} }, "queue_limits[a] NaN"},
		{"queue limit inf", func(s *Snapshot) { s.QueueLimits = map[string]float64{"a": math.Inf(1)} }, "queue_limits[a] +Inf"},
		{"queue limit no engine", func(s *Snapshot) { s.QueueLimits = map[string]float64{"": 3} }, "queue_limits: empty engine name"},
		{"prefill limits ok", func(s *Snapshot) { s.PrefillLimits = map[string]float64{"east-h100-0": 92820, "other": 0} }, ""},
		{"prefill limit negative", func(s *Snapshot) { s.PrefillLimits = map[string]float64{"a": -1} }, "prefill_limits[a] -1"},
		{"prefill limit NaN", func(s *Snapshot) { s.PrefillLimits = map[string]float64{"a": math.NaN()} }, "prefill_limits[a] NaN"},
		{"prefill limit no engine", func(s *Snapshot) { s.PrefillLimits = map[string]float64{"": 3} }, "prefill_limits: empty engine name"},
		{"shed inf", func(s *Snapshot) { s.ShedFraction = math.Inf(-1) }, "shed_fraction -Inf"},
		{"no shed, no weights", func(s *Snapshot) { s.Weights, s.ShedFraction = nil, 0 }, "weights sum to 0"},
		{"slots not power of two", func(s *Snapshot) { s.Table.Slots = 1000 }, "slots 1000 must be a power of two"},
		{"slots zero", func(s *Snapshot) { s.Table.Slots = 0 }, "slots 0"},
		{"slots huge", func(s *Snapshot) { s.Table.Slots = 1 << 30 }, "slots 1073741824"},
		{"no encoding", func(s *Snapshot) { s.Table.Encoding = " " }, "encoding is empty"},
		{"no table engines", func(s *Snapshot) { s.Table.Engines = nil }, "table: no engines"},
		{"empty table engine", func(s *Snapshot) { s.Table.Engines[1] = "" }, "engines[1] is empty"},
		{"duplicate table engine", func(s *Snapshot) { s.Table.Engines[2] = "east-h100-0" }, `engine "east-h100-0" listed twice`},
		{"no table data", func(s *Snapshot) { s.Table.Data = nil }, "data is empty"},
		{"rle short", func(s *Snapshot) { s.Table.Data = rle(0, 539, 1, 323) }, "runs cover 862 of 1024 slots"},
		{"rle long", func(s *Snapshot) { s.Table.Data = rle(0, 539, 1, 323, 2, 163) }, "run of 163 at slot 862 overflows 1024 slots"},
		{"rle zero run", func(s *Snapshot) { s.Table.Data = rle(0, 0, 0, 1024) }, "run of 0 at slot 0"},
		{"rle bad index", func(s *Snapshot) { s.Table.Data = rle(3, 1024) }, "engine index 3, only 3 engines"},
		{"rle missing run", func(s *Snapshot) { s.Table.Data = rle(0, 1024, 1) }, "missing run length after index 1"},
		{"rle bad varint", func(s *Snapshot) { s.Table.Data = []byte{0x80} }, "bad engine index varint"},
		{"rle same engine twice ok", func(s *Snapshot) { s.Table.Data = rle(0, 500, 0, 524) }, ""},
		{"unknown encoding framing only", func(s *Snapshot) { s.Table.Encoding, s.Table.Data = "future-v9", []byte{1} }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := sampleSnapshot()
			tc.mutate(s)
			checkErr(t, s.Validate(), tc.want, ErrInvalid)
			_, err := EncodeSnapshot(s)
			if (err == nil) != (tc.want == "") {
				t.Errorf("EncodeSnapshot error %v disagrees with Validate", err)
			}
		})
	}
}

func TestDecodeSnapshotErrors(t *testing.T) {
	good := `{"version":1,"cluster":"fe-a","weights":{"e":1},"shed_fraction":0}`
	cases := []struct {
		name, data, want string
		sentinel         error
	}{
		{"ok", good, "", nil},
		{"unknown fields welcome", `{"version":1,"cluster":"fe-a","weights":{"e":1},"future":{"x":[1,2]}}`, "", nil},
		{"surrounding space ok", "\n " + good + "\n", "", nil},
		{"trailing garbage", good + "x", "invalid character 'x' after top-level value", ErrMalformed},
		{"two objects", good + good, "after top-level value", ErrMalformed},
		{"null", "null", "want a JSON object", ErrMalformed},
		{"array", "[]", "want a JSON object", ErrMalformed},
		{"empty", "", "want a JSON object", ErrMalformed},
		{"truncated", good[:20], "unexpected end of JSON input", ErrMalformed},
		{"wrong type", `{"version":"1","cluster":"fe-a"}`, "cannot unmarshal string", ErrMalformed},
		{"negative version", `{"version":-1,"cluster":"fe-a"}`, "cannot unmarshal number -1", ErrMalformed},
		{"bad time", `{"version":1,"cluster":"fe-a","created_at":"yesterday"}`, "cannot parse", ErrMalformed},
		{"bad base64", `{"version":1,"cluster":"fe-a","weights":{"e":1},"table":{"slots":1,"encoding":"x","engines":["e"],"data":"!!"}}`, "illegal base64", ErrMalformed},
		{"invalid", `{"version":0,"cluster":"fe-a","weights":{"e":1}}`, "version must be > 0", ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := DecodeSnapshot([]byte(tc.data))
			checkErr(t, err, tc.want, tc.sentinel)
			if (s == nil) == (err == nil) {
				t.Fatalf("snapshot %v with error %v", s, err)
			}
		})
	}
}

func FuzzDecodeSnapshot(f *testing.F) {
	for _, name := range []string{"snapshot_design.json", "snapshot_table.json", "snapshot_classes.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"version":1,"cluster":"a","weights":{},"shed_fraction":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeSnapshot(data)
		if err != nil {
			if s != nil || !(strings.Contains(err.Error(), "malformed") || strings.Contains(err.Error(), "invalid")) {
				t.Fatalf("bad failure: %v, %v", s, err)
			}
			return
		}
		enc, err := EncodeSnapshot(s)
		if err != nil {
			t.Fatalf("decoded snapshot does not encode: %v", err)
		}
		back, err := DecodeSnapshot(enc)
		if err != nil || !sameSnapshot(back, s) {
			t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, back, s)
		}
	})
}

func TestManifest(t *testing.T) {
	good := &Manifest{Version: 9, CreatedAt: time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC),
		Clusters: map[string]uint64{"fe-east": 9, "fe-eu": 8}, Leader: "optimizer-0"}
	enc, err := EncodeManifest(good)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"version":9,"created_at":"2026-11-29T22:00:00Z","clusters":{"fe-east":9,"fe-eu":8},"leader":"optimizer-0"}`
	if string(enc) != want {
		t.Fatalf("encoded %s\nwant    %s", enc, want)
	}
	back, err := DecodeManifest(enc)
	if err != nil || !reflect.DeepEqual(back.Clusters, good.Clusters) || back.Version != 9 || !back.CreatedAt.Equal(good.CreatedAt) {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	bad := []struct{ data, want string }{
		{`{"version":0,"clusters":{"a":1}}`, "version must be > 0"},
		{`{"version":3}`, "no clusters"},
		{`{"version":3,"clusters":{"a":4}}`, `cluster "a" at version 4, want 1..3`},
		{`{"version":3,"clusters":{"a":0}}`, `cluster "a" at version 0`},
		{`{"version":3,"clusters":{"a b":1}}`, `contains ' '`},
		{`{"version":3,"clusters":{"a":1}} {}`, "after top-level value"},
	}
	for _, tc := range bad {
		if _, err := DecodeManifest([]byte(tc.data)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("DecodeManifest(%s) = %v, want error containing %q", tc.data, err, tc.want)
		}
	}
}

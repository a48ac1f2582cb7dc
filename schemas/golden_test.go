package schemas

import (
	"bytes"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenEvents are the events whose encodings are pinned in
// testdata/event_*.hex. A change to any of those files is a wire format
// change: it must be deliberate and keep old files decodable.
func goldenEvents() map[string]Event {
	failed := sampleCompletion()
	failed.Completion.Error = "upstream reset"
	failed.Completion.OutputTokens, failed.Completion.TBOTMs = 0, 0
	// A completion naming its model (field 11, added compatibly: the
	// other files did not change, and old readers skip it).
	model := sampleCompletion()
	model.Completion.Model = "llama-3-70b"
	return map[string]Event{"status": sampleStatus(), "completion": sampleCompletion(), "completion_failed": failed,
		"completion_model": model}
}

// futureStatus is a status as a later producer might send it: known fields
// plus fields this version does not know. It must decode to sampleStatus.
func futureStatus() []byte {
	ev := sampleStatus()
	inner := appendStatus(nil, &ev.Status)
	inner = wire(inner).varint(9, 3).bytes(10, []byte("gpu-7"))
	return wire(nil).varint(1, 1).bytes(2, inner).bytes(15, []byte("trace-context"))
}

func readGolden(t *testing.T, name string, got []byte) []byte {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(hex.EncodeToString(got)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run Golden -update to create it)", err)
	}
	want, err := hex.DecodeString(strings.TrimSpace(string(text)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return want
}

func TestGoldenEvents(t *testing.T) {
	for name, ev := range goldenEvents() {
		t.Run(name, func(t *testing.T) {
			got, err := AppendEvent(nil, &ev)
			if err != nil {
				t.Fatal(err)
			}
			want := readGolden(t, "event_"+name+".hex", got)
			if !bytes.Equal(got, want) {
				t.Errorf("encoding changed:\n got %x\nwant %x", got, want)
			}
			var dec Event
			if err := DecodeEvent(want, &dec); err != nil || !sameEvent(dec, ev) {
				t.Errorf("golden decodes to %+v, %v; want %+v", dec, err, ev)
			}
		})
	}
}

func TestGoldenFutureEvent(t *testing.T) {
	data := readGolden(t, "event_status_future.hex", futureStatus())
	var ev Event
	if err := DecodeEvent(data, &ev); err != nil {
		t.Fatal(err)
	}
	if want := sampleStatus(); !sameEvent(ev, want) {
		t.Fatalf("got %+v, want %+v", ev, want)
	}
}

// goldenSeeds returns every testdata/event_*.hex file, for fuzz seeds.
func goldenSeeds(f *testing.F) [][]byte {
	paths, err := filepath.Glob(filepath.Join("testdata", "event_*.hex"))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no golden events in testdata: %v", err)
	}
	var seeds [][]byte
	for _, p := range paths {
		text, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		b, err := hex.DecodeString(strings.TrimSpace(string(text)))
		if err != nil {
			f.Fatalf("%s: %v", p, err)
		}
		seeds = append(seeds, b)
	}
	return seeds
}

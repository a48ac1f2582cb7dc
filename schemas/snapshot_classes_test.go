package schemas

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// classSnapshot is fe-east of a two-model fleet: llama-3-70b in two bands
// and llama-3-8b, each with its own weights and table, and their
// demand-weighted mix at the top level.
func classSnapshot() *Snapshot {
	return &Snapshot{
		Version: 8, Cluster: "fe-east", CreatedAt: time.Date(2026, 11, 29, 22, 0, 10, 0, time.UTC),
		Weights: map[string]float64{"east-a": 0.5, "east-b": 0.5},
		Classes: []SnapshotClass{
			{Model: "llama-3-70b", MaxPromptTokens: 8192, Weights: map[string]float64{"east-a": 1},
				Table: &SnapshotTable{Slots: 64, Encoding: TableEncodingRLEUvarintV1, Engines: []string{"east-a"}, Data: rle(0, 64)}},
			{Model: "llama-3-70b", MinPromptTokens: 8192, MaxPromptTokens: 32768, Weights: map[string]float64{"east-b": 1}},
			{Model: "llama-3-8b", Weights: map[string]float64{"east-b": 0.9}, ShedFraction: 0.1},
		},
	}
}

func TestSnapshotClassesGolden(t *testing.T) {
	got, err := EncodeSnapshot(classSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "snapshot_classes.json")
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
	if err != nil || !sameSnapshot(back, classSnapshot()) {
		t.Fatalf("golden decodes to %+v, %v", back, err)
	}
	if k, ok := back.Class("llama-3-70b", 32768); !ok || k.Weights["east-b"] != 1 {
		t.Errorf("Class(llama-3-70b, 32768) = %+v, %v", k, ok)
	}
	if _, ok := back.Class("llama-3-70b", 0); ok {
		t.Error("found a class that is not there")
	}
}

func TestSnapshotClassesValidate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Snapshot)
		want   string
	}{
		{"ok", func(*Snapshot) {}, ""},
		{"duplicate", func(s *Snapshot) { s.Classes[1].MaxPromptTokens = 8192 },
			"classes[1] (llama-3-70b/8192-8192): min_prompt_tokens 8192 must be below max_prompt_tokens 8192"},
		{"twice", func(s *Snapshot) { s.Classes = append(s.Classes, s.Classes[2]) }, "classes[3] (llama-3-8b): listed twice"},
		{"weights sum", func(s *Snapshot) { s.Classes[2].ShedFraction = 0 }, "classes[2] (llama-3-8b): weights sum to 0.9"},
		{"negative band", func(s *Snapshot) { s.Classes[0].MaxPromptTokens = -1 }, "prompt token bounds must be >= 0"},
		{"bad table", func(s *Snapshot) { s.Classes[0].Table.Data = rle(0, 63) }, "classes[0] (llama-3-70b/0-8192): table: rle-uvarint-v1: runs cover 63 of 64 slots"},
		{"bad model", func(s *Snapshot) { s.Classes[0].Model = strings.Repeat("m", MaxNameLen+1) }, "model is 257 bytes"},
		{"too many", func(s *Snapshot) {
			s.Classes = make([]SnapshotClass, MaxSnapshotClasses+1)
		}, "classes: 4097, at most 4096"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := classSnapshot()
			tc.mutate(s)
			err := s.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

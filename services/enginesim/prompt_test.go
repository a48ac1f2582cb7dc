package enginesim

import (
	"slices"
	"strings"
	"testing"
)

func TestPromptTokens(t *testing.T) {
	for _, tc := range []struct{ bytes, want int }{
		{0, 1}, {1, 1}, {4, 1}, {5, 2}, {8, 2}, {2048, 512}, {2049, 513},
	} {
		if got := promptTokens(tc.bytes); got != tc.want {
			t.Errorf("promptTokens(%d) = %d, want %d", tc.bytes, got, tc.want)
		}
	}
	msgs := []message{{"system", "abc"}, {"user", "hello"}}
	// "system: abc\n" (12) + "user: hello\n" (12)
	if got := promptBytes(msgs); got != 24 {
		t.Errorf("promptBytes = %d, want 24", got)
	}
}

// Known answer: one block of 1 token (4 bytes) over "ab: c\n" is
// FNV-1a(LE64(0) || "ab: ") and the next would start at byte 4, but the
// last byte is never hashed, so "c\n" minus "\n" leaves a partial block.
func TestBlocksKnownAnswer(t *testing.T) {
	got := appendBlocks(nil, []message{{"ab", "c"}}, 1)
	h := uint64(fnvOffset)
	for _, c := range append(make([]byte, 8), "ab: "...) {
		h = (h ^ uint64(c)) * fnvPrime
	}
	if len(got) != 1 || got[0] != h {
		t.Fatalf("blocks = %x, want [%x]", got, h)
	}
}

func TestBlocksShareExactlyTheCommonPrefix(t *testing.T) {
	const bt = 4 // 16 bytes per block
	system := message{"system", strings.Repeat("You are helpful. ", 8)}
	turn1 := []message{system, {"user", "What is a KV cache?"}}
	turn2 := append(slices.Clone(turn1), message{"assistant", "the sim has one kv"}, message{"user", "And prefix caching?"})
	b1 := appendBlocks(nil, turn1, bt)
	b2 := appendBlocks(nil, turn2, bt)
	// Turn 1 has 145+26 = 171 bytes: 10 full blocks over its first 170.
	if n := promptBytes(turn1); n != 171 || len(b1) != 10 {
		t.Fatalf("turn 1: %d bytes, %d blocks; want 171 and 10", n, len(b1))
	}
	if !slices.Equal(b2[:len(b1)], b1) {
		t.Fatalf("turn 2 does not start with turn 1's blocks:\n%x\n%x", b1, b2)
	}
	if len(b2) != (promptBytes(turn2)-1)/16 {
		t.Fatalf("turn 2 has %d blocks for %d bytes", len(b2), promptBytes(turn2))
	}
	// A change in the first byte changes every block (chained hashes).
	other := []message{{"System", system.Content}, turn1[1]}
	for i, id := range appendBlocks(nil, other, bt) {
		if slices.Contains(b1, id) {
			t.Fatalf("block %d of a different prompt collides with turn 1", i)
		}
	}
	// Message boundaries do not matter, only the templated bytes.
	split := []message{{"system", system.Content[:50]}}
	joined := appendBlocks(nil, []message{{"system", system.Content[:50] + "x"}}, bt)
	if b := appendBlocks(nil, split, bt); !slices.Equal(b, joined[:len(b)]) {
		t.Fatal("the same leading bytes gave different blocks")
	}
}

// A prompt that is an exact number of blocks leaves its last block out,
// so it can never be fully cached.
func TestBlocksNeverCoverTheWholePrompt(t *testing.T) {
	msgs := []message{{"u", strings.Repeat("x", 16*3-4)}} // "u: " + 44 + "\n" = 48 bytes
	if n := promptBytes(msgs); n != 48 {
		t.Fatalf("setup: %d bytes", n)
	}
	if got := len(appendBlocks(nil, msgs, 4)); got != 2 {
		t.Fatalf("%d blocks for exactly 3 blocks of bytes, want 2", got)
	}
}

func TestFillerCountsAsItsTokens(t *testing.T) {
	f := filler(300)
	if len(f) != 300*BytesPerToken {
		t.Fatalf("filler is %d bytes", len(f))
	}
	for n := 1; n <= 300; n += 37 {
		if got := promptTokens(len(f[:n*BytesPerToken])); got != n {
			t.Errorf("%d tokens of filler count as %d", n, got)
		}
	}
	if strings.ContainsAny(f, "\"\\\n") {
		t.Fatal("filler needs JSON escaping")
	}
}

func BenchmarkBlocks(b *testing.B) {
	msgs := []message{{"system", strings.Repeat("You are a helpful assistant. ", 300)}, {"user", strings.Repeat("question ", 200)}}
	b.SetBytes(int64(promptBytes(msgs)))
	b.ReportAllocs()
	var dst []uint64
	for b.Loop() {
		dst = appendBlocks(dst[:0], msgs, 512)
	}
}

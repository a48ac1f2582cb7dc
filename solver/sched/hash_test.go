package sched

import (
	"fmt"
	"math"
	"testing"
)

// Reference vectors of wyhash final version 4 (wangyi-fudan/wyhash,
// test_vector.cpp: input i hashed with seed i), plus vectors with other
// lengths from an independent port, so every code path (0, 1-3, 4-16,
// 17-48, >48 bytes) is pinned.
func TestWyhashReferenceVectors(t *testing.T) {
	tests := []struct {
		in   string
		seed uint64
		want uint64
	}{
		{"", 0, 0x93228a4de0eec5a2},
		{"a", 1, 0xc5bac3db178713c4},
		{"abc", 2, 0xa97f2f7b1d9b3314},
		{"message digest", 3, 0x786d1f1df3801df4},
		{"abcdefghijklmnopqrstuvwxyz", 4, 0xdca5a8138ad37c87},
		{"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", 5, 0xb9e734f117cfaf70},
		{"12345678901234567890123456789012345678901234567890123456789012345678901234567890", 6, 0x6cc5eab49a92d617},
		{"1234", 3, 0xd3fa000fdb422cf},
		{"12345", 4, 0x160efc6277fcec80},
		{"123456", 5, 0xb2205dc629f3ef52},
		{"1234567", 6, 0xfcbd904b20d5022c},
		{"12345678", 7, 0xb4d64b1fc5efc3f8},
		{"123456789", 8, 0x84c12a0bfe6d670b},
		{"123456789A", 9, 0x63f35c1f12d4c922},
		{"123456789AB", 10, 0x4a7b5d200a5860b2},
		{"123456789ABC", 11, 0x313b0ac37c8cc1ce},
		{"123456789ABCD", 12, 0x73a21fc7838e0aec},
		{"123456789ABCDE", 13, 0x4fd0b1e18c59f85d},
		{"123456789ABCDEF", 14, 0xb3d88614f07f1708},
	}
	for _, tc := range tests {
		if got := wyhashSeed(tc.in, tc.seed); got != tc.want {
			t.Errorf("wyhash(%q, seed %d) = %#x, want %#x", tc.in, tc.seed, got, tc.want)
		}
	}
}

// HashKey folds the seed-0 mixing into a constant; it must equal the
// general path for every length class.
func TestHashKeyIsWyhashSeedZero(t *testing.T) {
	buf := make([]byte, 200)
	for i := range buf {
		buf[i] = byte(i*7 + 1)
	}
	for n := range len(buf) + 1 {
		s := string(buf[:n])
		if got, want := HashKey(s), wyhashSeed(s, 0); got != want {
			t.Fatalf("len %d: HashKey = %#x, wyhash seed 0 = %#x", n, got, want)
		}
	}
}

// The slot of a key is its hash's low bits, so those bits (and the
// shedding hash) must be uniform over realistic, very similar keys.
func TestHashKeyUniform(t *testing.T) {
	const n, buckets = 100_000, 256
	var low, high, shed [buckets]int
	for i := range n {
		h := HashKey(fmt.Sprintf("conv-%06d", i))
		low[h%buckets]++
		high[h>>56]++
		shed[mix64(h^shedSalt)>>56]++
	}
	// Chi-square with 255 degrees of freedom: mean 255, sd 22.6; 370 is
	// five standard deviations out.
	for name, counts := range map[string]*[buckets]int{"low": &low, "high": &high, "shed": &shed} {
		if chi := chiSquare(counts[:], n); chi > 370 {
			t.Errorf("%s byte of the hash: chi-square %.0f over 256 buckets, want < 370", name, chi)
		}
	}
}

func chiSquare(counts []int, n int) float64 {
	want := float64(n) / float64(len(counts))
	chi := 0.0
	for _, c := range counts {
		d := float64(c) - want
		chi += d * d / want
	}
	return chi
}

func TestShedKey(t *testing.T) {
	const n = 100_000
	hashes := make([]uint64, n)
	for i := range hashes {
		hashes[i] = HashKey(fmt.Sprintf("conv-%06d", i))
	}
	for _, f := range []float64{0, -1, math.NaN()} {
		for _, h := range hashes[:1000] {
			if ShedKey(h, f) {
				t.Fatalf("ShedKey(%#x, %v) = true, want false", h, f)
			}
		}
	}
	for _, h := range hashes[:1000] {
		if !ShedKey(h, 1) || !ShedKey(h, 2) {
			t.Fatalf("ShedKey(%#x, >=1) = false, want true", h)
		}
	}
	for _, f := range []float64{0.01, 0.1, 0.3, 0.5, 0.9} {
		shed := 0
		for _, h := range hashes {
			if ShedKey(h, f) {
				shed++
				if !ShedKey(h, math.Min(1, f+0.05)) {
					t.Fatalf("key %#x shed at %v but not at %v", h, f, f+0.05)
				}
			}
		}
		got, sd := float64(shed)/n, math.Sqrt(f*(1-f)/n)
		if math.Abs(got-f) > 5*sd {
			t.Errorf("fraction %v: shed %.4f of keys, want within %.4f", f, got, 5*sd)
		}
	}
}

// Shedding must not single out the keys of one engine: among the keys of
// each slot range, the shed share is the overall fraction.
func TestShedKeyIndependentOfSlot(t *testing.T) {
	const n, f = 100_000, 0.2
	var keys, shed [4]int
	for i := range n {
		h := HashKey(fmt.Sprintf("conv-%06d", i))
		q := (h & (DefaultSlots - 1)) >> 14 // quarter of the table
		keys[q]++
		if ShedKey(h, f) {
			shed[q]++
		}
	}
	for q := range keys {
		got, sd := float64(shed[q])/float64(keys[q]), math.Sqrt(f*(1-f)/float64(keys[q]))
		if math.Abs(got-f) > 5*sd {
			t.Errorf("slot quarter %d: shed %.4f of its keys, want %.2f ± %.4f", q, got, f, 5*sd)
		}
	}
}

func TestHotPathsDoNotAllocate(t *testing.T) {
	tab, err := Build(engineNames(100), randomWeights(newRand(1), 100), DefaultSlots)
	if err != nil {
		t.Fatal(err)
	}
	keys := convKeys(64)
	down := map[int]bool{tab.Pick(keys[0]): true}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		k := keys[i%len(keys)]
		h := HashKey(k)
		_ = tab.Pick(k)
		_ = ShedKey(h, 0.1)
		_, _ = tab.PickSkip(h, func(e int) bool { return down[e] })
		i++
	})
	if allocs != 0 {
		t.Errorf("HashKey, Pick, ShedKey, PickSkip: %.1f allocs per call, want 0", allocs)
	}
}

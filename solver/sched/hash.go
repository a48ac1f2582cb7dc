package sched

import "math/bits"

// The key hash is wyhash, final version 4 (github.com/wangyi-fudan/wyhash,
// public domain), re-implemented here: little-endian reads, the default
// secret, seed 0. It is fixed on purpose: every replica and every platform
// must map a key to the same slot, which rules out hash/maphash (seeded per
// process) and any hash whose output depends on the machine. Test vectors
// from the reference implementation pin it in hash_test.go.
const (
	wyp0 = 0x2d358dccaa6c78a5
	wyp1 = 0x8bb84b93962eacc9
	wyp2 = 0x4b33a62ed433d4a3
	wyp3 = 0x4d5a2da51de1aa47
)

// seedZero is wyhash's internal seed for seed 0, 0 ^ wymix(0^wyp0, wyp1),
// folded at compile time with exact untyped-constant arithmetic.
const seedZero = uint64((wyp0*wyp1)&(1<<64-1)) ^ uint64((wyp0*wyp1)>>64)

// Constants of the secondary mixes. splitGamma is the golden-ratio
// increment of splitmix64; shedSalt separates the shedding hash from the
// probe sequence.
const (
	splitGamma = 0x9e3779b97f4a7c15
	shedSalt   = 0xd6e8feb86659fd93
)

// HashKey returns the 64-bit hash of an affinity key (a conversation id).
// It is wyhash v4 with seed 0: fast (a few ns for short keys), well mixed,
// allocation-free, and the same on every platform and in every process.
func HashKey(key string) uint64 {
	return wyhash(key, seedZero)
}

// wyhashSeed is wyhash with an explicit seed, as in the reference; it exists
// so the reference test vectors (which vary the seed) can be checked.
func wyhashSeed(key string, seed uint64) uint64 {
	return wyhash(key, seed^wymix(seed^wyp0, wyp1))
}

// wyhash is the body of wyhash v4 after the seed has been mixed.
func wyhash(p string, seed uint64) uint64 {
	n := len(p)
	var a, b uint64
	switch {
	case n >= 4 && n <= 16:
		off := (n >> 3) << 2
		a = read4(p)<<32 | read4(p[off:])
		b = read4(p[n-4:])<<32 | read4(p[n-4-off:])
	case n > 0 && n < 4:
		a = uint64(p[0])<<16 | uint64(p[n>>1])<<8 | uint64(p[n-1])
	case n > 16:
		seed = wyhashLong(p, seed)
		a = read8(p[n-16:])
		b = read8(p[n-8:])
	}
	a ^= wyp1
	b ^= seed
	hi, lo := bits.Mul64(a, b)
	return wymix(lo^wyp0^uint64(n), hi^wyp1)
}

// wyhashLong absorbs all but the last 16 bytes of a key longer than 16.
func wyhashLong(p string, seed uint64) uint64 {
	i := len(p)
	if i > 48 {
		see1, see2 := seed, seed
		for ; i > 48; i -= 48 {
			seed = wymix(read8(p)^wyp1, read8(p[8:])^seed)
			see1 = wymix(read8(p[16:])^wyp2, read8(p[24:])^see1)
			see2 = wymix(read8(p[32:])^wyp3, read8(p[40:])^see2)
			p = p[48:]
		}
		seed ^= see1 ^ see2
	}
	for ; i > 16; i -= 16 {
		seed = wymix(read8(p)^wyp1, read8(p[8:])^seed)
		p = p[16:]
	}
	return seed
}

func wymix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

func read4(p string) uint64 {
	_ = p[3]
	return uint64(p[0]) | uint64(p[1])<<8 | uint64(p[2])<<16 | uint64(p[3])<<24
}

func read8(p string) uint64 {
	_ = p[7]
	return uint64(p[0]) | uint64(p[1])<<8 | uint64(p[2])<<16 | uint64(p[3])<<24 |
		uint64(p[4])<<32 | uint64(p[5])<<40 | uint64(p[6])<<48 | uint64(p[7])<<56
}

// mix64 is the splitmix64 finaliser: a bijection on uint64 with full
// avalanche. It derives further independent-looking hashes from a key hash
// (probe sequence, shedding, fallback ranking) without rehashing the key.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// ShedKey reports whether the key with hash h is shed when a fraction of
// the traffic must be shed. A key is shed when a second hash of it, derived
// from h and independent of its slot, falls in the lowest fraction of its
// range. Every replica sheds the same keys; raising the fraction only adds
// keys to the shed set, so a conversation shed at 10% is also shed at 20%.
// fraction <= 0 (or NaN) sheds nothing; fraction >= 1 sheds everything.
// The data plane decides whom to ask (new conversations before ongoing
// ones); this decides which keys, consistently.
func ShedKey(h uint64, fraction float64) bool {
	if !(fraction > 0) {
		return false
	}
	if fraction >= 1 {
		return true
	}
	// fraction*2^53 is exact (a power-of-two scale), so the threshold is
	// the same on every platform.
	threshold := uint64(fraction * (1 << 53))
	return mix64(h^shedSalt)>>11 < threshold
}

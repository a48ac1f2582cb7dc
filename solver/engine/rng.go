package engine

// splitmix is SplitMix64 (Steele, Lea and Flood 2014): a tiny deterministic
// generator for the injected errors, so that the same seed gives the same
// failures without an allocation or a shared source.
type splitmix struct{ state uint64 }

func (s *splitmix) next() uint64 {
	s.state += 0x9e3779b97f4a7c15
	z := s.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// float64 returns a uniform number in [0, 1).
func (s *splitmix) float64() float64 { return float64(s.next()>>11) / (1 << 53) }

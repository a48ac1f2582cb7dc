package peer

// pages is a growable array of T in fixed pages: appending never copies
// what is there (an index with tens of thousands of entries grew by
// doubling, and the copies were a third of a peer policy's cost), and a
// pointer to an element stays valid as the array grows.
type pages[T any] struct {
	p [][]T
	n int
}

const (
	pageBits = 10
	pageSize = 1 << pageBits
)

func (s *pages[T]) len() int { return s.n }

// at returns element i, which must be < len.
func (s *pages[T]) at(i int32) *T { return &s.p[i>>pageBits][i&(pageSize-1)] }

// push appends a zero element and returns its index.
func (s *pages[T]) push() int32 {
	if s.n == len(s.p)*pageSize {
		s.p = append(s.p, make([]T, pageSize))
	}
	s.n++
	return int32(s.n - 1)
}

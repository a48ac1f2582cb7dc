package peer

// smallList is a short list kept inline up to two items (most blocks of
// a prefix index are held by one or two engines), moved out of line when
// a third comes: an index entry then costs no allocation of its own.
type smallList[T any] struct {
	n      int32
	inline [2]T
	more   []T
}

// items returns the list; it aliases the list's storage, so it is valid
// until the list changes.
func (l *smallList[T]) items() []T {
	if int(l.n) <= len(l.inline) {
		return l.inline[:l.n]
	}
	return l.more
}

func (l *smallList[T]) len() int { return int(l.n) }

func (l *smallList[T]) add(x T) {
	switch {
	case int(l.n) < len(l.inline):
		l.inline[l.n] = x
	case int(l.n) == len(l.inline):
		l.more = append(append(l.more[:0], l.inline[:]...), x)
	default:
		l.more = append(l.more, x)
	}
	l.n++
}

// del removes item k, moving the last item into its place.
func (l *smallList[T]) del(k int) {
	s := l.items()
	s[k] = s[len(s)-1]
	l.n--
	switch {
	case int(l.n) == len(l.inline):
		copy(l.inline[:], l.more)
	case int(l.n) > len(l.inline):
		l.more = l.more[:l.n]
	}
}

// reset empties the list, keeping the out-of-line storage for reuse.
func (l *smallList[T]) reset() {
	l.n = 0
	l.more = l.more[:0]
}

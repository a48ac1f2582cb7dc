package engine

// fifo is the waiting queue: a growable ring of record indexes.
type fifo struct {
	buf  []int32
	head int
	n    int
}

func (q *fifo) len() int { return q.n }

func (q *fifo) reset() { q.head, q.n = 0, 0 }

func (q *fifo) peek() int32 { return q.buf[q.head] }

func (q *fifo) push(x int32) {
	if q.n == len(q.buf) {
		q.grow()
	}
	q.buf[(q.head+q.n)%len(q.buf)] = x
	q.n++
}

func (q *fifo) pop() int32 {
	x := q.buf[q.head]
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	return x
}

func (q *fifo) grow() {
	buf := make([]int32, max(16, 2*len(q.buf)))
	for i := range q.n {
		buf[i] = q.buf[(q.head+i)%len(q.buf)]
	}
	q.buf, q.head = buf, 0
}

// runItem is a decoding request keyed by the decode step at which it
// produces its last token; seq (admission order) breaks ties so that
// requests finishing together come out in a fixed order.
type runItem struct {
	finish int64
	seq    uint64
	rec    int32
}

func (a runItem) less(b runItem) bool {
	return a.finish < b.finish || (a.finish == b.finish && a.seq < b.seq)
}

// runHeap is a binary min-heap of runItems, written out rather than through
// container/heap to keep interface calls off the hot path.
type runHeap []runItem

func (h *runHeap) push(x runItem) {
	*h = append(*h, x)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !s[i].less(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *runHeap) pop() runItem {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	*h = s
	i := 0
	for {
		l := 2*i + 1
		if l >= len(s) {
			break
		}
		m := l
		if r := l + 1; r < len(s) && s[r].less(s[l]) {
			m = r
		}
		if !s[m].less(s[i]) {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	return top
}

package peer

// queue is a first-in first-out list in a ring that doubles when full:
// the indexes' use logs append at the back and consume from the front,
// and a ring reuses the consumed room where a slice grown by append kept
// it until the next shift, doubled past it and copied everything on the
// way (a tenth of aibrix's run).
type queue[T any] struct {
	buf  []T // len 0 or a power of two
	head int // buf index of the front
	n    int
}

func (q *queue[T]) len() int { return q.n }

// at returns the i-th element from the front (i < len).
func (q *queue[T]) at(i int) T { return q.buf[(q.head+i)&(len(q.buf)-1)] }

// push appends x at the back.
func (q *queue[T]) push(x T) {
	if q.n == len(q.buf) {
		q.grow()
	}
	q.buf[(q.head+q.n)&(len(q.buf)-1)] = x
	q.n++
}

// pop drops the front element (len > 0).
func (q *queue[T]) pop() {
	q.head = (q.head + 1) & (len(q.buf) - 1)
	q.n--
}

// filter keeps the elements for which keep is true, in order.
func (q *queue[T]) filter(keep func(T) bool) {
	w := 0
	for i := range q.n {
		if x := q.at(i); keep(x) {
			q.buf[(q.head+w)&(len(q.buf)-1)] = x
			w++
		}
	}
	q.n = w
}

// grow doubles the ring, which is full: its elements run from head to
// the end of buf, then from its start.
func (q *queue[T]) grow() {
	buf := make([]T, max(1024, 2*len(q.buf)))
	k := copy(buf, q.buf[q.head:])
	copy(buf[k:], q.buf[:q.head])
	q.buf, q.head = buf, 0
}

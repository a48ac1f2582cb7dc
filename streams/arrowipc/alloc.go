package arrowipc

import (
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// tracker is an allocator that remembers what one decode allocated. When
// arrow-go's decoder gives up on a malformed message it can leave buffers
// with references that nobody will release; after a failed decode, reclaim
// returns them to the real allocator so its accounting balances. After a
// successful decode, keep stops tracking: the buffers belong to the
// returned batches.
type tracker struct {
	mem memory.Allocator

	mu        sync.Mutex
	live      map[uintptr][]byte // while tracking
	tracking  bool
	reclaimed map[uintptr]struct{} // after reclaim: frees to ignore
}

var _ memory.Allocator = (*tracker)(nil)

func newTracker(mem memory.Allocator) *tracker {
	return &tracker{mem: mem, live: make(map[uintptr][]byte), tracking: true}
}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func (t *tracker) Allocate(size int) []byte {
	b := t.mem.Allocate(size)
	t.mu.Lock()
	if t.tracking && len(b) > 0 {
		t.live[addr(b)] = b
	}
	t.mu.Unlock()
	return b
}

func (t *tracker) Reallocate(size int, b []byte) []byte {
	out := t.mem.Reallocate(size, b)
	t.mu.Lock()
	if t.tracking {
		if len(b) > 0 {
			delete(t.live, addr(b))
		}
		if len(out) > 0 {
			t.live[addr(out)] = out
		}
	}
	t.mu.Unlock()
	return out
}

func (t *tracker) Free(b []byte) {
	t.mu.Lock()
	if len(b) > 0 {
		if _, done := t.reclaimed[addr(b)]; done {
			t.mu.Unlock()
			return // already returned by reclaim
		}
		if t.tracking {
			delete(t.live, addr(b))
		}
	}
	t.mu.Unlock()
	t.mem.Free(b)
}

// keep stops tracking; later frees go straight to the real allocator.
func (t *tracker) keep() {
	t.mu.Lock()
	t.tracking, t.live = false, nil
	t.mu.Unlock()
}

// reclaim frees everything still allocated. Call it only when nothing
// decoded is in use any more.
func (t *tracker) reclaim() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reclaimed = make(map[uintptr]struct{}, len(t.live))
	for p, b := range t.live {
		t.reclaimed[p] = struct{}{}
		t.mem.Free(b)
	}
	t.tracking, t.live = false, nil
}

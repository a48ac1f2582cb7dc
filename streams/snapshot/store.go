// Package snapshot holds one versioned value that is replaced atomically:
// the data plane's current weight snapshot, or any other state that one
// writer publishes and many readers use on a hot path.
//
// Load is one atomic pointer read with no lock and no allocation. Swap
// applies a value only if its version is newer than the current one, so a
// late or replayed update never rolls the value back. Wait blocks until a
// given version (or newer) is present, woken by a channel closed on every
// replacement, never by polling.
//
// # Concurrency
//
// All methods are safe for concurrent use. Load never blocks. Swaps are
// serialised by a mutex that readers never take. Values handed to Swap
// must not be mutated afterwards: readers share them.
package snapshot

import (
	"context"
	"sync"
	"sync/atomic"
)

// Store holds the current value and its version. The zero value is ready
// to use and holds nothing at version 0.
type Store[T any] struct {
	cur atomic.Pointer[entry[T]] // never nil once init has run
	mu  sync.Mutex               // serialises Swap and init
}

// entry is one published value. changed is closed when a newer entry
// replaces it.
type entry[T any] struct {
	v       *T
	version uint64
	changed chan struct{}
}

// New returns a Store holding v at version (nothing at version 0 when v is
// nil).
func New[T any](v *T, version uint64) *Store[T] {
	s := &Store[T]{}
	if v != nil {
		s.cur.Store(&entry[T]{v: v, version: version, changed: make(chan struct{})})
	}
	return s
}

// Load returns the current value and its version; nil and 0 before the
// first Swap.
func (s *Store[T]) Load() (*T, uint64) {
	e := s.cur.Load()
	if e == nil {
		return nil, 0
	}
	return e.v, e.version
}

// Version returns the current version; 0 before the first Swap.
func (s *Store[T]) Version() uint64 {
	_, v := s.Load()
	return v
}

// Swap makes v current at version if version is greater than the current
// version, wakes every waiter and returns true. Otherwise (an old or equal
// version, or a nil v) it changes nothing and returns false.
func (s *Store[T]) Swap(v *T, version uint64) bool {
	if v == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.initLocked()
	if version <= old.version {
		return false
	}
	s.cur.Store(&entry[T]{v: v, version: version, changed: make(chan struct{})})
	close(old.changed)
	return true
}

// Wait returns the current value once there is one and its version is at
// least minVersion (Wait(ctx, 0) waits for the first value), or ctx's
// error if ctx ends first.
func (s *Store[T]) Wait(ctx context.Context, minVersion uint64) (*T, uint64, error) {
	e := s.cur.Load()
	if e == nil {
		s.mu.Lock()
		e = s.initLocked()
		s.mu.Unlock()
	}
	for e.version < minVersion || e.v == nil {
		select {
		case <-e.changed:
			e = s.cur.Load()
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
	return e.v, e.version, nil
}

// initLocked returns the current entry, installing an empty one (so that
// waiters have a channel) if there is none. s.mu must be held.
func (s *Store[T]) initLocked() *entry[T] {
	e := s.cur.Load()
	if e == nil {
		e = &entry[T]{changed: make(chan struct{})}
		s.cur.Store(e)
	}
	return e
}

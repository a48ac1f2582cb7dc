package window

import (
	"errors"
	"fmt"
	"time"
)

// Config sets the windows and how long they wait for stragglers.
type Config struct {
	// Size is the length of a window. Windows are aligned to the Unix
	// epoch: window k covers event times [k*Hop, k*Hop+Size).
	Size time.Duration
	// Hop is the distance between window starts: Hop == Size gives
	// tumbling windows, a smaller Hop gives hopping (overlapping) windows,
	// so each event belongs to Size/Hop windows. Size must be a multiple of
	// Hop, and Size/Hop at most MaxWindowsPerEvent.
	Hop time.Duration
	// OutOfOrder is how far behind the newest event time the watermark
	// trails: watermark = max event time seen - OutOfOrder.
	OutOfOrder time.Duration
	// AllowedLateness keeps a window open after the watermark passes its
	// end: it closes (and is emitted) once watermark >= end +
	// AllowedLateness. Events for closed windows are counted as late.
	AllowedLateness time.Duration
	// MaxKeysPerWindow bounds the keys one window holds; an event for a
	// new key beyond it is not applied and is counted in Stats.Overflow.
	MaxKeysPerWindow int
	// MaxPartitions bounds the partition numbers Add accepts for tracked
	// offsets: partitions are 0..MaxPartitions-1.
	MaxPartitions int32
}

// maxDuration bounds each duration so that window arithmetic on event
// times up to MaxEventTimeNs cannot overflow.
const maxDuration = time.Duration(MaxEventTimeNs / 8)

// MaxWindowsPerEvent bounds Size/Hop, the windows one event updates.
const MaxWindowsPerEvent = 64

// DefaultConfig returns 10-second tumbling windows that accept events up
// to 1 s out of order plus 2 s late: each window is emitted 3 s (of event
// time) after it ends.
func DefaultConfig() Config {
	return Config{
		Size:             10 * time.Second,
		Hop:              10 * time.Second,
		OutOfOrder:       time.Second,
		AllowedLateness:  2 * time.Second,
		MaxKeysPerWindow: 1 << 16,
		MaxPartitions:    1 << 12,
	}
}

// ErrConfig is wrapped by every error Validate returns.
var ErrConfig = errors.New("window: invalid config")

// Validate reports the first problem with c.
func (c Config) Validate() error {
	switch {
	case c.Size <= 0:
		return fmt.Errorf("%w: size %v must be positive", ErrConfig, c.Size)
	case c.Hop <= 0:
		return fmt.Errorf("%w: hop %v must be positive", ErrConfig, c.Hop)
	case c.Size%c.Hop != 0:
		return fmt.Errorf("%w: size %v is not a multiple of hop %v", ErrConfig, c.Size, c.Hop)
	case c.Size/c.Hop > MaxWindowsPerEvent:
		return fmt.Errorf("%w: size/hop = %d exceeds %d", ErrConfig, c.Size/c.Hop, MaxWindowsPerEvent)
	case c.OutOfOrder < 0:
		return fmt.Errorf("%w: out-of-order %v is negative", ErrConfig, c.OutOfOrder)
	case c.AllowedLateness < 0:
		return fmt.Errorf("%w: allowed lateness %v is negative", ErrConfig, c.AllowedLateness)
	case c.Size > maxDuration || c.OutOfOrder > maxDuration || c.AllowedLateness > maxDuration:
		return fmt.Errorf("%w: size, out-of-order and lateness must each be at most %v", ErrConfig, maxDuration)
	case c.MaxKeysPerWindow <= 0:
		return fmt.Errorf("%w: max keys per window %d must be positive", ErrConfig, c.MaxKeysPerWindow)
	case c.MaxPartitions <= 0 || c.MaxPartitions > 1<<16:
		return fmt.Errorf("%w: max partitions %d outside 1..65536", ErrConfig, c.MaxPartitions)
	}
	return nil
}

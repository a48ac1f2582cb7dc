//go:build unix

package aggregator

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time this process has used: on a shared machine the
// wall clock also counts time spent waiting for a core.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

package optimize

import "syscall"

// threadCPUNs is the CPU time used by the calling OS thread, so that a
// benchmark on a shared machine can report its speed per CPU second as
// well as per wall second. The caller locks its goroutine to the thread.
// Work done on other threads (the garbage collector's) is not counted.
func threadCPUNs() (int64, bool) {
	const rusageThread = 1 // RUSAGE_THREAD, Linux only
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return ru.Utime.Nano() + ru.Stime.Nano(), true
}

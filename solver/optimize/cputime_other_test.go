//go:build !linux

package optimize

// threadCPUNs is not available off Linux; benchmarks report wall time only.
func threadCPUNs() (int64, bool) { return 0, false }

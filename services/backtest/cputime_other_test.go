//go:build !linux

package backtest

// threadCPUNs is not available off Linux; benchmarks report wall time only.
func threadCPUNs() (int64, bool) { return 0, false }

package streamstest

import "testing"

// SetPickPorts replaces how NewNATSCluster picks its route ports until
// the test ends.
func SetPickPorts(t testing.TB, f func(t testing.TB, n int) []int) {
	old := pickPorts
	pickPorts = f
	t.Cleanup(func() { pickPorts = old })
}

// FreePorts is freePorts.
func FreePorts(t testing.TB, n int) []int { return freePorts(t, n) }

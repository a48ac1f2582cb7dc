package peer

import (
	"slices"
	"strings"
)

// LocalSuffix restricts a policy's routers to their cluster's region
// ("llm-d:local"), spilling to the other eligible engines only while no
// local one is healthy.
const LocalSuffix = ":local"

// Policies lists every policy of the package, in the order `ilb backtest`
// lists them.
func Policies() []Policy {
	return []Policy{
		powerOfTwoPolicy(),
	}
}

// Names lists the policies' names (without the :local variants).
func Names() []string {
	var out []string
	for _, p := range Policies() {
		out = append(out, p.Name)
	}
	return out
}

// Lookup finds the policy named name, which may carry LocalSuffix.
func Lookup(name string) (p Policy, local, ok bool) {
	base, local := strings.CutSuffix(name, LocalSuffix)
	i := slices.IndexFunc(Policies(), func(p Policy) bool { return p.Name == base })
	if i < 0 {
		return Policy{}, false, false
	}
	return Policies()[i], local, true
}

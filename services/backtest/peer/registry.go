package peer

import (
	"slices"
	"strings"
)

// LocalSuffix restricts a policy's routers to their cluster's region
// ("llm-d:local"), spilling to the other eligible engines only while no
// local one is healthy.
const LocalSuffix = ":local"

// Policies lists every policy of the package with its shipped defaults,
// in the order `ilb backtest` lists them.
func Policies() []Policy {
	return []Policy{
		LLMD(DefaultLLMDConfig()),
		Dynamo(DefaultDynamoConfig()),
		SGLang(DefaultSGLangConfig()),
		AIBrix(DefaultAIBrixConfig()),
		boundedHashPolicy(),
		powerOfTwoPolicy(),
		jsqAdmissionPolicy(),
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
func Lookup(name string) (p Policy, local, ok bool) { return LookupIn(nil, name) }

// LookupIn finds the policy named name (which may carry LocalSuffix) in
// extra first, then among Policies: extra adds configured variants and
// overrides shipped policies of the same name.
func LookupIn(extra []Policy, name string) (p Policy, local, ok bool) {
	base, local := strings.CutSuffix(name, LocalSuffix)
	for _, list := range [][]Policy{extra, Policies()} {
		if i := slices.IndexFunc(list, func(p Policy) bool { return p.Name == base }); i >= 0 {
			return list[i], local, true
		}
	}
	return Policy{}, false, false
}

package backtest

import (
	"time"

	"github.com/ilb-router/ilb/solver/engine"
)

// routerHooks are the events a policy of routers with their own signals
// gets beyond pick and control (peerPolicy): the first tokens and
// completions of the requests it routed, periodic polls of engine
// metrics, and the end of the arrivals while it still holds requests.
type routerHooks interface {
	firstToken(s *sim, i, e int)
	completed(s *sim, i, e int, failed bool)
	pollInterval() time.Duration
	poll(s *sim)
	drain(s *sim)
	err() error
}

// enableFirstTokens makes every engine record first tokens, delivered to
// the policy's hooks as engines advance.
func (s *sim) enableFirstTokens(on func(s *sim, i, e int)) {
	s.onFirst = on
	s.firsts = make([]engine.FirstToken, 0, 64)
	for _, eng := range s.engines {
		eng.EnableFirstTokens(true)
	}
}

// firstTokens delivers engine e's first-token records. They are taken
// after each Advance; a request whose first token and completion come in
// the same Advance sees its first token first.
func (s *sim) firstTokens(e int) {
	s.firsts = s.engines[e].TakeFirstTokens(s.firsts[:0])
	for _, f := range s.firsts {
		if i := int(f.Tag); s.state[i] == stInFlight {
			s.onFirst(s, i, e)
		}
	}
}

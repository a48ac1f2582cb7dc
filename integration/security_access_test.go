package integration

import (
	"sync"
	"testing"
)

// accessCase is one client configuration an access test tries: edit turns
// the configuration that must be accepted into this one, and accept says
// whether the server must let it in.
type accessCase[C any] struct {
	name   string
	edit   func(c *C)
	accept bool
}

// checkAccess connects with every case's configuration at once (connect
// returns nil when the server let the client in) and fails t for each
// case refused that must be accepted or accepted that must be refused.
func checkAccess[C any](t *testing.T, ok C, cases []accessCase[C], connect func(C) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(cases))
	for i, tc := range cases {
		cfg := ok
		tc.edit(&cfg)
		wg.Go(func() { errs[i] = connect(cfg) })
	}
	wg.Wait()
	for i, tc := range cases {
		switch {
		case tc.accept && errs[i] != nil:
			t.Errorf("%s: refused: %v", tc.name, errs[i])
		case !tc.accept && errs[i] == nil:
			t.Errorf("%s: accepted; it must be refused", tc.name)
		default:
			t.Logf("%s: accepted=%v (%v)", tc.name, tc.accept, errs[i])
		}
	}
}

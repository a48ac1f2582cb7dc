package peer

// inflight is a router's own count of the requests it has dispatched to
// each engine and not yet seen complete: the load signal of routers that
// track their own traffic (SGLang, power-of-two, bounded-hash).
type inflight []int

func newInflight(f *Fleet) inflight { return make(inflight, len(f.Engines)) }

// Completed is the CompletionObserver hook of routers embedding inflight.
func (n inflight) Completed(_ View, _ *Request, e int, _ bool) {
	if n[e] > 0 {
		n[e]--
	}
}

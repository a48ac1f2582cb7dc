package backtest

// peerView is a peer router's peer.View: its cluster's engines, under the
// :local rule when set, with the health routers know.
type peerView struct {
	s       *sim
	c       int
	local   []int32         // the eligible engines of the cluster's region (:local), nil otherwise
	members []int32         // scratch for Members
	backlog *prefillBacklog // nil unless the router reads it
}

func newPeerView(s *sim, c int, local bool) peerView {
	v := peerView{s: s, c: c}
	if local {
		v.local = []int32{}
		for _, e := range s.fi.elig[c] {
			if !s.fi.remote[c][e] {
				v.local = append(v.local, e)
			}
		}
	}
	return v
}

func (v *peerView) Now() int64 { return v.s.now }

// set is the engines the router may use now: the local ones while any is
// healthy (with :local), else every eligible one.
func (v *peerView) set() []int32 {
	if v.local != nil {
		for _, e := range v.local {
			if v.s.healthy[e] {
				return v.local
			}
		}
	}
	return v.s.fi.elig[v.c]
}

func (v *peerView) Candidates(dst []int32) []int32 {
	for _, e := range v.set() {
		if v.s.healthy[e] {
			dst = append(dst, e)
		}
	}
	return dst
}

func (v *peerView) Members() []int32 { return v.set() }

func (v *peerView) CachedBlocks(e int, blocks []uint64) int {
	return v.s.engines[e].CachedPrefix(blocks)
}

func (v *peerView) PrefillBacklog(e int) int64 {
	if b := v.backlog; b != nil {
		return b.tokens[e]
	}
	return 0
}

func (v *peerView) InFlight(e int) int { return int(v.s.inflight[e]) }

package engine

// FirstToken says that a request produced its first token: at the end of
// its prefill (in chunked mode, of its last prompt chunk). A router model
// uses it to stop counting the request's prompt as prefill load, as
// Dynamo's KV router does at a request's first token.
type FirstToken struct {
	ID   uint64
	Tag  uint64 // the Request's Tag
	AtNs int64
}

// EnableFirstTokens turns first-token recording on or off (off after New).
// While on, the engine records a FirstToken for every served request when
// its first token comes out (requests that fail get none), in order of
// time, and TakeFirstTokens hands them over. Off, it costs nothing.
// Reset keeps the setting.
func (e *Engine) EnableFirstTokens(on bool) {
	e.firstOn = on
	if !on {
		e.firsts = e.firsts[:0]
	}
}

// TakeFirstTokens appends the first tokens recorded since the last call,
// in order of time, to dst and forgets them. They include those of
// iterations that Submit or a setter processed on its way to its time, so
// call it after Advance (or after any call) to see them all; a first token
// is recorded no later than the request's completion comes out of
// Advance. It allocates nothing once dst and the engine's buffer have
// grown.
func (e *Engine) TakeFirstTokens(dst []FirstToken) []FirstToken {
	dst = append(dst, e.firsts...)
	e.firsts = e.firsts[:0]
	return dst
}

// recordFirst notes record i's first token at t when recording is on.
func (e *Engine) recordFirst(i int32, t int64) {
	if e.firstOn {
		r := &e.recs[i]
		e.firsts = append(e.firsts, FirstToken{ID: r.id, Tag: r.tag, AtNs: t})
	}
}

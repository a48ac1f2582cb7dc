package engine

// CachedPrefix returns how many leading blocks of blocks the prefix cache
// holds now, without touching them (their recency is unchanged): what an
// engine's KV events (blocks stored, blocks removed) tell a router that
// follows them, such as Dynamo's KV router.
func (e *Engine) CachedPrefix(blocks []uint64) int { return e.cache.prefixHits(blocks) }

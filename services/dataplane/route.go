package dataplane

// decide runs the guardrails for one request of cluster c whose key hashes
// to h, with p the picker loaded for it: shedding (new conversations
// first), then the pick (availability, latency penalty and bounded-load
// spill for new conversations). It remembers the conversation and counts
// the pick, and reports whether the conversation was ongoing (retries
// pick again with the same view). It takes no lock and does not allocate.
func (d *DataPlane) decide(c *cluster, p *picker, h uint64) (choice, bool, error) {
	return d.decideKey(c, p, h, false, 0)
}

// decideKey is decide for a key that may open its conversation (first):
// such a request counts as new however recently its key was seen, since
// a prompt-derived key is shared by every conversation that starts with
// the same words (affinity.Key.First). tokens is the prompt's estimated
// length (0: unknown), by which new conversations are shed, the largest
// first.
func (d *DataPlane) decideKey(c *cluster, p *picker, h uint64, first bool, tokens int) (choice, bool, error) {
	var tr tried
	return d.decideIn(c, p, h, first, tokens, &tr)
}

// decideIn is decideKey for a request that may use only the engines tr
// does not deny.
func (d *DataPlane) decideIn(c *cluster, p *picker, h uint64, first bool, tokens int, tr *tried) (choice, bool, error) {
	if p.err != nil {
		return choice{}, false, p.err
	}
	epoch := uint8(d.epoch.Load())
	m, ongoing := c.convos.lookup(h, epoch)
	ongoing = ongoing && !first
	c.mix.a.Add(1)
	if !ongoing {
		c.mix.b.Add(1)
	}
	if p.shedKey(h, ongoing, c.newConversationShare(), c.sizes, tokens) {
		c.shed.Add(1)
		return choice{}, ongoing, ErrShed
	}
	ch, err := p.pick(h, ongoing, m, tr)
	if err != nil {
		if err == ErrAdmission {
			c.refused.Add(1)
		}
		return choice{}, ongoing, err
	}
	c.convos.record(h, epoch, ch.memo)
	d.countPick(c, p, ch)
	return ch, ongoing, nil
}

// countPick counts a pick and its fallback reason; picks made under the
// stale policy also count as reason "stale".
func (d *DataPlane) countPick(c *cluster, p *picker, ch choice) {
	p.slots[ch.idx].cell.picks.Add(1)
	if ch.reason != noFallback {
		c.fallbacks[ch.reason].Add(1)
	}
	if p.stale {
		c.fallbacks[reasonStale].Add(1)
	}
}

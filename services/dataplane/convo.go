package dataplane

import "sync/atomic"

// convoEpochs is how many epochs a conversation stays ongoing after its
// last request: an epoch lasts ConversationIdle / convoEpochs.
const convoEpochs = 16

// convoWays is the associativity of the conversation memory.
const convoWays = 4

// convos is a cluster's lossy memory of recent conversations: a 4-way
// set-associative array of key-hash entries, fixed in size, lock-free and
// allocation-free. An entry packs, from the top bit down:
//
//	tag     24 bits  bits 40..63 of the key hash (the set uses the low bits)
//	epoch    8 bits  the epoch of the last request
//	primary 16 bits  engine id the table gave the key at that request
//	served  16 bits  engine id that served it (differs after a spill)
//
// A key goes into its set's entry with the same tag, else an empty or idle
// one, else the least recently used. Memory is lossy by design: a fifth
// busy key in a set evicts one (that conversation then looks new), a tag
// collision (1 in 2^24 per set entry) makes a new key look ongoing, and
// two concurrent writers to one set may lose an update. Each only changes
// which guardrail treats a key first, never where a healthy table sends it.
type convos struct {
	entries []atomic.Uint64
	sets    uint64 // number of sets, a power of two
}

func newConvos(slots int) *convos {
	return &convos{entries: make([]atomic.Uint64, slots), sets: uint64(slots / convoWays)}
}

// memo is what the memory holds about an ongoing conversation.
type memo struct {
	primary, served uint16
}

func convoTag(h uint64) uint64 { return h >> 40 }

func (c *convos) set(h uint64) []atomic.Uint64 {
	i := (h & (c.sets - 1)) * convoWays
	return c.entries[i : i+convoWays : i+convoWays]
}

// entryAge is how many epochs ago the entry was written.
func entryAge(v uint64, epoch uint8) uint8 { return epoch - uint8(v>>32) }

// lookup returns the memo of the key with hash h if it is ongoing at epoch.
func (c *convos) lookup(h uint64, epoch uint8) (memo, bool) {
	tag := convoTag(h)
	set := c.set(h)
	for i := range set {
		v := set[i].Load()
		if v == 0 || v>>40 != tag {
			continue
		}
		if entryAge(v, epoch) > convoEpochs {
			return memo{}, false
		}
		return memo{primary: uint16(v >> 16), served: uint16(v)}, true
	}
	return memo{}, false
}

// record marks the key with hash h as ongoing at epoch. An all-zero entry
// means empty, so the rare key whose entry would be all zeros (zero tag,
// epoch and engine ids) is simply not remembered.
func (c *convos) record(h uint64, epoch uint8, m memo) {
	tag := convoTag(h)
	set := c.set(h)
	victim, oldest := 0, -1
	for i := range set {
		v := set[i].Load()
		if v != 0 && v>>40 == tag {
			victim = i
			break
		}
		age := 256 // empty entries go first
		if v != 0 {
			age = int(entryAge(v, epoch))
		}
		if age > oldest {
			victim, oldest = i, age
		}
	}
	set[victim].Store(tag<<40 | uint64(epoch)<<32 | uint64(m.primary)<<16 | uint64(m.served))
}

package affinity

import "github.com/ilb-router/ilb/solver/sched"

// Source says where a request's affinity key came from. Its String is the
// source label of the data plane's key-source counter.
type Source uint8

// Key sources, in order of precedence after None.
const (
	None   Source = iota // no key: the request is spread by the weights alone
	Header               // the X-Conversation-Id header
	User                 // the body's "user" field
	Prompt               // derived from the prompt (PromptKey)
)

// Sources lists every source, for counters indexed by Source.
var Sources = [...]Source{None, Header, User, Prompt}

var sourceNames = [...]string{"none", "header", "user", "prompt"}

func (s Source) String() string {
	if int(s) < len(sourceNames) {
		return sourceNames[s]
	}
	return "unknown"
}

// Key is a request's affinity key: the hash the table picks by, where it
// came from, and whether the request opens its conversation.
type Key struct {
	Hash   uint64
	Source Source
	// First is set for a key derived from a chat's first turn (no
	// assistant or tool message yet): the request opens a conversation
	// even if its key was seen before, since many conversations can start
	// with the same words. The data plane then treats it as new (spill and
	// shedding apply) however recently the key was seen.
	First bool
}

// Resolve returns the key by precedence: the header value, else the
// body's user field, else the prompt key (when the body yielded one),
// else None with Hash 0 (callers spread such requests at random).
func Resolve(header string, b Body) Key {
	switch {
	case header != "":
		return Key{Hash: sched.HashKey(header), Source: Header}
	case b.User != "":
		return Key{Hash: sched.HashKey(b.User), Source: User}
	case b.HasPrompt:
		return Key{Hash: b.PromptKey, Source: Prompt, First: b.FirstTurn}
	}
	return Key{Source: None}
}

// Field tags keep "system: a, user: b" apart from "system: ab" and from
// the same text in another role.
const (
	tagModel  = 0x6d6f64656c // "model"
	tagSystem = 0x73797374   // "syst"
	tagUser   = 0x75736572   // "user"
	tagBlock  = 0x626c6b     // "blk"
	keySeed   = 0x243f6a8885a308d3
)

// PromptKey accumulates the parts of a prompt key. The zero value is not
// ready: start with NewPromptKey.
type PromptKey struct{ h uint64 }

// NewPromptKey starts the key of a request for model.
func NewPromptKey(model string) PromptKey {
	return PromptKey{h: fold(keySeed, tagModel, sched.HashKey(model))}
}

// System adds one system (or developer) message's content.
func (k *PromptKey) System(content string) { k.h = fold(k.h, tagSystem, sched.HashKey(content)) }

// User adds the first user message's content.
func (k *PromptKey) User(content string) { k.h = fold(k.h, tagUser, sched.HashKey(content)) }

// Sum is the key's hash.
func (k PromptKey) Sum() uint64 { return mix64(k.h) }

// Blocks is the backtester's model of the prompt key on a trace, whose
// prompts are KV-block hashes rather than text: the key of a conversation
// whose first turn's prompt (its system prompt and first user message)
// covers these blocks. Every later turn starts with the same blocks, so
// the model gives each request of a conversation the key of its first
// request, and conversations whose first prompts are identical share it,
// as they would in the data plane.
func Blocks(model string, blocks []uint64) uint64 {
	k := NewPromptKey(model)
	for _, b := range blocks {
		k.h = fold(k.h, tagBlock, b)
	}
	return k.Sum()
}

// fold absorbs one tagged value into h.
func fold(h, tag, v uint64) uint64 {
	return mix64(h ^ mix64(v+tag*0x9e3779b97f4a7c15))
}

// mix64 is the splitmix64 finaliser.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

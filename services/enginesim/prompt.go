package enginesim

import (
	"encoding/binary"
	"strings"
)

// BytesPerToken is the simulator's tokenizer: a prompt of n bytes is
// ceil(n/4) tokens, the usual rule of thumb for English text under BPE
// tokenizers. The prompt is the chat template below applied to the
// messages, so a follow-up turn that repeats the earlier messages repeats
// the earlier prompt as its prefix.
const BytesPerToken = 4

// The chat template: each message becomes role, ": ", content, "\n".
const (
	templateSep = ": "
	templateEnd = "\n"
)

// message is one chat message, content already flattened to text.
type message struct {
	Role    string
	Content string
}

// promptBytes is the length of the templated prompt.
func promptBytes(msgs []message) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Role) + len(templateSep) + len(m.Content) + len(templateEnd)
	}
	return n
}

// promptTokens is the token count of n prompt bytes: at least 1.
func promptTokens(n int) int { return max(1, (n+BytesPerToken-1)/BytesPerToken) }

// appendBlocks appends the ids of the templated prompt's full blocks of
// blockTokens tokens (blockTokens*BytesPerToken bytes) to dst. Block i's id
// is FNV-1a over block i-1's id and block i's bytes, so two prompts share
// block i exactly when they share every byte up to its end: prefix
// caching's rule. A trailing partial block has no id, as in vLLM, which
// caches full blocks only; and the prompt's last byte is never in a block,
// as vLLM recomputes the last token of a fully cached prompt. So every
// prefill computes at least one token.
func appendBlocks(dst []uint64, msgs []message, blockTokens int) []uint64 {
	h := blockHasher{size: blockTokens * BytesPerToken, dst: dst, limit: promptBytes(msgs) - 1}
	h.reset(0)
	for _, m := range msgs {
		h.write(m.Role)
		h.write(templateSep)
		h.write(m.Content)
		h.write(templateEnd)
	}
	return h.dst
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// blockHasher hashes a byte stream in chained blocks of size bytes.
type blockHasher struct {
	size  int
	limit int    // bytes still to hash
	fill  int    // bytes in the current block
	h     uint64 // FNV-1a state of the current block
	dst   []uint64
}

// reset starts a block chained to prev.
func (b *blockHasher) reset(prev uint64) {
	var buf [8]byte
	binary.LittleEndian.PutUint64(buf[:], prev)
	b.h, b.fill = fnvOffset, 0
	for _, c := range buf {
		b.h = (b.h ^ uint64(c)) * fnvPrime
	}
}

func (b *blockHasher) write(s string) {
	s = s[:min(len(s), b.limit)]
	b.limit -= len(s)
	for len(s) > 0 {
		n := min(len(s), b.size-b.fill)
		h := b.h
		for i := range n {
			h = (h ^ uint64(s[i])) * fnvPrime
		}
		b.h, b.fill, s = h, b.fill+n, s[n:]
		if b.fill == b.size {
			b.dst = append(b.dst, h)
			b.reset(h)
		}
	}
}

// words fill the synthetic completions: four bytes each, so that n tokens
// of output are 4n bytes and count as n tokens again when a client sends
// them back in the next turn.
var words = [...]string{"the ", "sim ", "has ", "one ", "kv  ", "and ", "its ", "gpu ", "ran ", "for ", "you ", "now "}

// filler is a text of maxTokens synthetic tokens; a completion of n
// tokens is filler[:n*BytesPerToken], so no text is generated per
// request.
func filler(maxTokens int) string {
	var sb strings.Builder
	sb.Grow(maxTokens * BytesPerToken)
	for i := range maxTokens {
		sb.WriteString(words[i%len(words)])
	}
	return sb.String()
}

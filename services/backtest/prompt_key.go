package backtest

import (
	"fmt"

	"github.com/ilb-router/ilb/services/internal/affinity"
)

// Affinity keys a backtest routes by (Config.AffinityKey).
const (
	// AffinityConversation routes by the trace's conversation ids (or,
	// for traces without, the keys AssignConversations derives): a client
	// that sends X-Conversation-Id.
	AffinityConversation = "conversation"
	// AffinityPrompt routes by the data plane's prompt-derived key
	// (AssignPromptKeys): a client that sends neither an id nor a user.
	AffinityPrompt = "prompt"
)

// AssignPromptKeys replaces every request's affinity key with the data
// plane's prompt-derived key as traces can show it. The data plane hashes
// the model, the system prompt and the first user message, which are the
// first turn's whole prompt and the leading part of every later turn's;
// a trace has their KV-block hashes instead of their text, so each
// request gets affinity.Blocks of its conversation's first request's
// blocks. Conversations whose first prompts are the same blocks share a
// key, as their text would in the data plane. Requests are visited in
// arrival order; a conversation whose first request has no blocks (a
// prompt shorter than one block) keeps its own id, as distinct text
// would. Call it after AssignConversations and AssignClusters, so that
// clusters are drawn as for conversation keys and the two runs differ in
// their keys alone.
//
// Not modelled: the data plane treats a chat's first turn as a new
// conversation however recently its key was seen; the backtester's
// pickers see only the key.
func (t *Trace) AssignPromptKeys() {
	first := map[string]string{}
	for i := range t.Requests {
		r := &t.Requests[i]
		key, ok := first[r.Conversation]
		if !ok {
			key = r.Conversation
			if len(r.Blocks) > 0 {
				key = fmt.Sprintf("pk-%016x", affinity.Blocks(r.Model, r.Blocks))
			}
			first[r.Conversation] = key
		}
		r.Conversation = key
	}
}

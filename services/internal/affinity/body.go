package affinity

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Kind is the OpenAI endpoint a request body is for.
type Kind uint8

// Request kinds.
const (
	Chat       Kind = iota // POST /v1/chat/completions
	Completion             // POST /v1/completions
	Embedding              // POST /v1/embeddings
)

// Body is what a request body says about routing.
type Body struct {
	User    string // the "user" field
	Cluster string // the "cluster" field (ilb's extension)
	Model   string // the "model" field
	// PromptKey is the prompt's key (HasPrompt says whether there is one):
	// chats only, from the model, the system and developer messages
	// before the first user message, and that message.
	PromptKey uint64
	HasPrompt bool
	// FirstTurn is set for a chat with no assistant, tool or function
	// message: the opening turn of a conversation.
	FirstTurn bool
}

// ParseBody reads the routing fields of a JSON request body of the given
// kind. With derive, a chat's prompt key is computed (Body.PromptKey); a
// completion or embedding request never has one (README.md says why). A
// body that is not a JSON object, or whose routing fields have the wrong
// types, is an error.
func ParseBody(kind Kind, body []byte, derive bool) (Body, error) {
	w, err := scanBody(body)
	if err != nil {
		return Body{}, fmt.Errorf("request body is not a JSON %s request: %w", kind, err)
	}
	b := Body{User: w.user, Cluster: w.cluster, Model: w.model}
	if kind != Chat || !derive {
		return b, nil
	}
	key, ok, err := chatKey(w.model, w.messages)
	if err != nil {
		return Body{}, err
	}
	b.PromptKey, b.HasPrompt, b.FirstTurn = key, ok, firstTurn(w.messages)
	return b, nil
}

// chatKey hashes the model, the system and developer messages before the
// first user message, and that message. Without a user message there is
// no key: a prompt of system messages alone would join unrelated
// conversations.
func chatKey(model string, msgs []message) (uint64, bool, error) {
	k := NewPromptKey(model)
	var buf bytes.Buffer
	for i, m := range msgs {
		text, err := contentText(m.content, &buf)
		if err != nil {
			return 0, false, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		switch m.role {
		case "system", "developer":
			k.System(text)
		case "user":
			k.User(text)
			return k.Sum(), true, nil
		}
	}
	return 0, false, nil
}

// firstTurn reports whether no message is a model's answer yet.
func firstTurn(msgs []message) bool {
	for _, m := range msgs {
		switch m.role {
		case "assistant", "tool", "function":
			return false
		}
	}
	return true
}

// contentText is the text a message's content is keyed by: a string's
// value, "" for null or absent, and the compact JSON of an array of parts
// (text, images, audio), so that the same parts sent again give the same
// key however they were spaced. The result may view raw or buf: it is for
// hashing at once, not for keeping.
func contentText(raw []byte, buf *bytes.Buffer) (string, error) {
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", nil
	case raw[0] == '"':
		inner := raw[1 : len(raw)-1] // validated by the scan
		return decodeString(inner, bytes.IndexByte(inner, '\\') >= 0, false), nil
	}
	buf.Reset()
	if err := json.Compact(buf, raw); err != nil {
		return "", err
	}
	return view(buf.Bytes()), nil
}

func (k Kind) String() string {
	switch k {
	case Chat:
		return "chat completion"
	case Completion:
		return "completion"
	case Embedding:
		return "embedding"
	}
	return "unknown"
}

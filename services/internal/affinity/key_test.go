package affinity

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ilb-router/ilb/solver/sched"
)

// chatBody is a chat request body with the given messages, each "role:text".
func chatBody(model string, msgs ...string) []byte {
	parts := make([]string, len(msgs))
	for i, m := range msgs {
		role, text, _ := strings.Cut(m, ":")
		parts[i] = fmt.Sprintf(`{"role":%q,"content":%q}`, role, text)
	}
	return []byte(fmt.Sprintf(`{"model":%q,"messages":[%s]}`, model, strings.Join(parts, ",")))
}

func mustParse(t *testing.T, kind Kind, body []byte) Body {
	t.Helper()
	b, err := ParseBody(kind, body, true)
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return b
}

func TestPromptKeySameForEveryTurn(t *testing.T) {
	turn1 := mustParse(t, Chat, chatBody("m", "system:be brief", "user:what is a KV cache?"))
	turn2 := mustParse(t, Chat, chatBody("m", "system:be brief", "user:what is a KV cache?",
		"assistant:a cache of keys", "user:and paging?"))
	turn3 := mustParse(t, Chat, chatBody("m", "system:be brief", "user:what is a KV cache?",
		"assistant:a cache of keys", "user:and paging?", "assistant:blocks", "user:thanks"))
	if !turn1.HasPrompt || turn1.PromptKey != turn2.PromptKey || turn2.PromptKey != turn3.PromptKey {
		t.Fatalf("keys %x %x %x (has %v): want one key for every turn", turn1.PromptKey, turn2.PromptKey, turn3.PromptKey, turn1.HasPrompt)
	}
	if !turn1.FirstTurn || turn2.FirstTurn || turn3.FirstTurn {
		t.Fatalf("first turn flags %v %v %v, want true false false", turn1.FirstTurn, turn2.FirstTurn, turn3.FirstTurn)
	}
}

func TestPromptKeySeparatesConversations(t *testing.T) {
	base := mustParse(t, Chat, chatBody("m", "system:be brief", "user:hello")).PromptKey
	for _, c := range []struct {
		name string
		body []byte
	}{
		{"same system prompt, other first message", chatBody("m", "system:be brief", "user:hi")},
		{"other model", chatBody("m2", "system:be brief", "user:hello")},
		{"other system prompt", chatBody("m", "system:be long", "user:hello")},
		{"no system prompt", chatBody("m", "user:hello")},
		{"system text moved into the user message", chatBody("m", "system:", "user:be briefhello")},
		{"developer role counts as system", chatBody("m", "developer:be brief", "user:hi")},
	} {
		if got := mustParse(t, Chat, c.body).PromptKey; got == base {
			t.Errorf("%s: same key %x as the base conversation", c.name, got)
		}
	}
	// The developer role is the system role's newer name: same key.
	if a, b := mustParse(t, Chat, chatBody("m", "developer:be brief", "user:hello")).PromptKey, base; a != b {
		t.Errorf("developer vs system: %x != %x", a, b)
	}
}

func TestPromptKeyContentForms(t *testing.T) {
	plain := mustParse(t, Chat, []byte(`{"model":"m","messages":[{"role":"user","content":"a<b"}]}`))
	escaped := mustParse(t, Chat, []byte(`{"model":"m","messages":[{"role":"user","content":"a\u003cb"}]}`))
	if plain.PromptKey != escaped.PromptKey {
		t.Errorf("the same string escaped differently gives keys %x and %x", plain.PromptKey, escaped.PromptKey)
	}
	parts := mustParse(t, Chat, []byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`))
	spaced := mustParse(t, Chat, []byte(`{"model":"m","messages":[{"role":"user","content":[ {"type": "text", "text": "hi"} ]}]}`))
	if !parts.HasPrompt || parts.PromptKey != spaced.PromptKey {
		t.Errorf("parts %x and the same parts spaced %x: want one key", parts.PromptKey, spaced.PromptKey)
	}
	none := mustParse(t, Chat, []byte(`{"model":"m","messages":[{"role":"system","content":"only rules"}]}`))
	if none.HasPrompt {
		t.Error("a chat without a user message got a prompt key")
	}
	if b := mustParse(t, Completion, []byte(`{"model":"m","prompt":"hello"}`)); b.HasPrompt {
		t.Error("a completion got a prompt key")
	}
	if b, _ := ParseBody(Chat, chatBody("m", "user:x"), false); b.HasPrompt {
		t.Error("derive=false still derived a key")
	}
}

func TestParseBodyErrors(t *testing.T) {
	for _, body := range []string{``, `[]`, `{"user":5}`, `{"messages":{}}`, `{"messages":[{"role":"user","content":[}]}`, `{"model":"m"`} {
		if _, err := ParseBody(Chat, []byte(body), true); err == nil {
			t.Errorf("%q: no error", body)
		}
	}
	if b, err := ParseBody(Embedding, []byte(`{"model":"e","input":"x","user":"u","cluster":"fe-a"}`), true); err != nil || b.User != "u" || b.Cluster != "fe-a" || b.Model != "e" {
		t.Errorf("embedding body: %+v %v", b, err)
	}
}

func TestResolvePrecedence(t *testing.T) {
	b := Body{User: "alice", PromptKey: 42, HasPrompt: true, FirstTurn: true}
	if k := Resolve("conv-1", b); k.Source != Header || k.Hash != sched.HashKey("conv-1") || k.First {
		t.Errorf("header: %+v", k)
	}
	if k := Resolve("", b); k.Source != User || k.Hash != sched.HashKey("alice") {
		t.Errorf("user: %+v", k)
	}
	b.User = ""
	if k := Resolve("", b); k.Source != Prompt || k.Hash != 42 || !k.First {
		t.Errorf("prompt: %+v", k)
	}
	if k := Resolve("", Body{}); k.Source != None || k.Hash != 0 {
		t.Errorf("none: %+v", k)
	}
	for _, s := range Sources {
		if s.String() == "unknown" {
			t.Errorf("source %d has no name", s)
		}
	}
}

func TestBlocksKey(t *testing.T) {
	a := Blocks("m", []uint64{1, 2, 3})
	if a != Blocks("m", []uint64{1, 2, 3}) {
		t.Fatal("Blocks is not deterministic")
	}
	for _, other := range []uint64{Blocks("m", []uint64{1, 2}), Blocks("m", []uint64{1, 2, 4}),
		Blocks("n", []uint64{1, 2, 3}), Blocks("m", []uint64{3, 2, 1})} {
		if other == a {
			t.Errorf("different blocks, same key %x", a)
		}
	}
}

// The key is a pure function of the request: these golden values are the
// same in every process and on every platform, so replicas agree without
// talking, and a change to the derivation (which would move every
// conversation once) shows up here.
func TestPromptKeyIsStable(t *testing.T) {
	k := NewPromptKey("llama-3-70b")
	k.System("You are a helpful assistant.")
	k.User("hello")
	if got := k.Sum(); got != 0x58c158a2edc7100c {
		t.Errorf("prompt key %#x, want 0x58c158a2edc7100c", got)
	}
	if got := mustParse(t, Chat, chatBody("llama-3-70b", "system:You are a helpful assistant.", "user:hello")).PromptKey; got != k.Sum() {
		t.Errorf("ParseBody %#x != PromptKey %#x", got, k.Sum())
	}
	if got := Blocks("m", []uint64{1, 2, 3}); got != 0x175bf91e11573674 {
		t.Errorf("block key %#x, want 0x175bf91e11573674", got)
	}
}

func FuzzParseBody(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"x"}]}]}`), uint8(0))
	f.Add([]byte(`{"model":"m","prompt":["a","b"]}`), uint8(1))
	f.Add([]byte(`{"input":[1,2,3],"user":"u"}`), uint8(2))
	f.Fuzz(func(t *testing.T, body []byte, kind uint8) {
		b, err := ParseBody(Kind(kind%3), body, true)
		if err != nil {
			return
		}
		again, err := ParseBody(Kind(kind%3), body, true)
		if err != nil || again != b {
			t.Fatalf("not deterministic: %+v then %+v, %v", b, again, err)
		}
	})
}

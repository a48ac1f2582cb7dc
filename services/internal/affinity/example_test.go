package affinity_test

import (
	"fmt"

	"github.com/ilb-router/ilb/services/internal/affinity"
)

// Two turns of one chat, sent with neither X-Conversation-Id nor user,
// get the same key; another chat with the same system prompt does not.
func ExampleResolve() {
	turn1 := `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello"}]}`
	turn2 := `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello"},
		{"role":"assistant","content":"hi!"},{"role":"user","content":"how are you?"}]}`
	other := `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"good day"}]}`
	key := func(body string) affinity.Key {
		b, err := affinity.ParseBody(affinity.Chat, []byte(body), true)
		if err != nil {
			panic(err)
		}
		return affinity.Resolve("", b)
	}
	k1, k2, k3 := key(turn1), key(turn2), key(other)
	fmt.Println(k1.Source, k1.First, k2.First)
	fmt.Println(k1.Hash == k2.Hash, k1.Hash == k3.Hash)
	// Output:
	// prompt true false
	// true false
}

package backtest

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/ilb-router/ilb/schemas"
)

// mooncakeLike builds requests the way the Mooncake traces look: every
// prompt starts with block 0 (a shared system prompt), each conversation
// continues with its own blocks, and a later turn repeats the earlier
// turn's blocks except its last (partial) one.
func mooncakeLike() *Trace {
	var rs []Request
	add := func(blocks ...uint64) {
		rs = append(rs, Request{InputTokens: 512 * len(blocks), OutputTokens: 1, Blocks: blocks})
	}
	for c := uint64(1); c <= 5; c++ {
		base := c * 100
		add(0, base, base+1, base+2)                 // turn 1
		add(0, base, base+1, base+3, base+4)         // turn 2: last block of turn 1 rewritten
		add(0, base, base+1, base+3, base+5, base+6) // turn 3
	}
	add(0, 999) // a one-turn conversation
	add()       // no blocks at all
	return &Trace{Requests: rs}
}

func TestAssignConversationsFromBlocks(t *testing.T) {
	tr := mooncakeLike()
	tr.AssignConversations()
	keys := map[string]int{}
	for i, r := range tr.Requests[:15] {
		if i%3 == 0 {
			keys[r.Conversation] = i / 3
		}
		if conv, ok := keys[r.Conversation]; !ok || conv != i/3 {
			t.Fatalf("request %d (conversation %d) got key %q shared with conversation %d", i, i/3, r.Conversation, conv)
		}
	}
	if len(keys) != 5 {
		t.Fatalf("%d keys for 5 conversations", len(keys))
	}
	if k := tr.Requests[15].Conversation; !strings.HasPrefix(k, "pfx-") {
		t.Fatalf("one-turn conversation got %q", k)
	} else if _, dup := keys[k]; dup {
		t.Fatal("one-turn conversation shares a key")
	}
	if k := tr.Requests[16].Conversation; k != "req-16" {
		t.Fatalf("request without blocks got %q, want req-16", k)
	}
}

func TestAssignConversationsKeepsIDs(t *testing.T) {
	tr := &Trace{Requests: []Request{{Conversation: "given", Blocks: []uint64{1, 2}}, {Blocks: []uint64{1, 3}}}}
	tr.AssignConversations()
	if tr.Requests[0].Conversation != "given" || tr.Requests[1].Conversation == "" {
		t.Fatalf("%+v", tr.Requests)
	}
}

func TestKeyDepthFollowsHubs(t *testing.T) {
	// A system prompt of three blocks shared by many conversations, then a
	// second, nested shared prompt: the key is one block past the last hub.
	tr := newTrie()
	for c := uint64(0); c < 6; c++ {
		tr.add([]uint64{1, 2, 3, 10 + c, 20 + c})
		tr.add([]uint64{1, 2, 3, 7, 30 + c, 40 + c})
	}
	if d := tr.keyDepth([]uint64{1, 2, 3, 11, 21}); d != 4 {
		t.Fatalf("key depth %d, want 4 (past the hub at 3 blocks)", d)
	}
	if d := tr.keyDepth([]uint64{1, 2, 3, 7, 31, 41}); d != 5 {
		t.Fatalf("nested hub: key depth %d, want 5", d)
	}
}

func TestAssignClusters(t *testing.T) {
	f := schemas.ExampleFleet()
	tr := &Trace{}
	for i := range 20000 {
		conv := "c" + strconv.Itoa(i/2) // two turns per conversation
		tr.Requests = append(tr.Requests, Request{Conversation: conv, InputTokens: 1, OutputTokens: 1})
	}
	tr.Requests = append(tr.Requests, Request{Cluster: f.Clusters[0].Name, Conversation: "fixed", OutputTokens: 1})
	if err := tr.AssignClusters(f); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for i := 0; i+1 < 20000; i += 2 {
		a, b := tr.Requests[i], tr.Requests[i+1]
		if a.Cluster != b.Cluster {
			t.Fatalf("conversation %s split over %s and %s", a.Conversation, a.Cluster, b.Cluster)
		}
		count[a.Cluster]++
	}
	for _, c := range f.Clusters {
		got, want := float64(count[c.Name])/10000, f.DemandFraction(c.Name)
		if math.Abs(got-want) > 0.02 {
			t.Errorf("cluster %s got %.3f of conversations, want %.3f", c.Name, got, want)
		}
	}
	bad := &Trace{Requests: []Request{{Cluster: "nowhere", OutputTokens: 1}}}
	if err := bad.AssignClusters(f); err == nil {
		t.Fatal("unknown cluster accepted")
	}
}

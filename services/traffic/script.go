package traffic

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// bytesPerToken is the tokenizer rule ilb's simulated engines use (and a
// usual rule of thumb for English under BPE): a message of n tokens is
// written as 4n bytes.
const bytesPerToken = 4

// systemPrompt opens every conversation. It is shorter than one KV block,
// so conversations share no cached prefix through it: cache hits come only
// from a conversation's own earlier turns.
const systemPrompt = "You are a helpful assistant. Answer concisely."

// Turn is one request of a conversation.
type Turn struct {
	Think      time.Duration // wait after the previous reply; 0 for the first turn
	UserTokens int           // length of the new user message
	MaxTokens  int           // the request's max_tokens
}

// Script is everything one conversation will send, drawn when it arrives.
type Script struct {
	ID      string
	Cluster string
	Model   string // "" : the placeholder model (Cluster.Models is empty)
	Turns   []Turn
	seed    uint64 // seeds the text of the user messages
}

// newScript draws conversation number n of cluster from rng, then its
// model from the cluster's mix (after the rest, so that a fleet of one
// model draws the same conversations as before models).
func newScript(cfg *Config, cluster string, n uint64, rng *rand.Rand) Script {
	s := drawScript(cfg, cluster, n, rng)
	for _, c := range cfg.Clusters {
		if c.Name == cluster {
			s.Model = drawModel(c.Models, rng)
		}
	}
	return s
}

// drawModel draws a model by share (schemas.ModelAt); one model is not
// drawn.
func drawModel(mix []schemas.ModelShare, rng *rand.Rand) string {
	switch len(mix) {
	case 0:
		return ""
	case 1:
		return mix[0].Model
	}
	return schemas.ModelAt(mix, rng.Float64())
}

func drawScript(cfg *Config, cluster string, n uint64, rng *rand.Rand) Script {
	s := Script{Cluster: cluster, seed: rng.Uint64()}
	s.ID = fmt.Sprintf("%s-%06d-%04x", cluster, n, s.seed&0xffff)
	turns := geometric(rng, cfg.MeanTurns, cfg.MaxTurns)
	s.Turns = make([]Turn, turns)
	for i := range s.Turns {
		t := &s.Turns[i]
		mean := cfg.MessageTokens
		if i == 0 {
			mean = cfg.FirstMessageTokens
		} else {
			t.Think = time.Duration(rng.ExpFloat64() * float64(cfg.MeanThink))
		}
		t.UserTokens = clampedExp(rng, mean)
		t.MaxTokens = clampedExp(rng, cfg.MeanMaxTokens)
	}
	return s
}

// geometric draws a count >= 1 with the given mean, capped at limit.
func geometric(rng *rand.Rand, mean float64, limit int) int {
	if mean <= 1 {
		return 1
	}
	q := 1 - 1/mean // probability of one more turn
	n := 1 + int(math.Floor(math.Log(1-rng.Float64())/math.Log(q)))
	return max(1, min(n, limit))
}

// clampedExp draws an exponential length with the given mean, kept within
// [mean/8, 4·mean] so that no request is empty or absurd.
func clampedExp(rng *rand.Rand, mean int) int {
	v := int(math.Round(rng.ExpFloat64() * float64(mean)))
	return max(max(1, mean/8), min(v, 4*mean))
}

// words make the user messages' text: random, so no two conversations
// share a prefix beyond the system prompt.
var words = [...]string{
	"route", "engine", "token", "cache", "prefix", "region", "weight", "load",
	"queue", "batch", "decode", "prefill", "latency", "fleet", "cluster", "shed",
	"answer", "question", "explain", "summarise", "compare", "draft", "review", "plan",
	"the", "a", "of", "and", "to", "in", "for", "with",
	"model", "request", "stream", "reply", "context", "window", "memory", "graph",
	"east", "west", "north", "south", "data", "table", "report", "chart",
}

// UserMessage returns the text of turn i's user message: UserTokens ×
// bytesPerToken bytes of words, the same for the same script and turn.
func (s Script) UserMessage(i int) string {
	n := s.Turns[i].UserTokens * bytesPerToken
	rng := rand.New(rand.NewPCG(s.seed, uint64(i)))
	b := make([]byte, 0, n+16)
	for len(b) < n {
		if len(b) > 0 {
			b = append(b, ' ')
		}
		b = append(b, words[rng.IntN(len(words))]...)
	}
	return string(b[:n])
}

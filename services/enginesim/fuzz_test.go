package enginesim

import (
	"testing"
)

func FuzzParseChat(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":5}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url"}]}],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"messages":[{"role":"system","content":null}],"max_completion_tokens":99999999}`,
		`{"messages":[]}`, `[]`, `{"messages":[{"role":"","content":"x"}]}`, `{"max_tokens":-1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := parseChat(body, 128, 4096)
		if err != nil {
			return
		}
		if len(p.messages) == 0 || p.outputTokens < 1 || p.outputTokens > 4096 {
			t.Fatalf("accepted %q as %+v", body, p)
		}
		for _, m := range p.messages {
			if m.Role == "" {
				t.Fatalf("accepted an empty role in %q", body)
			}
		}
		n := promptBytes(p.messages)
		blocks := appendBlocks(nil, p.messages, 4)
		if len(blocks)*16 >= promptTokens(n)*BytesPerToken && n > 0 {
			t.Fatalf("%d blocks cover the whole %d-byte prompt", len(blocks), n)
		}
	})
}

func FuzzParseFault(f *testing.F) {
	for _, s := range []string{
		`{"slowdown":2,"error_rate":0.5,"healthy":false,"ready_replicas":0,"duration":"30s"}`,
		`{"reset":true}`, `{"slowdown":0}`, `{"duration":"-1s"}`, `{"x":1}`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fl, _, err := parseFault(body)
		if err != nil {
			return
		}
		if err := fl.validate(-1); err != nil {
			t.Fatalf("parseFault accepted an invalid fault %q: %v", body, err)
		}
		if fl.Slowdown != nil && !(*fl.Slowdown > 0) || fl.ErrorRate != nil && !(*fl.ErrorRate >= 0 && *fl.ErrorRate <= 1) {
			t.Fatalf("out of range: %q", body)
		}
	})
}

package affinity

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// The reference: the same fields decoded by encoding/json, as ParseBody
// did before the scanner. The scanner must agree with it on every input.

type stdBody struct {
	User     string       `json:"user"`
	Cluster  string       `json:"cluster"`
	Model    string       `json:"model"`
	Messages []stdMessage `json:"messages"`
}

type stdMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

func parseBodyStd(kind Kind, body []byte, derive bool) (Body, error) {
	var w stdBody
	if err := json.Unmarshal(body, &w); err != nil {
		return Body{}, err
	}
	b := Body{User: w.User, Cluster: w.Cluster, Model: w.Model}
	if kind != Chat || !derive {
		return b, nil
	}
	msgs := make([]message, len(w.Messages))
	for i, m := range w.Messages {
		msgs[i] = message{role: m.Role, content: m.Content}
	}
	key, ok, err := chatKey(w.Model, msgs)
	if err != nil {
		return Body{}, err
	}
	b.PromptKey, b.HasPrompt, b.FirstTurn = key, ok, firstTurn(msgs)
	return b, nil
}

// scanSeeds are bodies that probe the corners where a hand-written
// scanner could differ from encoding/json.
var scanSeeds = []string{
	`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}]}`,
	`{"Model":"m","MESSAGES":[{"Role":"user","Content":"hi"}],"USER":"u"}`,
	`{"\u0075ser":"u","mod\u0065l":"m"}`,
	`{"user":"a","user":"b","user":null}`,
	`{"messages":[{"role":"user","content":"a"},{"role":"assistant"}],"messages":[{"content":"b"}]}`,
	`{"messages":[{"role":"user","content":"a"}],"messages":[null]}`,
	`{"messages":[{"role":"user","content":"a"}],"messages":null}`,
	`{"messages":[{"role":"user","content":[ {"type":"text","text":"x"} , {"type":"image_url","image_url":{"url":"u"}} ]}]}`,
	`{"messages":[{"role":"user","content":null}]}`, `{"messages":[{"role":"user","content":5e3}]}`,
	`{"messages":[{"role":"user","content":"\ud83d\ude00 \u00e9 \n"}]}`, "{\"user\":\"\xff\xfe\"}",
	"{\"messages\":[{\"role\":\"user\",\"content\":\"bad \xc3\x28 utf8\"}]}",
	`null`, ` null `, `[]`, `"x"`, `5`, `true`, `{}`, ` { } `, `{"a":[1,2,{"b":null}],"c":-0.5e+2}`,
	`{"user":5}`, `{"messages":{}}`, `{"messages":[5]}`, `{"messages":[{"role":7}]}`,
	`{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":-}`, `{"a":1e}`, `{"a":tru}`, `{"a":"\x"}`, `{"a":"\u12"}`,
	"{\"a\":\"tab\there\"}", `{"a":1,}`, `{,}`, `{"a" 1}`, `{"a":1}x`, `{"a":1} `, `{"a":[1,]}`, `{"a":"unterminated}`,
	`{"user":"u"}{"user":"v"}`, strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	`{"a":` + strings.Repeat("[", 9998) + strings.Repeat("]", 9998) + `}`,
}

func checkAgree(t *testing.T, kind Kind, body []byte) {
	t.Helper()
	want, wantErr := parseBodyStd(kind, body, true)
	got, err := ParseBody(kind, body, true)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("%q (kind %d): scanner error %v, encoding/json error %v", body, kind, err, wantErr)
	}
	if err == nil && got != want {
		t.Fatalf("%q (kind %d): scanner %+v, encoding/json %+v", body, kind, got, want)
	}
}

func TestScanMatchesEncodingJSON(t *testing.T) {
	for _, s := range scanSeeds {
		for k := range 3 {
			checkAgree(t, Kind(k), []byte(s))
		}
	}
}

func FuzzScanMatchesEncodingJSON(f *testing.F) {
	for _, s := range scanSeeds {
		if len(s) < 1000 {
			f.Add([]byte(s), uint8(0))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, kind uint8) {
		checkAgree(t, Kind(kind%3), body)
	})
}

// BenchmarkParseBody compares the scanner with encoding/json on a first
// turn and on a 40-message conversation of about 20 KB.
func BenchmarkParseBody(b *testing.B) {
	long := []map[string]string{{"role": "system", "content": "You are a helpful assistant."}}
	for i := range 40 {
		role := []string{"user", "assistant"}[i%2]
		long = append(long, map[string]string{"role": role, "content": strings.Repeat(fmt.Sprintf("turn %d says something. ", i), 20)})
	}
	longBody, _ := json.Marshal(map[string]any{"model": "llama-3-70b", "stream": true, "messages": long})
	short := chatBody("llama-3-70b", "system:You are a helpful assistant.", "user:what is a KV cache?")
	for _, c := range []struct {
		name string
		body []byte
	}{{"first-turn", short}, {"40-messages", longBody}} {
		b.Run("scan/"+c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseBody(Chat, c.body, true); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("encoding-json/"+c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := parseBodyStd(Chat, c.body, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package enginesim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// sseEvent is one "data:" line and when it arrived.
type sseEvent struct {
	data string
	at   time.Time
}

func postStream(t *testing.T, h *harness, engine string, body any) (*http.Response, []sseEvent) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, "http://"+h.s.Addr()+chatPath(engine), bytes.NewReader(b))
	req.Header.Set(HeaderConversation, "stream-1")
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var events []sseEvent
	if resp.StatusCode != http.StatusOK {
		return resp, nil
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "data: ") {
			t.Fatalf("not an SSE data line: %q", line)
		}
		events = append(events, sseEvent{strings.TrimPrefix(line, "data: "), time.Now()})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return resp, events
}

type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Choices []struct {
		Delta struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

func TestStreamingSendsChunksThenDone(t *testing.T) {
	h := start(t, nil)
	// "user: Tell me a long story.\n" is 28 bytes, 7 tokens. 150 output
	// tokens at h100 speed: ~4.4 s of decoding, 220 ms of wall time at
	// TimeScale 20, chunks every 10 ms.
	resp, events := postStream(t, h, "h100-a", chat(150, true, "user", "Tell me a long story."))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if len(events) < 6 || events[len(events)-1].data != "[DONE]" {
		t.Fatalf("%d events, last %q; want many chunks then [DONE]", len(events), events[len(events)-1].data)
	}
	var content strings.Builder
	var finish string
	var usage bool
	for i, ev := range events[:len(events)-1] {
		var c chunk
		if err := json.Unmarshal([]byte(ev.data), &c); err != nil {
			t.Fatalf("event %d %q: %v", i, ev.data, err)
		}
		if c.Object != "chat.completion.chunk" || !strings.HasPrefix(c.ID, "chatcmpl-h100-a-") {
			t.Fatalf("event %d: object %q id %q", i, c.Object, c.ID)
		}
		if c.Usage != nil {
			usage = c.Usage.PromptTokens == 7 && c.Usage.CompletionTokens == 150 && len(c.Choices) == 0
			continue
		}
		if i == 0 && c.Choices[0].Delta.Role != "assistant" {
			t.Errorf("first chunk has no role")
		}
		content.WriteString(c.Choices[0].Delta.Content)
		if c.Choices[0].FinishReason != nil {
			finish = *c.Choices[0].FinishReason
		}
	}
	if content.Len() != 150*BytesPerToken || finish != "length" || !usage {
		t.Fatalf("content %d bytes, finish %q, usage chunk ok %v", content.Len(), finish, usage)
	}
	// The first token came at prefill's end, long before the last: chunks
	// are spread over the decode, not sent at the end.
	if gap := events[len(events)-1].at.Sub(events[0].at); gap < 100*time.Millisecond {
		t.Errorf("first chunk only %v before [DONE]; decoding takes ~220 ms", gap)
	}
}

func TestStreamingErrorBeforeFirstToken(t *testing.T) {
	h := start(t, nil)
	if err := h.s.InjectFault("h100-a", Fault{ErrorRate: new(1.0)}); err != nil {
		t.Fatal(err)
	}
	resp, events := postStream(t, h, "h100-a", chat(10, true, "user", "x"))
	if resp.StatusCode != 500 || len(events) != 0 {
		t.Fatalf("status %d with %d events; want 500 and a JSON error", resp.StatusCode, len(events))
	}
}

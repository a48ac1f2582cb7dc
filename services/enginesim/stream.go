package enginesim

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// stream answers a streaming call with server-sent events: nothing until
// the first token, then one chunk per ChunkInterval carrying the tokens
// the engine produced meanwhile (estimated from its current decode step,
// since the model reports a request's tokens only when it finishes), then
// the rest at completion, the finish chunk, a usage chunk when asked, and
// "data: [DONE]".
func (s *Sim) stream(w http.ResponseWriter, r *http.Request, e *simEngine, c *call, p *parsedChat) {
	var res result
	select {
	case <-c.first:
	case res = <-c.done:
		if res.d.Error != "" {
			writeEngineError(w, res.d.Error)
			return
		}
	case <-r.Context().Done():
		return
	case <-s.stopping:
		writeEngineError(w, errShutdown)
		return
	case <-e.stopped:
		select {
		case res = <-c.done:
		default:
			res.d.Error = errShutdown
		}
		if res.d.Error != "" {
			writeEngineError(w, res.d.Error)
			return
		}
	}
	sw := s.newSSE(w, e, c, p)
	if res.d.Error == "" && res.d.OutputTokens > 0 { // finished before its first token was seen
		sw.finish(&res)
		return
	}
	if !sw.chunk(1) {
		return
	}
	ticker := time.NewTicker(s.cfg.ChunkInterval)
	defer ticker.Stop()
	last, produced := time.Now(), 1.0
	for {
		select {
		case res = <-c.done:
			sw.finish(&res)
			return
		case now := <-ticker.C:
			if step := e.stepWallNs.Load(); step > 0 {
				produced += float64(now.Sub(last)) / float64(step)
			}
			last = now
			if n := min(int(produced), c.req.OutputTokens-1) - sw.sent; n > 0 && !sw.chunk(n) {
				return
			}
		case <-r.Context().Done():
			return
		case <-s.stopping:
			return
		case <-e.stopped:
			select {
			case res = <-c.done:
				sw.finish(&res)
			default:
			}
			return
		}
	}
}

// sse writes one stream's events.
type sse struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	filler string
	prefix []byte // `data: {"id":...,"choices":[` up to the choice
	buf    []byte
	sent   int
	p      *parsedChat
}

func (s *Sim) newSSE(w http.ResponseWriter, e *simEngine, c *call, p *parsedChat) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	model, _ := json.Marshal(modelName(p, e))
	prefix := []byte(`data: {"id":"`)
	prefix = append(prefix, completionID(e.name, c.req.ID)...)
	object := `","object":"chat.completion.chunk","created":`
	if p.text {
		object = `","object":"text_completion","created":`
	}
	prefix = append(prefix, object...)
	prefix = strconv.AppendInt(prefix, time.Now().Unix(), 10)
	prefix = append(prefix, `,"model":`...)
	prefix = append(prefix, model...)
	prefix = append(prefix, `,"choices":[`...)
	return &sse{w: w, rc: http.NewResponseController(w), filler: s.filler, prefix: prefix, p: p}
}

// chunk sends the next n tokens; false when the client is gone.
func (x *sse) chunk(n int) bool {
	b := append(x.buf[:0], x.prefix...)
	if x.p.text {
		b = append(b, `{"index":0,"text":"`...)
		b = append(b, x.filler[x.sent*BytesPerToken:(x.sent+n)*BytesPerToken]...)
		b = append(b, `","logprobs":null,"finish_reason":null}]}`+"\n\n"...)
		x.sent += n
		return x.write(b)
	}
	b = append(b, `{"index":0,"delta":{`...)
	if x.sent == 0 {
		b = append(b, `"role":"assistant",`...)
	}
	b = append(b, `"content":"`...)
	b = append(b, x.filler[x.sent*BytesPerToken:(x.sent+n)*BytesPerToken]...)
	b = append(b, `"},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
	x.sent += n
	return x.write(b)
}

// finish sends the remaining tokens, the finish chunk, the usage chunk
// when asked for, and [DONE].
func (x *sse) finish(res *result) {
	if res.d.Error != "" { // the simulator is shutting down
		return
	}
	if n := res.d.OutputTokens - x.sent; n > 0 && !x.chunk(n) {
		return
	}
	b := append(x.buf[:0], x.prefix...)
	if x.p.text {
		b = append(b, `{"index":0,"text":"","logprobs":null,"finish_reason":"`...)
	} else {
		b = append(b, `{"index":0,"delta":{},"logprobs":null,"finish_reason":"`...)
	}
	b = append(b, x.p.finishReason()...)
	b = append(b, `"}]}`+"\n\n"...)
	if x.p.includeUsage {
		b = append(b, x.prefix...)
		u, _ := json.Marshal(newUsage(res.d.PromptTokens, res.d.CachedTokens, res.d.OutputTokens))
		b = append(b, `],"usage":`...)
		b = append(b, u...)
		b = append(b, "}\n\n"...)
	}
	b = append(b, "data: [DONE]\n\n"...)
	x.write(b)
}

func (x *sse) write(b []byte) bool {
	x.buf = b
	if _, err := x.w.Write(b); err != nil {
		return false
	}
	return x.rc.Flush() == nil
}

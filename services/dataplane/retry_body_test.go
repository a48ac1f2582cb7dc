package dataplane

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// chatBody is a chat completion request whose message is pad bytes long.
func chatBody(pad int) string {
	return fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":%q}]}`, strings.Repeat("p", pad))
}

// postHeaderRouted posts body to the data plane at url routed by the
// X-Conversation-Id header alone, over a real connection: with a
// Content-Length, or chunked (length unknown) when chunked is set.
func postHeaderRouted(t *testing.T, url, key, body string, chunked bool) (int, string, string) {
	t.Helper()
	var r io.Reader = strings.NewReader(body)
	if chunked {
		r = io.MultiReader(r) // hides the length: the client sends chunks
	}
	req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(HeaderConversation, key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get(HeaderEngine), string(b)
}

// TestHeaderRoutedRequestRetried: a request routed by X-Conversation-Id
// alone whose engine answers 500 is retried on the conversation's next
// choice and succeeds there, with the whole body, whether the client
// sent a Content-Length or chunks. A body over RetryBodyBytes streams
// and, once the failing engine has read it, is not retried: the 500 goes
// back to the client and the skipped retry is counted.
func TestHeaderRoutedRequestRetried(t *testing.T) {
	deps, tel := withTelemetry(t)
	d, es, h := proxyFixtureDeps(t, deps, func(c *Config) {
		c.RetryBodyBytes = 4 << 10
		c.Outlier.Consecutive5xx = 100 // eng-a must stay in to fail every time
	}, "eng-a", "eng-b", "eng-c")
	srv := httptest.NewServer(h)
	defer srv.Close()
	es[0].code.Store(500)
	keys := keysOn(t, d, "fe-a", "eng-a", 4)
	body := chatBody(3000) // under RetryBodyBytes
	for i, k := range keys {
		chunked := i%2 == 1
		code, engine, answer := postHeaderRouted(t, srv.URL, k, body, chunked)
		if code != 200 || engine == "eng-a" || engine == "" {
			t.Fatalf("%s (chunked %v): %d from %q: %s; want 200 from the next choice", k, chunked, code, engine, answer)
		}
		for _, e := range es {
			if got, _ := e.body.Load().([]byte); e.name == engine && !bytes.Equal(got, []byte(body)) {
				t.Fatalf("%s: %s got %d bytes, want the whole %d-byte body", k, engine, len(got), len(body))
			}
		}
	}
	if hits := es[0].hits.Load(); hits != int64(len(keys)) {
		t.Fatalf("eng-a saw %d attempts, want %d (one per request)", hits, len(keys))
	}
	c, _ := d.cluster("fe-a")
	if got := c.budget.w.b.Load(); got != int64(len(keys)) {
		t.Fatalf("retries granted %d, want %d", got, len(keys))
	}

	big := chatBody(8 << 10) // over RetryBodyBytes: streamed
	for _, chunked := range []bool{false, true} {
		if code, engine, _ := postHeaderRouted(t, srv.URL, keys[0], big, chunked); code != 500 || engine != "eng-a" {
			t.Fatalf("streamed body (chunked %v): %d from %q; want eng-a's 500, not retried", chunked, code, engine)
		}
	}
	if got := metricValue(t, tel.MetricsHandler(), metricUnreplayable, map[string]string{"cluster": "fe-a"}); got != 2 {
		t.Fatalf("%s = %v, want 2", metricUnreplayable, got)
	}
	if got := c.budget.w.b.Load(); got != int64(len(keys)) {
		t.Fatalf("retries granted %d after the streamed bodies, want still %d", got, len(keys))
	}
}

// TestHeaderRoutedRetriesStayInBudget: with every engine answering 500,
// header-routed requests (now replayable) retry no more than the budget
// allows, 20% of requests plus MinPerSecond × Window, as body-routed
// ones do.
func TestHeaderRoutedRetriesStayInBudget(t *testing.T) {
	d, es := allFailing(t, Deps{})
	h := d.Handler()
	const requests = 300
	for i := range requests {
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(chatBody(100)))
		req.Header.Set(HeaderConversation, "storm-"+strconv.Itoa(i))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 500 {
			t.Fatalf("request %d: %d, want the engine's 500 passed through", i, rec.Code)
		}
	}
	sent := int64(0)
	for _, e := range es {
		sent += e.hits.Load()
	}
	retries, limit := sent-requests, int64(0.2*requests)+10
	if retries > limit || retries < limit-1 {
		t.Fatalf("%d header-routed requests made %d retries, want the budget's %d", requests, retries, limit)
	}
	c, _ := d.cluster("fe-a")
	if c.unreplayable.Load() != 0 {
		t.Fatalf("%d buffered requests counted as unreplayable", c.unreplayable.Load())
	}
}

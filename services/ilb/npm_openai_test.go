package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// npmDir holds the npm openai client check; .ci/run installs the package
// there (node_modules is not committed).
const npmDir = "testdata/openai-npm"

// npmResult is what client.mjs prints.
type npmResult struct {
	Models []string `json:"models"`
	Model  string   `json:"model"` // the one the calls name: the last listed
	Turns  []struct {
		Engine string `json:"engine"`
		Chars  int    `json:"chars"`
	} `json:"turns"`
	ChatStream struct{ Chunks, Chars int } `json:"chatStream"`
	Completion struct {
		Object string
		Chars  int
	}
	CompletionStream struct{ Chunks, Chars int } `json:"completionStream"`
	UnknownModel     *npmError                   `json:"unknownModel"`
	UnknownChat      *npmError                   `json:"unknownChat"`
	Shed             *npmError                   `json:"shed"`
}

type npmError struct {
	Name, Code, Type, Message string
	Status                    int
	RetryAfter                string `json:"retryAfter"`
}

// nodeClient returns the node binary, or skips (fails in CI, which
// installs node and the package).
func nodeClient(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(npmDir, "node_modules", "openai", "package.json"))
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node and the openai npm package are required in CI (.ci/run installs them): %v", err)
		}
		t.Skipf("no node or no openai npm package (cd %s && npm install --no-package-lock): %v", npmDir, err)
	}
	return node
}

// TestNPMOpenAIClient runs the official openai npm client (6.x) unchanged
// against `ilb dev`: models.list(), a three-turn chat with no id and no
// user (every turn on one engine), chat streaming, completions with and
// without streaming, an unknown model (404), and against a data plane
// that sheds everything (429 with Retry-After).
func TestNPMOpenAIClient(t *testing.T) {
	node := nodeClient(t)
	shedFile := filepath.Join(t.TempDir(), "shed.json")
	if err := os.WriteFile(shedFile, []byte(`{"version":1,"cluster":"fe-a","created_at":"2026-11-29T22:00:00Z","weights":{},"shed_fraction":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	shedURL := startDataplane(t, "--cluster", "fe-a", "--snapshot", shedFile, "--engine", "eng-a=http://127.0.0.1:1")
	d := startDev(t, "--time-scale", "10", "--rate", "2")
	defer d.stop(t)
	base := "http://" + d.info.HTTP
	waitState(t, base, 40*time.Second, "a snapshot on every cluster", func(st map[string]any) bool {
		for _, c := range st["clusters"].([]any) {
			if r, _ := c.(map[string]any)["routing"].(map[string]any); r == nil || r["ready"] != true {
				return false
			}
		}
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs")
	cmd.Dir = npmDir
	cmd.Env = append(os.Environ(), "ILB_BASE_URL="+base+"/v1", "ILB_SHED_URL="+shedURL+"/v1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client.mjs: %v\n%s", err, stderr.String())
	}
	var r npmResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	t.Logf("npm openai client: %s", strings.TrimSpace(string(out)))
	code, b := httpDo(t, "GET", base+"/v1/models", "")
	var models struct {
		Data []struct{ ID string } `json:"data"`
	}
	if err := json.Unmarshal(b, &models); code != 200 || err != nil || len(models.Data) == 0 {
		t.Fatalf("GET /v1/models = %d %s", code, b)
	}
	var ids []string
	for _, m := range models.Data {
		ids = append(ids, m.ID)
	}
	checkNPMResult(t, &r, ids)
	// The conversation named a model only some engines serve: its engine
	// serves it.
	fleet := schemas.ExampleFleet()
	if fe, ok := fleet.Engine(r.Turns[0].Engine); !ok || !fleet.ServesModel(fe, r.Model) {
		t.Errorf("the conversation for %s went to %q, which does not serve it", r.Model, r.Turns[0].Engine)
	}
}

func checkNPMResult(t *testing.T, r *npmResult, models []string) {
	t.Helper()
	if !slices.Equal(r.Models, models) || len(models) == 0 || r.Model != models[len(models)-1] {
		t.Fatalf("models.list() = %v (calls name %q), want what GET /v1/models lists: %v", r.Models, r.Model, models)
	}
	if e := r.UnknownChat; e == nil || e.Status != 404 || e.Name != "NotFoundError" || e.Code != "model_not_found" ||
		e.Type != "invalid_request_error" || e.Message == "" {
		t.Errorf("a chat for an unknown model raised %+v, want NotFoundError 404 model_not_found", e)
	}
	if len(r.Turns) != 3 || r.Turns[0].Engine == "" || r.Turns[1].Engine != r.Turns[0].Engine || r.Turns[2].Engine != r.Turns[0].Engine {
		t.Errorf("three turns with no id and no user went to %+v, want one engine", r.Turns)
	}
	if r.ChatStream.Chunks < 2 || r.ChatStream.Chars == 0 {
		t.Errorf("chat stream %+v", r.ChatStream)
	}
	if r.Completion.Object != "text_completion" || r.Completion.Chars == 0 || r.CompletionStream.Chunks < 2 {
		t.Errorf("completion %+v, stream %+v", r.Completion, r.CompletionStream)
	}
	if e := r.UnknownModel; e == nil || e.Status != 404 || e.Name != "NotFoundError" || e.Code != "model_not_found" || e.Message == "" {
		t.Errorf("models.retrieve(unknown) raised %+v, want NotFoundError 404 model_not_found", e)
	}
	if e := r.Shed; e == nil || e.Status != 429 || e.Name != "RateLimitError" || e.Code != "rate_limit_exceeded" ||
		e.Type != "rate_limit_error" || e.RetryAfter != "1" || !strings.Contains(e.Message, "load shedding") {
		t.Errorf("a shed chat raised %+v, want RateLimitError 429 rate_limit_exceeded with Retry-After 1", e)
	}
}

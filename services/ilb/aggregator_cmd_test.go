package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/streamstest"
)

func aggFleetFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(path, schemas.ExampleFleetYAML(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAggregatorCommand(t *testing.T) {
	addrs := streamstest.Kafka(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errb := &syncBuffer{}, &syncBuffer{}
	code := make(chan int, 1)
	go func() {
		code <- runMain(ctx, []string{"aggregator", "--kafka", addrs[0], "--fleet", aggFleetFile(t),
			"--http", "127.0.0.1:0", "--window", "1s", "--out-of-order", "0s", "--lateness", "0s",
			"--group", "g-cmd", "--log-level", "warn"}, out, errb)
	}()
	addr := regexp.MustCompile(`http://([0-9.:]+)/v1/features`)
	var base string
	for deadline := time.Now().Add(15 * time.Second); base == ""; time.Sleep(10 * time.Millisecond) {
		if m := addr.FindStringSubmatch(out.String()); m != nil {
			base = "http://" + m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no HTTP address printed; stdout %q stderr %q", out.String(), errb.String())
		}
	}
	t0 := time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC).UnixNano()
	var recs []*kgo.Record
	for i, tNs := range []int64{t0 + 1e8, t0 + 5e8, t0 + 25e8} {
		ev := schemas.Event{Kind: schemas.KindCompletion, Completion: schemas.Completion{
			Engine: "eng-x", TimeUnixNano: tNs, PromptTokens: 10, OutputTokens: 5, TTFTMs: float64(100 * (i + 1)), TBOTMs: 10}}
		b, err := schemas.AppendEvent(nil, &ev)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: schemas.TopicSignals, Key: []byte("eng-x"), Value: b,
			Headers: []kgo.RecordHeader{{Key: schemas.HeaderSchema, Value: []byte(schemas.SchemaSignalV1)}}})
	}
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	defer pcancel()
	if err := recTestClient(t, addrs).ProduceSync(pctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var view struct {
		Rows []struct {
			Engine   string `json:"engine"`
			Requests uint64 `json:"requests"`
		} `json:"rows"`
	}
	for deadline := time.Now().Add(15 * time.Second); len(view.Rows) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no window on /v1/features; stderr %q", errb.String())
		}
		resp, err := http.Get(base + "/v1/features")
		if err != nil {
			t.Fatal(err)
		}
		_ = json.NewDecoder(resp.Body).Decode(&view)
		resp.Body.Close()
	}
	if view.Rows[0].Engine != "eng-x" || view.Rows[0].Requests != 2 {
		t.Errorf("/v1/features rows %+v", view.Rows)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `ilb_aggregator_events_total{type="completion"} 3`) {
		t.Errorf("/metrics lacks the event count")
	}
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Errorf("exit %d; stderr %q", c, errb.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("ilb aggregator did not stop within 20s")
	}
}

func TestAggregatorCommandBadInput(t *testing.T) {
	fleet := aggFleetFile(t)
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"aggregator"}, "--fleet"},
		{[]string{"aggregator", "--fleet", "/nonexistent.yaml"}, "--fleet"},
		{[]string{"aggregator", "--fleet", fleet, "--hop", "3s"}, "multiple"},
		{[]string{"aggregator", "--fleet", fleet, "--log-level", "loud"}, "--log-level"},
		{[]string{"aggregator", "--fleet", fleet, "--group", ""}, "group"},
	} {
		code, _, stderr := run(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.msg)
		}
	}
}

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Asking a data plane for picks and for its routing view, as a client
// and an operator would, and keeping score: the fault tests' bar is that
// no pick fails and no version goes back.

// pickAnswer is a data plane's answer to POST /v1/pick.
type pickAnswer struct {
	Code     int
	Engine   string `json:"engine"`
	Version  uint64 `json:"snapshot_version"`
	Fallback string `json:"fallback"`
}

// pick asks the data plane at base for the engine of conversation conv.
func pick(ctx context.Context, c *http.Client, base, cluster, conv string) (pickAnswer, error) {
	body := fmt.Sprintf(`{"cluster":%q,"conversation_id":%q}`, cluster, conv)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/pick", strings.NewReader(body))
	if err != nil {
		return pickAnswer{}, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return pickAnswer{}, err
	}
	defer resp.Body.Close()
	var a pickAnswer
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return pickAnswer{}, err
	}
	a.Code = resp.StatusCode
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, &a); err != nil {
			return a, fmt.Errorf("pick answer %q: %w", raw, err)
		}
	}
	return a, nil
}

// pickLoop asks one data plane for picks, one at a time, cycling through
// a fixed set of conversations, and records every answer: the faults must
// not fail a single pick, the versions it sees must never go back, and a
// conversation must keep its engine while the version stays the same.
type pickLoop struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	sent      int
	failed    int    // any answer but 200, or no answer
	firstFail string // what the first failure was
	last      uint64 // version of the latest answer
	wentBack  int    // answers with a lower version than the one before
	moved     int    // a conversation's engine changed within one version
	byConv    map[string]pickAnswer
}

// startPicks asks base for picks of cluster, every interval, over convs
// conversations, until stopped (at the latest when the test ends).
func startPicks(t testing.TB, base, cluster string, interval time.Duration, convs int) *pickLoop {
	ctx, cancel := context.WithCancel(context.Background())
	l := &pickLoop{cancel: cancel, done: make(chan struct{}), byConv: map[string]pickAnswer{}}
	c := httpClient(t, 5*time.Second)
	go func() {
		defer close(l.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for i := 0; ctx.Err() == nil; i++ {
			conv := fmt.Sprintf("conv-%d", i%convs)
			a, err := pick(ctx, c, base, cluster, conv)
			if ctx.Err() != nil {
				return
			}
			l.record(conv, a, err)
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(l.stop)
	return l
}

func (l *pickLoop) record(conv string, a pickAnswer, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent++
	if err != nil || a.Code != http.StatusOK {
		l.failed++
		if l.firstFail == "" {
			l.firstFail = fmt.Sprintf("pick %d (%s): status %d, err %v", l.sent, conv, a.Code, err)
		}
		return
	}
	if a.Version < l.last {
		l.wentBack++
	}
	l.last = max(l.last, a.Version)
	if prev, ok := l.byConv[conv]; ok && prev.Version == a.Version && prev.Engine != a.Engine {
		l.moved++
	}
	l.byConv[conv] = a
}

func (l *pickLoop) stop() {
	l.cancel()
	<-l.done
}

// pickCounts is a copy of a pickLoop's counters.
type pickCounts struct {
	Sent, Failed, WentBack, Moved int
	FirstFail                     string
	Last                          uint64
}

func (l *pickLoop) counts() pickCounts {
	l.mu.Lock()
	defer l.mu.Unlock()
	return pickCounts{Sent: l.sent, Failed: l.failed, WentBack: l.wentBack, Moved: l.moved,
		FirstFail: l.firstFail, Last: l.last}
}

// check fails the test unless every pick succeeded, no version went back
// and no conversation moved within a version.
func (pc pickCounts) check(t testing.TB) {
	t.Helper()
	if pc.Sent == 0 {
		t.Error("no pick was sent")
	}
	if pc.Failed > 0 {
		t.Errorf("%d of %d picks failed; first: %s", pc.Failed, pc.Sent, pc.FirstFail)
	}
	if pc.WentBack > 0 {
		t.Errorf("%d picks answered with an older snapshot version than the pick before", pc.WentBack)
	}
	if pc.Moved > 0 {
		t.Errorf("%d times a conversation changed engine while the snapshot version stayed the same", pc.Moved)
	}
}

// routingView is the part of GET /v1/routing?cluster= the tests read.
type routingView struct {
	Ready        bool               `json:"ready"`
	Version      uint64             `json:"version"`
	AgeSeconds   float64            `json:"age_seconds"`
	Stale        bool               `json:"stale"`
	Weights      map[string]float64 `json:"weights"`
	ShedFraction float64            `json:"shed_fraction"`
	Engines      []struct {
		Name      string `json:"name"`
		Available bool   `json:"available"`
		Reason    string `json:"reason"`
	} `json:"engines"`
}

// routing reads the data plane's view of cluster.
func routing(t testing.TB, c *http.Client, base, cluster string) routingView {
	t.Helper()
	resp, err := c.Get(base + "/v1/routing?cluster=" + cluster)
	if err != nil {
		t.Fatalf("GET /v1/routing: %v", err)
	}
	defer resp.Body.Close()
	var v routingView
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/routing: status %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("GET /v1/routing: %v", err)
	}
	return v
}

// available reports whether the routing view lists engine as available.
func (v routingView) available(engine string) bool {
	for _, e := range v.Engines {
		if e.Name == engine {
			return e.Available
		}
	}
	return false
}

package fleetwatch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ilb-router/ilb/schemas"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fleetText is the example fleet with n of its engines (n >= 2: one in
// the US, one in the EU, so every cluster keeps an eligible engine).
func fleetText(t *testing.T, n int) []byte {
	t.Helper()
	f := schemas.ExampleFleet()
	all := f.Engines
	f.Engines = nil
	for _, i := range []int{0, 4, 1, 2, 3, 5}[:n] {
		f.Engines = append(f.Engines, all[i])
	}
	b, err := schemas.EncodeFleet(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// applied records the fleets an applier saw.
type applied struct {
	mu     sync.Mutex
	counts []int
	refuse bool
}

func (a *applied) apply(f *schemas.Fleet) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refuse {
		return errors.New("refused")
	}
	a.counts = append(a.counts, len(f.Engines))
	return nil
}

func (a *applied) last() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.counts) == 0 {
		return 0
	}
	return a.counts[len(a.counts)-1]
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func start(t *testing.T, path string) (*Watcher, *applied) {
	t.Helper()
	w, err := New(Config{Path: path, Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	a := &applied{}
	w.OnChange(a.apply)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return w, a
}

// An edit is applied; a broken file is refused and the last good fleet
// stays; a fixed file is applied again.
func TestWatchEditsAndBadFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(path, fleetText(t, 3), 0o600); err != nil {
		t.Fatal(err)
	}
	w, a := start(t, path)
	if len(w.Current().Engines) != 3 {
		t.Fatalf("initial fleet: %d engines", len(w.Current().Engines))
	}
	if err := os.WriteFile(path, fleetText(t, 4), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the 4-engine fleet", func() bool { return a.last() == 4 && len(w.Current().Engines) == 4 })
	bad := strings.Replace(string(fleetText(t, 2)), "max_batch:", "max_batchh:", 1)
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if a.last() != 4 || len(w.Current().Engines) != 4 {
		t.Fatalf("a broken file changed the fleet: applied %v, current %d", a.counts, len(w.Current().Engines))
	}
	if err := os.WriteFile(path, fleetText(t, 2), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the fixed 2-engine fleet", func() bool { return a.last() == 2 })
}

// Kubernetes updates a mounted ConfigMap by swapping the ..data symlink
// to a new timestamped directory; fleet.yaml is a symlink through it.
func TestWatchConfigMapSymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	for i, n := range []int{3, 5} {
		ts := filepath.Join(dir, "..ts"+string(rune('1'+i)))
		if err := os.Mkdir(ts, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ts, "fleet.yaml"), fleetText(t, n), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("..ts1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/fleet.yaml", filepath.Join(dir, "fleet.yaml")); err != nil {
		t.Fatal(err)
	}
	w, a := start(t, filepath.Join(dir, "fleet.yaml"))
	if len(w.Current().Engines) != 3 {
		t.Fatal("initial fleet")
	}
	// Atomic swap, as kubelet does: a new link renamed over ..data.
	if err := os.Symlink("..ts2", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the swapped-in fleet", func() bool { return a.last() == 5 })
}

// An applier's refusal is counted and the fleet stays; Reload offers the
// same file again, and a new fleet is not applied until then.
func TestWatchRefusedThenReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(path, fleetText(t, 3), 0o600); err != nil {
		t.Fatal(err)
	}
	w, a := start(t, path)
	a.mu.Lock()
	a.refuse = true
	a.mu.Unlock()
	if err := os.WriteFile(path, fleetText(t, 4), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if len(w.Current().Engines) != 3 {
		t.Fatal("a refused fleet became current")
	}
	a.mu.Lock()
	a.refuse = false
	a.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	if a.last() != 0 {
		t.Fatal("an unchanged file was applied again without Reload")
	}
	w.Reload()
	waitFor(t, "the reloaded fleet", func() bool { return a.last() == 4 && len(w.Current().Engines) == 4 })
}

func TestNewRejectsBadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(path, []byte("engines: [}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Path: path}); err == nil {
		t.Fatal("a bad fleet accepted at start")
	}
}

package streamstest

import (
	"bytes"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// LogBuffer collects what is written to it, for a test to read while
// other goroutines write: a slog handler of a running service, nats.go's
// or franz-go's callback goroutines, a subcommand's stdout. The zero value
// is an empty buffer ready to use; it is safe for concurrent use.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p; it never fails.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines returns the lines written so far that re matches, in order,
// without their line ends. An unfinished last line counts as a line.
func (b *LogBuffer) Lines(re *regexp.Regexp) []string {
	var out []string
	for l := range strings.Lines(b.String()) {
		if l = strings.TrimSuffix(l, "\n"); re.MatchString(l) {
			out = append(out, l)
		}
	}
	return out
}

// WaitFor polls every 10 ms until a line matches re and returns the
// first such line; when d passes first it fails the test, showing what
// was written.
func (b *LogBuffer) WaitFor(t testing.TB, d time.Duration, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if l := b.Lines(re); len(l) > 0 {
			return l[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line matching %q within %v; written:\n%s", re, d, b.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ilb-router/ilb/schemas"
)

// TestServicesShareLogAndTraceFlags: every long-running service takes
// --log-level and --otlp, says so in --help, and refuses a bad level with
// exit 2 and a line naming the flag, before it connects to anything.
func TestServicesShareLogAndTraceFlags(t *testing.T) {
	fleet := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(fleet, schemas.ExampleFleetYAML(), 0o644); err != nil {
		t.Fatal(err)
	}
	// Enough flags for each command to pass its own checks.
	cmds := map[string][]string{
		"engine-sim": {"--no-kafka", "--http", "127.0.0.1:0"},
		"adapter":    {"--kafka", "127.0.0.1:1", "--target", "e=http://127.0.0.1:1"},
		"aggregator": {"--kafka", "127.0.0.1:1", "--fleet", fleet},
		"optimizer":  {"--kafka", "127.0.0.1:1", "--nats", "nats://127.0.0.1:1", "--fleet", fleet},
		"dataplane":  {"--cluster", "fe-east", "--nats", "nats://127.0.0.1:1", "--fleet", fleet},
	}
	for name, args := range cmds {
		t.Run(name, func(t *testing.T) {
			code, out, _ := run(t, name, "--help")
			if code != 0 || !strings.Contains(out, "-log-level") || !strings.Contains(out, "-otlp") {
				t.Errorf("ilb %s --help: exit %d, lacks --log-level or --otlp:\n%s", name, code, out)
			}
			code, _, errOut := run(t, append([]string{name, "--log-level", "loud"}, args...)...)
			if code != 2 || !strings.Contains(errOut, `--log-level "loud"`) {
				t.Errorf("ilb %s --log-level loud: exit %d, stderr %q; want 2 naming the flag", name, code, errOut)
			}
		})
	}
}

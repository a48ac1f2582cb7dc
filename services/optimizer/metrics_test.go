package optimizer

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/telemetry"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// TestMetricNames checks the Prometheus names deploy/METRICS.md promises
// (and the dashboard queries) after one solve and publish, through the
// same telemetry setup the binary uses.
func TestMetricNames(t *testing.T) {
	ctx := testCtx(t, 20*time.Second)
	tel, err := telemetry.Setup(ctx, telemetry.DefaultConfig("optimizer-test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(ctx) })
	js := jetStream(t, streamstest.NATS(t))
	o, err := New(testConfig(schemas.ExampleFleetOneModel(), "opt-m"), Deps{JetStream: js, Meter: tel.Meter, Metrics: tel.MetricsHandler()})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.open(ctx); err != nil {
		t.Fatal(err)
	}
	o.cycle(ctx, true)
	if st := o.State(); st.Version != 1 || st.Publishes != 1 {
		t.Fatalf("one cycle: version %d, %d publishes (last error %q)", st.Version, st.Publishes, st.LastError)
	}
	rec := httptest.NewRecorder()
	o.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	text := string(body)
	for _, want := range []string{
		`ilb_optimizer_solve_duration_seconds_bucket{le="0.001"}`,
		`ilb_optimizer_solve_duration_seconds_bucket{le="10"}`,
		`ilb_optimizer_solve_duration_seconds_count 1`,
		`ilb_optimizer_snapshot_version 1`,
		`ilb_optimizer_publish_total{result="ok"} 1`,
		`ilb_optimizer_objective_ms `,
		`ilb_optimizer_shed_fraction{cluster="fe-west"}`,
		`ilb_optimizer_capacity_rps{engine="east-h100-0"}`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", grepLines(text, "ilb_optimizer"))
	}
}

func grepLines(text, substr string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

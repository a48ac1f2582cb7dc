package integration

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestBinary builds the ilb binary once (skipped under -short) and runs
// the tests that need it as separate processes: the fault run below, the
// secrets check of security_logs_test.go, the real Prometheus of
// prometheus_test.go and the live fleet changes of livefleet_test.go.
func TestBinary(t *testing.T) {
	bin := buildILB(t)
	t.Run("FaultOptimizerKillAndBrokerRestart", func(t *testing.T) { faultProcesses(t, bin) })
	t.Run("SecurityNoSecretsInOutput", func(t *testing.T) { securityNoSecrets(t, bin) })
	t.Run("FaultNATSLeaderKilled", func(t *testing.T) { faultNATSLeaderKilled(t, bin) })
	t.Run("FaultNATSNodePartitioned", func(t *testing.T) { faultNATSNodePartitioned(t, bin) })
	t.Run("FaultAggregatorRebalance", func(t *testing.T) { faultAggregatorRebalance(t, bin) })
	t.Run("Prometheus", func(t *testing.T) { prometheusScrape(t, bin) })
	t.Run("LiveFleet", func(t *testing.T) { liveFleet(t, bin) })
	t.Run("PendingSync", func(t *testing.T) { pendingSyncProcesses(t, bin) })
}

// faultProcesses is the acceptance run, done as a new user would do it by hand (deploy/README.md,
// "Running the services as processes"): the ilb binary is built once, then
// `ilb brokers --data-dir`, `ilb engine-sim`, `ilb aggregator`,
// `ilb optimizer` and `ilb dataplane` run as separate processes, talking
// over real TCP. A client asks the data plane for a pick every 20 ms
// throughout. Then:
//
//  1. the optimizer is killed with SIGKILL: for 3 s every pick succeeds,
//     the version holds, the snapshot's age rises past --stale-after and
//     the data plane says stale; a new optimizer (another --id) takes over
//     once the dead one's lease has run out and publishes a newer version;
//  2. `ilb brokers` is stopped and, 2 s later, started again on the same
//     ports with the same --data-dir: every pick still succeeds, every
//     service reconnects by itself, and the data plane gets a version newer
//     than before the restart from the bucket that survived on disk.
//
// Meanwhile each service's HTTP server cuts off a client that never
// finishes its request header (5 s header timeout); afterwards each still
// answers, rejects a 100 KiB header (431), and every process exits 0 on
// SIGTERM. Lost: nothing (zero
// failed picks, versions never went back).
func faultProcesses(t *testing.T, bin string) {
	dir := t.TempDir()
	brokers := startProc(t, bin, "brokers", "brokers", "--kafka-listen", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0",
		"--data-dir", filepath.Join(dir, "state"))
	kafkaAddr := brokers.waitMatch(t, `kafka: (\S+)`)[1]
	natsURL := brokers.waitMatch(t, `nats: (\S+)`)[1]
	brokers.waitMatch(t, `ready;`)
	plain := filepath.Join(dir, "fleet.yaml")
	writeFile(t, plain, smallFleet)

	sim := startProc(t, bin, "engine-sim", "engine-sim", "--kafka", kafkaAddr, "--fleet", plain, "--http", "127.0.0.1:0",
		"--time-scale", "10", "--status-interval", "200ms")
	simAddr := sim.waitMatch(t, `listening on http://(\S+)`)[1]
	withURLs := filepath.Join(dir, "fleet-urls.yaml")
	writeFile(t, withURLs, smallFleetWithURLs(simAddr))

	agg := startProc(t, bin, "aggregator", "aggregator", "--kafka", kafkaAddr, "--fleet", plain, "--window", "1s",
		"--http", "127.0.0.1:0", "--log-level", "warn")
	aggAddr := agg.waitMatch(t, `features on http://([^/\s]+)`)[1]
	optArgs := func(id string) []string {
		return []string{"optimizer", "--kafka", kafkaAddr, "--nats", natsURL, "--fleet", plain, "--id", id,
			"--min-interval", "200ms", "--max-interval", "1s", "--lease", "2s", "--http", "127.0.0.1:0"}
	}
	opt := startProc(t, bin, "optimizer-1", optArgs("opt-1")...)
	optAddr := opt.waitMatch(t, `state on http://([^/\s]+)`)[1]
	dp := startProc(t, bin, "dataplane", "dataplane", "--cluster", "fe-a", "--kafka", kafkaAddr, "--nats", natsURL,
		"--fleet", withURLs, "--http", "127.0.0.1:0", "--stale-after", "2s")
	dpURL := "http://" + dp.waitMatch(t, `on http://(\S+) \(weights`)[1]

	servers := map[string]string{"engine-sim": simAddr, "aggregator": aggAddr, "optimizer": optAddr,
		"dataplane": strings.TrimPrefix(dpURL, "http://")}
	slow := slowClients(servers, "engine-sim", "aggregator", "dataplane")

	c := httpClient(t, 5*time.Second)
	waitUntil(t, 30*time.Second, "the first snapshot at the data plane", func() bool { return routingOK(c, dpURL) })
	picks := startPicks(t, dpURL, "fe-a", 20*time.Millisecond, 200)
	waitUntil(t, 15*time.Second, "version 3", func() bool { return routing(t, c, dpURL, "fe-a").Version >= 3 })

	// 1. kill -9 the optimizer.
	opt.kill(t)
	killed := routing(t, c, dpURL, "fe-a")
	time.Sleep(3 * time.Second)
	during := routing(t, c, dpURL, "fe-a")
	if during.Version != killed.Version || during.AgeSeconds-killed.AgeSeconds < 2.5 || !during.Stale {
		t.Errorf("optimizer dead 3 s: v%d → v%d, age %.1f → %.1f s, stale %v; want the version held, the age rising and stale",
			killed.Version, during.Version, killed.AgeSeconds, during.AgeSeconds, during.Stale)
	}
	killedAt := time.Now().Add(-3 * time.Second)
	opt2 := startProc(t, bin, "optimizer-2", optArgs("opt-2")...)
	servers["optimizer"] = opt2.waitMatch(t, `state on http://([^/\s]+)`)[1]
	slow["optimizer"] = slowClients(servers, "optimizer")["optimizer"]
	waitUntil(t, 20*time.Second, "the new optimizer's snapshot", func() bool {
		return routing(t, c, dpURL, "fe-a").Version > killed.Version
	})
	afterTakeover := picks.counts()
	takeover := time.Since(killedAt)

	// 2. restart the brokers on the same ports and data directory.
	beforeRestart := routing(t, c, dpURL, "fe-a").Version
	brokers.stop(t)
	time.Sleep(2 * time.Second)
	natsPort := natsURL[strings.LastIndex(natsURL, ":")+1:]
	brokers = startProc(t, bin, "brokers-2", "brokers", "--kafka-listen", kafkaAddr, "--nats-listen", "127.0.0.1:"+natsPort,
		"--data-dir", filepath.Join(dir, "state"))
	brokers.waitMatch(t, `ready;`)
	restartedAt := time.Now()
	var recovered uint64
	waitUntil(t, 30*time.Second, "a version newer than before the broker restart", func() bool {
		recovered = routing(t, c, dpURL, "fe-a").Version
		return recovered > beforeRestart
	})
	caughtUp := time.Since(restartedAt)
	picks.stop()
	pc := picks.counts()
	pc.check(t)

	for _, name := range sortedKeys(servers) {
		checkHeaderLimit(t, name, servers[name])
	}
	for _, name := range sortedKeys(slow) {
		if r := <-slow[name]; r.err != nil {
			t.Errorf("%s: a client that never finishes its header: %v (the header timeout is 5 s)", name, r.err)
		} else {
			t.Logf("%s cut a slow-header client off after %v", name, r.took.Round(100*time.Millisecond))
		}
	}
	for _, p := range []*proc{dp, opt2, agg, sim, brokers} {
		if code := p.stop(t); code != 0 {
			t.Errorf("%s exited with status %d on SIGTERM, want 0", p.name, code)
		}
	}
	t.Logf("processes: %d picks, %d failed, %d version regressions; optimizer SIGKILLed at v%d (age %.1f → %.1f s, stale), new version %v after the kill (%d picks by then); brokers down 2 s at v%d, v%d at the data plane %v after they were back",
		pc.Sent, pc.Failed, pc.WentBack, killed.Version, killed.AgeSeconds, during.AgeSeconds, takeover.Round(100*time.Millisecond),
		afterTakeover.Sent, beforeRestart, recovered, caughtUp.Round(100*time.Millisecond))
}

// cutOff is when a server closed a slow-header connection.
type cutOff struct {
	took time.Duration
	err  error
}

// slowClients starts one slow-header client for each named server; each
// channel gets its result.
func slowClients(servers map[string]string, names ...string) map[string]chan cutOff {
	out := map[string]chan cutOff{}
	for _, name := range names {
		addr := servers[name]
		ch := make(chan cutOff, 1)
		out[name] = ch
		go func() {
			took, err := slowHeaderCutOff(addr, 10*time.Second)
			ch <- cutOff{took, err}
		}()
	}
	return out
}

// smallFleetWithURLs is smallFleet with each engine's URL on the
// engine-sim at simAddr, for `ilb dataplane --fleet`.
func smallFleetWithURLs(simAddr string) string {
	var b strings.Builder
	b.WriteString(smallFleetHead)
	for i := range 3 {
		fmt.Fprintf(&b, "  - {name: e-%d, region: r, %s, url: http://%s/engines/e-%d}\n", i, smallEngine, simAddr, i)
	}
	return b.String()
}

// routingOK reports whether the data plane answers /v1/routing with a
// snapshot (no test failure while it starts).
func routingOK(c *http.Client, base string) bool {
	resp, err := c.Get(base + "/v1/routing?cluster=fe-a")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"ready":true`)
}

// checkHeaderLimit sends a request with a 100 KiB header: every ilb HTTP
// server caps headers at 64 KiB and must answer 431.
func checkHeaderLimit(t *testing.T, name, addr string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/healthz", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Big", strings.Repeat("b", 100<<10))
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Errorf("%s: request with a large header: %v", name, err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("%s answered a 100 KiB header with %d, want 431", name, resp.StatusCode)
	}
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// buildILB builds the ilb binary into the test's temporary directory. It
// skips the test under -short.
func buildILB(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the ilb binary and runs the services as separate processes (about a minute); not with -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "ilb")
	start := time.Now()
	cmd := exec.Command(goTool, "build", "-o", bin, "github.com/ilb-router/ilb/services/ilb")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("built %s in %v", bin, time.Since(start).Round(100*time.Millisecond))
	return bin
}

// proc is one ilb process; its stdout and stderr are kept.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *logSink
	done chan struct{}
	once sync.Once
	code int
}

// startProc runs bin with args; the test's cleanup stops it.
func startProc(t *testing.T, bin, name string, args ...string) *proc {
	t.Helper()
	return startProcEnv(t, bin, name, nil, args...)
}

// startProcEnv is startProc with extra environment variables.
func startProcEnv(t *testing.T, bin, name string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, out: &logSink{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		err := p.cmd.Wait()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			p.code = ee.ExitCode()
		case err != nil:
			p.code = -1
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("%s output:\n%s", p.name, lastLines(p.out.String(), 40))
		}
	})
	return p
}

// waitMatch waits up to 30 s for the process to print a line matching
// pattern and returns the submatches.
func (p *proc) waitMatch(t *testing.T, pattern string) []string {
	t.Helper()
	re := regexp.MustCompile(pattern)
	var m []string
	waitUntil(t, 30*time.Second, fmt.Sprintf("%s to print %q", p.name, pattern), func() bool {
		select {
		case <-p.done:
			t.Fatalf("%s exited (status %d) before printing %q:\n%s", p.name, p.code, pattern, p.out.String())
		default:
		}
		m = re.FindStringSubmatch(p.out.String())
		return m != nil
	})
	return m
}

// kill sends SIGKILL and waits for the process to go.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	p.once.Do(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
}

// stop sends SIGTERM, waits up to 20 s (then kills), and returns the exit
// status. Stopping a stopped process returns its status.
func (p *proc) stop(t testing.TB) int {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			t.Errorf("%s did not exit within 20 s of SIGTERM", p.name)
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p.code
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

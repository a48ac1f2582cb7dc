package dataplane

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The proxy's load harness with the engine and the data plane each in a
// process of its own (the test binary re-executed, GOMAXPROCS=1), so that
// the data plane's figures are not those of a process it shares with its
// load: BenchmarkProxySplit.

// helperStreamEnv, set to "CHUNKS/GAP" (e.g. "8/50ms"), makes the test
// binary a streaming engine process (streamHandler) instead of running
// tests.
const helperStreamEnv = "ILB_DATAPLANE_HELPER_STREAM"

// Command prefixes for the helper processes, for measuring them from
// outside (e.g. "strace -c -f -o /tmp/plane.strace", "taskset -c 1").
const (
	planeWrapEnv  = "ILB_DATAPLANE_BENCH_PLANE_WRAP"
	engineWrapEnv = "ILB_DATAPLANE_BENCH_ENGINE_WRAP"
	planeProcsEnv = "ILB_DATAPLANE_BENCH_PLANE_PROCS" // the data plane's GOMAXPROCS; default 1
)

// runHelperEngine serves streamHandler on loopback, prints its address
// and stops when stdin closes (or after helperLife).
func runHelperEngine(spec string) int {
	cs, gs, _ := strings.Cut(spec, "/")
	chunks, err1 := strconv.Atoi(cs)
	gap, err2 := time.ParseDuration(gs)
	ln, err3 := net.Listen("tcp", "127.0.0.1:0")
	if err1 != nil || err2 != nil || err3 != nil {
		fmt.Fprintln(os.Stderr, "helper engine:", spec, err1, err2, err3)
		return 1
	}
	srv := &http.Server{Handler: streamHandler(chunks, gap), ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 1 << 16}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("listening %s\n", ln.Addr())
	helperCommands(nil)
	_ = srv.Close()
	return 0
}

// helper is a child process of the test binary serving HTTP on loopback.
type helper struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	url string
}

// startHelper runs the test binary with env added (a helper role) under
// the command prefix in the environment variable wrap, waits for its
// address, and stops it when the benchmark ends: stdin closed, then killed
// if it has not exited within 10 s.
func startHelper(tb testing.TB, wrap string, env ...string) *helper {
	tb.Helper()
	args := append(strings.Fields(os.Getenv(wrap)), os.Args[0], "-test.run=^$")
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	in, err1 := cmd.StdinPipe()
	out, err2 := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil || err1 != nil || err2 != nil {
		tb.Fatal(err, err1, err2)
	}
	h := &helper{cmd: cmd, in: in, out: bufio.NewReader(out)}
	tb.Cleanup(h.stop)
	line, err := h.out.ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		tb.Fatalf("helper said %q: %v", line, err)
	}
	h.url = "http://" + addr
	return h
}

func (h *helper) stop() {
	_ = h.in.Close()
	done := make(chan struct{})
	go func() { _ = h.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = h.cmd.Process.Kill()
		<-done
	}
}

// ask sends one command and returns the answer line.
func (h *helper) ask(cmd string) (string, error) {
	if _, err := io.WriteString(h.in, cmd+"\n"); err != nil {
		return "", err
	}
	line, err := h.out.ReadString('\n')
	return strings.TrimSpace(line), err
}

// BenchmarkProxySplit is BenchmarkProxyStream with the engine and
// the data plane each in its own process with GOMAXPROCS=1 (the client,
// the benchmark itself, runs with -cpu): what the data plane adds to a
// streaming request's time to first byte, as the difference between the
// percentiles of requests through it and requests sent directly to the
// engine, in alternating rounds so that both see the same background
// load (added-p50-µs, added-p99-µs), and the data plane's own part timed
// inside its process (inProcess: own-p50-µs, own-p99-µs, and its in and
// out parts), with its CPU per request (plane-cpu-µs/req) and the time
// its threads were runnable but waited for a CPU (plane-runq-µs/req, from
// /proc: what the rest of the machine costs it). The cases are
// BenchmarkProxyStream's. ILB_DATAPLANE_BENCH_PLANE_PROCS sets the data
// plane's GOMAXPROCS; ILB_DATAPLANE_BENCH_PLANE_WRAP and
// ILB_DATAPLANE_BENCH_ENGINE_WRAP prefix a command to the helpers (strace,
// taskset). Linux only (/proc).
func BenchmarkProxySplit(b *testing.B) { runProxyCases(b, benchSplit) }

// splitRounds is how many alternating direct and proxied rounds a run
// makes.
const splitRounds = 4

func benchSplit(b *testing.B, conc int, gap time.Duration, header bool) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		b.Skip("needs /proc")
	}
	eng := startHelper(b, engineWrapEnv, helperStreamEnv+"=8/"+gap.String(), "GOMAXPROCS=1")
	procs := cmp.Or(os.Getenv(planeProcsEnv), "1")
	plane := startHelper(b, planeWrapEnv, helperEngineEnv+"="+eng.url, helperProbeEnv+"=1", "GOMAXPROCS="+procs)
	client := loadClient(conc)
	defer client.CloseIdleConnections()
	ctx := context.Background()
	warm := loadSpec{url: plane.url, conc: conc, requests: conc, header: header, deadline: time.Minute}
	runLoad(ctx, client, warm) // connections up on both hops
	warm.url = eng.url
	runLoad(ctx, client, warm)
	if _, err := plane.ask("reset"); err != nil {
		b.Fatal(err)
	}
	per := max(b.N, conc*splitRounds) / splitRounds
	var direct, proxied []time.Duration
	var wall time.Duration
	cpu0, err := cpuSeconds(plane.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	wait0, err := runQueueWait(plane.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range splitRounds {
		d := runLoad(ctx, client, loadSpec{url: eng.url, conc: conc, requests: per, header: header, deadline: time.Minute})
		p := runLoad(ctx, client, loadSpec{url: plane.url, conc: conc, requests: per, header: header, deadline: time.Minute})
		if d.errors+p.errors > 0 {
			b.Fatalf("%d direct and %d proxied errors", d.errors, p.errors)
		}
		direct, proxied, wall = append(direct, d.ttfb...), append(proxied, p.ttfb...), wall+p.wall
	}
	b.StopTimer()
	cpu1, _ := cpuSeconds(plane.cmd.Process.Pid)
	wait1, _ := runQueueWait(plane.cmd.Process.Pid)
	report, err := plane.ask("report")
	if err != nil {
		b.Fatal(err)
	}
	reportSplit(b, direct, proxied, report)
	b.ReportMetric((cpu1-cpu0)/float64(len(proxied))*1e6, "plane-cpu-µs/req")
	b.ReportMetric(float64(wait1-wait0)/1e3/float64(len(proxied)), "plane-runq-µs/req")
	b.ReportMetric(float64(len(proxied))/wall.Seconds(), "req/s")
}

// reportSplit reports the percentiles of direct and proxied, their
// differences, and the data plane's own parts from its probe report.
func reportSplit(b *testing.B, direct, proxied []time.Duration, report string) {
	slices.Sort(direct)
	slices.Sort(proxied)
	for _, q := range []struct {
		name string
		p    float64
	}{{"p50", 0.5}, {"p99", 0.99}} {
		dq, pq := percentile(direct, q.p), percentile(proxied, q.p)
		b.ReportMetric(float64(dq.Microseconds()), "direct-"+q.name+"-µs")
		b.ReportMetric(float64(pq.Microseconds()), "proxied-"+q.name+"-µs")
		b.ReportMetric(float64((pq - dq).Microseconds()), "added-"+q.name+"-µs")
	}
	var n int
	var v [6]int64
	if _, err := fmt.Sscan(report, &n, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]); err != nil || n == 0 {
		b.Fatalf("probe report %q: %v", report, err)
	}
	for i, name := range []string{"in-p50", "in-p99", "out-p50", "out-p99", "own-p50", "own-p99"} {
		b.ReportMetric(float64(v[i])/1e3, name+"-µs")
	}
}

// runQueueWait is the time the threads of process pid have spent runnable
// but waiting for a CPU (the second field of each thread's
// /proc/PID/task/TID/schedstat), so far: what the machine's other work
// costs the data plane. Threads that have exited are not counted.
func runQueueWait(pid int) (time.Duration, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			continue // exited meanwhile
		}
		if f := strings.Fields(string(b)); len(f) >= 2 {
			ns, _ := strconv.ParseInt(f[1], 10, 64)
			sum += time.Duration(ns)
		}
	}
	return sum, nil
}

// TestProxySplitSmoke runs BenchmarkProxySplit's harness briefly: the
// engine and the data plane as helper processes, 100 streams through the
// data plane, and the data plane's probe report covering every one of
// them, so that the benchmark does not rot between runs.
func TestProxySplitSmoke(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil || testing.Short() {
		t.Skip("needs /proc; not in -short")
	}
	eng := startHelper(t, engineWrapEnv, helperStreamEnv+"=4/0s", "GOMAXPROCS=1")
	plane := startHelper(t, planeWrapEnv, helperEngineEnv+"="+eng.url, helperProbeEnv+"=1", "GOMAXPROCS=1")
	client := loadClient(10)
	defer client.CloseIdleConnections()
	res := runLoad(context.Background(), client, loadSpec{url: plane.url, conc: 10, requests: 100, deadline: 30 * time.Second})
	if res.errors != 0 || len(res.ttfb) != 100 {
		t.Fatalf("%d errors, %d of 100 answered", res.errors, len(res.ttfb))
	}
	report, err := plane.ask("report")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if _, err := fmt.Sscan(report, &n); err != nil || n != 100 {
		t.Fatalf("probe report %q: %d requests timed, want 100 (%v)", report, n, err)
	}
}

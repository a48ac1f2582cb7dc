package dataplane

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"
)

// helperEngineEnv, set to an engine URL, makes the test binary a data
// plane process (runHelperPlane) instead of running tests.
const helperEngineEnv = "ILB_DATAPLANE_HELPER_ENGINE"

// helperProfileEnv names a file for the helper's CPU profile.
const helperProfileEnv = "ILB_DATAPLANE_HELPER_CPUPROFILE"

// runHelperPlane serves a data plane for fe-a over the one engine on
// loopback, prints its address, and stops when stdin closes.
func runHelperPlane(engine string) int {
	cfg := DefaultConfig()
	cfg.Clusters = []string{"fe-a"}
	cfg.EngineURLs = map[string]string{"eng-a": engine}
	d, err := New(cfg, Deps{})
	if err == nil {
		err = d.SetSnapshot(snap("fe-a", 1, map[string]float64{"eng-a": 1}))
	}
	ln, lerr := net.Listen("tcp", "127.0.0.1:0")
	if err != nil || lerr != nil {
		fmt.Fprintln(os.Stderr, "helper:", err, lerr)
		return 1
	}
	srv := &http.Server{Handler: d.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	if path := os.Getenv(helperProfileEnv); path != "" { // for finding what a request costs
		if f, err := os.Create(path); err == nil {
			_ = pprof.StartCPUProfile(f)
			defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
		}
	}
	fmt.Printf("listening %s\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = srv.Close()
	return 0
}

// cpuSeconds is a process's user+system CPU time from /proc (clock ticks
// of 1/100 s, Linux's USER_HZ).
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces) start at ")".
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parsing /proc/%d/stat", pid)
	}
	return (utime + stime) / 100, nil
}

// BenchmarkProxyOneCore runs the data plane in its own process with
// GOMAXPROCS=1 and drives streaming requests (8 events each, no gaps)
// through it, 64 at a time: req/cpu-s is the requests one core of data
// plane serves per second of its CPU (the most it sustains at one full
// core), req/s what this run reached with client and engine sharing the
// machine. Linux only (/proc).
func BenchmarkProxyOneCore(b *testing.B) {
	for _, header := range []bool{false, true} {
		name := "key=prompt"
		if header {
			name = "key=header"
		}
		b.Run(name, func(b *testing.B) { benchOneCore(b, header) })
	}
}

func benchOneCore(b *testing.B, header bool) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		b.Skip("needs /proc")
	}
	eng := streamEngine(b, 8, 0)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEngineEnv+"="+eng.URL, "GOMAXPROCS=1")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		b.Fatalf("helper said %q: %v", line, err)
	}
	url := "http://" + addr
	client := loadClient(64)
	defer client.CloseIdleConnections()
	ctx := context.Background()
	runLoad(ctx, client, loadSpec{url: url, conc: 64, requests: 500, header: header, deadline: time.Minute})
	n := max(b.N, 2000)
	before, err := cpuSeconds(cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	res := runLoad(ctx, client, loadSpec{url: url, conc: 64, requests: n, header: header, deadline: 5 * time.Minute})
	b.StopTimer()
	after, _ := cpuSeconds(cmd.Process.Pid)
	if res.errors > 0 {
		b.Fatalf("%d errors", res.errors)
	}
	cpu := after - before
	b.ReportMetric(float64(len(res.ttfb))/res.wall.Seconds(), "req/s")
	b.ReportMetric(float64(len(res.ttfb))/cpu, "req/cpu-s")
	b.ReportMetric(cpu/float64(len(res.ttfb))*1e6, "cpu-µs/req")
}

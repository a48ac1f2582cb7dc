package dataplane

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
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

// helperMemProfileEnv names a file for the helper's allocation profile
// (every allocation sampled), written when it stops.
const helperMemProfileEnv = "ILB_DATAPLANE_HELPER_MEMPROFILE"

// helperProbeEnv, set to 1, makes the helper data plane time its own part
// of each request (inProcess), reported on the "report" command.
const helperProbeEnv = "ILB_DATAPLANE_HELPER_PROBE"

// helperLife bounds a helper process's life even if nobody closes its
// stdin.
const helperLife = 15 * time.Minute

// runHelperPlane serves a data plane for fe-a over the one engine on
// loopback, prints its address, answers commands on stdin (helperCommands)
// and stops when stdin closes.
func runHelperPlane(engine string) int {
	cfg := DefaultConfig()
	cfg.Clusters = []string{"fe-a"}
	cfg.EngineURLs = map[string]string{"eng-a": engine}
	var probe *inProcess
	deps := Deps{}
	if os.Getenv(helperProbeEnv) == "1" {
		probe = &inProcess{}
		deps.Transport = probe.transport(newTransport(cfg))
	}
	d, err := New(cfg, deps)
	if err == nil {
		err = d.SetSnapshot(snap("fe-a", 1, map[string]float64{"eng-a": 1}))
	}
	ln, lerr := net.Listen("tcp", "127.0.0.1:0")
	if err != nil || lerr != nil {
		fmt.Fprintln(os.Stderr, "helper:", err, lerr)
		return 1
	}
	h := d.Handler()
	if probe != nil {
		h = probe.handler(h)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	if path := os.Getenv(helperProfileEnv); path != "" { // for finding what a request costs
		if f, err := os.Create(path); err == nil {
			_ = pprof.StartCPUProfile(f)
			defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
		}
	}
	if path := os.Getenv(helperMemProfileEnv); path != "" {
		runtime.MemProfileRate = 1
		defer func() {
			if f, err := os.Create(path); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				_ = f.Close()
			}
		}()
	}
	fmt.Printf("listening %s\n", ln.Addr())
	helperCommands(probe)
	_ = srv.Close()
	return 0
}

// helperCommands answers the parent's commands, one a line, until stdin
// closes or helperLife passes: "reset" forgets the probe's marks (answer
// "ok"), "report" prints the probe's parts (probeReport), "mallocs" the
// process's heap allocations so far.
func helperCommands(probe *inProcess) {
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	limit := time.After(helperLife)
	for {
		select {
		case <-limit:
			return
		case line, ok := <-lines:
			if !ok {
				return
			}
			switch {
			case line == "reset" && probe != nil:
				probe.reset()
				fmt.Println("ok")
			case line == "report" && probe != nil:
				fmt.Println(probeReport(probe))
			case line == "mallocs":
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				fmt.Println(ms.Mallocs)
			default:
				fmt.Println("ok")
			}
		}
	}
}

// probeReport is one line: the number of requests timed, then the p50 and
// p99 of the in, out and own parts in nanoseconds.
func probeReport(p *inProcess) string {
	in, out, own := p.sorted()
	return fmt.Sprintf("%d %d %d %d %d %d %d", len(own),
		percentile(in, 0.5), percentile(in, 0.99), percentile(out, 0.5), percentile(out, 0.99),
		percentile(own, 0.5), percentile(own, 0.99))
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
// machine, plane-allocs/req the data plane process's heap allocations a
// request (its net/http server and transport included). Linux only
// (/proc).
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
	plane := startHelper(b, planeWrapEnv, helperEngineEnv+"="+eng.URL, "GOMAXPROCS=1")
	cmd, url := plane.cmd, plane.url
	client := loadClient(64)
	defer client.CloseIdleConnections()
	ctx := context.Background()
	runLoad(ctx, client, loadSpec{url: url, conc: 64, requests: 500, header: header, deadline: time.Minute})
	n := max(b.N, 2000)
	before, err := cpuSeconds(cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	m0 := askCount(b, plane, "mallocs")
	b.ResetTimer()
	res := runLoad(ctx, client, loadSpec{url: url, conc: 64, requests: n, header: header, deadline: 5 * time.Minute})
	b.StopTimer()
	after, _ := cpuSeconds(cmd.Process.Pid)
	m1 := askCount(b, plane, "mallocs")
	if res.errors > 0 {
		b.Fatalf("%d errors", res.errors)
	}
	cpu := after - before
	b.ReportMetric(float64(len(res.ttfb))/res.wall.Seconds(), "req/s")
	b.ReportMetric(float64(len(res.ttfb))/cpu, "req/cpu-s")
	b.ReportMetric(cpu/float64(len(res.ttfb))*1e6, "cpu-µs/req")
	b.ReportMetric(float64(m1-m0)/float64(len(res.ttfb)), "plane-allocs/req")
}

// askCount sends cmd to h and parses the answer as a count.
func askCount(b *testing.B, h *helper, cmd string) uint64 {
	line, err := h.ask(cmd)
	if err != nil {
		b.Fatal(err)
	}
	n, err := strconv.ParseUint(line, 10, 64)
	if err != nil {
		b.Fatalf("%s: %q", cmd, line)
	}
	return n
}

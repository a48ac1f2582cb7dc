package integration

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ilb-router/ilb/services/enginesim"
)

// HTTP limits. Every ilb HTTP server is made by services/internal/run's
// Listen, which sets a 5 s header timeout (slow-header clients,
// "slowloris"), a 30 s whole-request read timeout, a 120 s idle timeout
// and a 64 KiB header cap; each handler also caps request bodies (data
// plane 1 MiB, engine simulator 8 MiB). TestSecurityHTTPServersUseRunListen
// keeps "every server" true by reading the source; the other checks run
// against real servers: below on the engine simulator in process, and in
// TestBinary/FaultOptimizerKillAndBrokerRestart on every service of the
// built binary (slow headers cut off, 431 for big headers).

// TestSecurityHTTPServersUseRunListen fails if any non-test Go file under
// services/ builds an http.Server or calls http.ListenAndServe, Serve or
// their TLS forms itself, except services/internal/run/http.go, so that
// no server can skip the limits.
func TestSecurityHTTPServersUseRunListen(t *testing.T) {
	const allowed = "services/internal/run/http.go"
	banned := map[string]bool{"ListenAndServe": true, "ListenAndServeTLS": true, "Serve": true, "ServeTLS": true}
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(repoPath("services"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, repoPath("")+string(filepath.Separator)))
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CompositeLit:
				if isSel(x.Type, "http", "Server") && rel != allowed {
					t.Errorf("%s: builds an http.Server; use run.Listen(run.DefaultHTTPConfig(addr), h) so the limits apply", fset.Position(x.Pos()))
				}
			case *ast.CallExpr:
				if s, ok := x.Fun.(*ast.SelectorExpr); ok && banned[s.Sel.Name] && isSel(s, "http", s.Sel.Name) {
					t.Errorf("%s: calls http.%s; use run.Listen so the limits apply", fset.Position(x.Pos()), s.Sel.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("read %d Go files under services/; the walk went wrong", files)
	}
}

func isSel(e ast.Expr, pkg, name string) bool {
	s, ok := e.(*ast.SelectorExpr)
	if !ok || s.Sel.Name != name {
		return false
	}
	id, ok := s.X.(*ast.Ident)
	return ok && id.Name == pkg
}

// TestSecurityHTTPLimits checks the limits on the engine simulator's real
// listener: a 100 KiB header gets 431, a body over 8 MiB gets 413 without
// the server reading it all, and a bad body gets 400, after which the
// server still serves.
func TestSecurityHTTPLimits(t *testing.T) {
	checkLeaks(t)
	_, log := newLogSink(t, slog.LevelWarn)
	sc := enginesim.DefaultConfig()
	sc.Fleet, sc.TimeScale, sc.Logger = parseFleet(t, smallFleet), 10, log
	sim, _ := startSim(t, sc, nil)
	base := sim.BaseURL("e-0")
	c := httpClient(t, 10*time.Second)

	req, _ := http.NewRequest(http.MethodGet, "http://"+sim.Addr()+"/healthz", nil)
	req.Header.Set("X-Big", strings.Repeat("h", 100<<10))
	if code := statusOf(t, c, req); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("100 KiB header: %d, want 431", code)
	}
	big := bytes.Repeat([]byte("x"), 9<<20)
	req, _ = http.NewRequest(http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(big))
	if code := statusOf(t, c, req); code != http.StatusRequestEntityTooLarge {
		t.Errorf("9 MiB body: %d, want 413", code)
	}
	req, _ = http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(`{"messages": 7}`))
	if code := statusOf(t, c, req); code != http.StatusBadRequest {
		t.Errorf("bad body: %d, want 400", code)
	}
	a, err := chat(t.Context(), c, base, "fe-a", "c", 3)
	if err != nil || a.Code != http.StatusOK {
		t.Errorf("a good request after the bad ones: %d, %v", a.Code, err)
	}
}

func statusOf(t *testing.T, c *http.Client, req *http.Request) int {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// slowHeaderCutOff opens a connection to addr, sends half a request
// header and then nothing, and reports how long the server took to close
// the connection (an error if it kept it open past limit).
func slowHeaderCutOff(addr string, limit time.Duration) (time.Duration, error) {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	start := time.Now()
	if _, err := fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: %s\r\nX-Slow: ", addr); err != nil {
		return 0, err
	}
	if err := conn.SetReadDeadline(start.Add(limit)); err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, conn) // returns when the server closes the connection
	took := time.Since(start)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return took, fmt.Errorf("connection still open after %v", limit)
	}
	return took, nil
}

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// cmdHealthcheck exists for container health checks: distroless images
// have no shell, curl or wget, so compose runs `ilb healthcheck --url`.
func cmdHealthcheck(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "healthcheck", "--url URL [--timeout 3s]",
		"GET URL and exit 0 on a 2xx answer, 1 otherwise (for container health checks).")
	url := fs.String("url", "http://127.0.0.1:8080/healthz", "URL to GET")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		return badInput("bad --url %q: %v", *url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("unhealthy: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("unhealthy: %s answered %s", *url, resp.Status)
	}
	fmt.Fprintf(e.stdout, "healthy: %s\n", resp.Status)
	return nil
}

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// cmdHealth asks a running worker's /readyz (or /healthz with --live) and exits 0 only when
// it answers 200: a container healthcheck or an exec probe that needs no curl in the image.
func cmdHealth(ctx context.Context, args []string) error {
	fs := newFlags("health")
	addr := fs.String("http", "127.0.0.1:9464", "the worker's metrics and health address (its --http)")
	live := fs.Bool("live", false, "ask /healthz (the process answers) instead of /readyz (it holds the lease and consumes)")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	if err := parse(fs, args); err != nil {
		return err
	}
	path := "/readyz"
	if *live {
		path = "/healthz"
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	url := "http://" + *addr + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return &usageError{msg: fmt.Sprintf("health --http %q: %v", *addr, err)}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	text := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %d: %s", url, resp.StatusCode, text)
	}
	fmt.Println(text)
	return nil
}

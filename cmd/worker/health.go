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
// It reads the worker's http setting as `run` does, so in the worker's own environment
// (OMNIGRAPH_HTTP, its --config file) it needs no flag.
func cmdHealth(fs *flagSet) runFunc {
	settings := bindSettings(fs, []string{"http"})
	live := fs.Bool("live", false, "ask /healthz (the process answers and can still write) instead of /readyz (it holds the lease and consumes)")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	return func(ctx context.Context, args []string) error {
		c, err := settings.load() // the worker's own http setting, from the same sources
		if err != nil {
			return err
		}
		if c.HTTP == "" {
			return &usageError{msg: "health needs the worker's --http address (its metrics are off when it is empty)"}
		}
		addr := &c.HTTP
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
}

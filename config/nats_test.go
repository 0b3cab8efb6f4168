package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// NATS_URL, the variable every NATS tool reads, is nats_url's fallback: OMNIGRAPH_NATS_URL and
// --nats-url win over it, and it wins over the default.
func TestNATSURLFallback(t *testing.T) {
	base := []string{"--root", "/r", "--graph", "g"}
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{base, map[string]string{"NATS_URL": "nats://n:1"}, "nats://n:1"},
		{base, map[string]string{"NATS_URL": "nats://n:1", "OMNIGRAPH_NATS_URL": "nats://o:2"}, "nats://o:2"},
		{append(base, "--nats-url", "nats://f:3"), map[string]string{"NATS_URL": "nats://n:1"}, "nats://f:3"},
		{base, nil, ""},
	}
	for _, c := range cases {
		got, err := Load(c.args, env(c.env))
		if err != nil || got.NATSURL != c.want {
			t.Errorf("%v %v: nats_url %q, %v; want %q", c.args, c.env, got.NATSURL, err, c.want)
		}
	}
}

// A NATS URL nats.Connect would misread, and a port no server can take, are refused at load
// (before anything is initialised), naming the setting and where the value came from.
func TestNATSSettingsRefused(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "worker.yaml")
	_ = os.WriteFile(file, []byte("root: /r\ngraph: g\nnats_url: nats://\n"), 0o644)
	broken := filepath.Join(dir, "broken.yaml")
	_ = os.WriteFile(broken, []byte("root: [\n"), 0o644)
	base := []string{"--root", "/r", "--graph", "g"}
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{append(base, "--nats-url", "htp://x:4222"), nil, `config nats_url (from --nats-url): "htp://x:4222": want a nats://, tls://, ws:// or wss:// URL`},
		{base, map[string]string{"NATS_URL": "localhost"}, `config nats_url (from NATS_URL): "localhost": want a nats://`},
		{base, map[string]string{"OMNIGRAPH_NATS_URL": "nats://a:1, ws://b:2,http://c"}, `config nats_url (from OMNIGRAPH_NATS_URL): "http://c"`},
		{[]string{"--config", file}, nil, `config nats_url (from ` + file + ` line 3): "nats://" has no host`},
		{base, map[string]string{"OMNIGRAPH_NATS_PORT": "99999"}, "config nats_port (from OMNIGRAPH_NATS_PORT): must be a port from 1 to 65535, or -1"},
		{append(base, "--nats-port", "-2"), nil, "config nats_port (from --nats-port): must be a port"},
		{[]string{"--config", broken}, nil, "config file " + broken + ": yaml:"},
	}
	for _, c := range cases {
		_, err := Load(c.args, env(c.env))
		var ce *Error
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &ce) {
			t.Errorf("%v %v: got %v, want %q", c.args, c.env, err, c.want)
		}
	}
	for _, ok := range []string{"nats://a:1", "tls://a:1,wss://b", "nats://u:p@a:1, ws://b:2"} {
		if err := CheckNATSURL(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
}

// The stream limits reach ingest.Config; a negative one is refused with its source.
func TestStreamLimits(t *testing.T) {
	c, err := Load([]string{"--root", "/r", "--graph", "g", "--stream-max-age", "24h", "--dlq-max-bytes", "1048576"},
		env(map[string]string{"OMNIGRAPH_STREAM_MAX_BYTES": "1073741824", "OMNIGRAPH_DLQ_MAX_AGE": "168h"}))
	if err != nil {
		t.Fatal(err)
	}
	ic := c.Ingest()
	if ic.StreamMaxAge != 24*time.Hour || ic.StreamMaxBytes != 1<<30 || ic.DLQMaxAge != 168*time.Hour || ic.DLQMaxBytes != 1<<20 {
		t.Fatalf("%+v", ic)
	}
	if _, err := Load([]string{"--root", "/r", "--graph", "g", "--stream-max-bytes", "-5"}, env(nil)); err == nil ||
		!strings.Contains(err.Error(), "config stream_max_bytes (from --stream-max-bytes): must be 0") {
		t.Fatalf("err %v", err)
	}
	if d := Defaults(); d.StreamMaxAge != 0 || d.StreamMaxBytes != 0 || d.DLQMaxAge != 0 || d.DLQMaxBytes != 0 {
		t.Fatalf("defaults %+v", d)
	}
}

// nats_sync_interval: always by default; a duration from each source relaxes it; anything else
// is refused naming the setting and its source.
func TestNATSSyncInterval(t *testing.T) {
	base := []string{"--root", "/r", "--graph", "g"}
	dir := t.TempDir()
	file := filepath.Join(dir, "worker.yaml")
	_ = os.WriteFile(file, []byte("root: /r\ngraph: g\nnats_sync_interval: 30s\n"), 0o644)
	for _, c := range []struct {
		args []string
		env  map[string]string
		want time.Duration
	}{
		{base, nil, 0},
		{append(base, "--nats-sync-interval", "2m"), nil, 2 * time.Minute},
		{base, map[string]string{"OMNIGRAPH_NATS_SYNC_INTERVAL": "Always"}, 0},
		{base, map[string]string{"OMNIGRAPH_NATS_SYNC_INTERVAL": "1s"}, time.Second},
		{[]string{"--config", file}, nil, 30 * time.Second},
	} {
		cfg, err := Load(c.args, env(c.env))
		if err != nil {
			t.Fatalf("%v %v: %v", c.args, c.env, err)
		}
		if d, err := SyncInterval(cfg.NATSSyncInterval); err != nil || d != c.want {
			t.Errorf("%v %v: %q = %v (%v), want %v", c.args, c.env, cfg.NATSSyncInterval, d, err, c.want)
		}
	}
	for _, bad := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{append(base, "--nats-sync-interval", "never"), nil, `config nats_sync_interval (from --nats-sync-interval): "never": want always or a positive duration like 2m`},
		{base, map[string]string{"OMNIGRAPH_NATS_SYNC_INTERVAL": "0s"}, `config nats_sync_interval (from OMNIGRAPH_NATS_SYNC_INTERVAL): "0s"`},
	} {
		if _, err := Load(bad.args, env(bad.env)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v %v: got %v, want %q", bad.args, bad.env, err, bad.want)
		}
	}
}

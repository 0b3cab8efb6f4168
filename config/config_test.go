package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestPrecedenceFileEnvFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "w.yaml")
	if err := os.WriteFile(file, []byte("root: /from/file\ngraph: filegraph\nack_wait: 45s\nmax_deliver: 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load([]string{"--config", file, "--graph", "flaggraph"}, env(map[string]string{"OMNIGRAPH_GRAPH": "envgraph", "OMNIGRAPH_MAX_DELIVER": "5"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Root != "/from/file" || c.Graph != "flaggraph" || c.MaxDeliver != 5 || c.AckWait != 45*time.Second || c.LeaseTTL != 10*time.Second || c.GCPercent != 400 || c.CompactionFanout != 16 || c.RetryBudget != 10*time.Minute {
		t.Fatalf("%+v", c)
	}
	c, err = Load(nil, env(map[string]string{"OMNIGRAPH_CONFIG": file}))
	if err != nil || c.Graph != "filegraph" {
		t.Fatalf("OMNIGRAPH_CONFIG: %+v %v", c, err)
	}
}

func TestClearErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	_ = os.WriteFile(bad, []byte("root: /r\ngraph: g\nack_wiat: 5s\n"), 0o644)
	emptyKey := filepath.Join(dir, "empty-key.yaml")
	_ = os.WriteFile(emptyKey, []byte("root: /r\n'': 1\n"), 0o644)
	badRoot := filepath.Join(dir, "root.yaml")
	_ = os.WriteFile(badRoot, []byte("root: s3://\n"), 0o644)
	badDur := filepath.Join(dir, "dur.yaml")
	_ = os.WriteFile(badDur, []byte("root: /r\ngraph: g\n\nack_wait: soon\n"), 0o644)
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, nil, "config root: is required"},
		{[]string{"--root", "/r", "--graph", "a.b"}, nil, `config graph (from --graph): "a.b" must be one NATS subject token`},
		{[]string{"--root", "/r", "--graph", "g", "--ack-wait", "10"}, nil, "config ack_wait (from --ack-wait): want a duration"},
		{[]string{"--root", "/r"}, map[string]string{"OMNIGRAPH_GRAPH": "g", "OMNIGRAPH_MAX_DELIVER": "x"}, "config max_deliver (from OMNIGRAPH_MAX_DELIVER): want a whole number"},
		{[]string{"--config", bad}, nil, "config ack_wiat (from " + bad + " line 3): unknown setting"},
		{[]string{"--config", emptyKey}, nil, `config "" (from ` + emptyKey + " line 2): unknown setting"},
		{[]string{"--config", badDur}, nil, "config ack_wait (from " + badDur + " line 4): want a duration"},
		{[]string{"--root", "/r", "--graph", "g", "--nats-cert", "c"}, nil, "nats_cert and nats_key go together"},
		{[]string{"--root", "/r", "--graph", "g", "--gc-percent", "0"}, nil, "config gc_percent (from --gc-percent): must be -1 (off) or a positive percentage"},
		{[]string{"--root", "/r", "--graph", "g"}, map[string]string{"OMNIGRAPH_COMPACTION_FANOUT": "1"}, "config compaction_fanout (from OMNIGRAPH_COMPACTION_FANOUT): must be 0 (off) or at least 2"},
		{[]string{"--root", "/r", "--graph", "g", "--pipeline-depth", "0"}, nil, "config pipeline_depth (from --pipeline-depth): must be at least 1"},
		{[]string{"--root", "/r", "--graph", "g"}, map[string]string{"OMNIGRAPH_PIPELINE_BYTES": "-1"}, "config pipeline_bytes (from OMNIGRAPH_PIPELINE_BYTES): must be at least 1"},
		{[]string{"--root", "/r", "--graph", "g", "--retry-budget", "500ms"}, nil, "config retry_budget (from --retry-budget): must be at least 1s"},
		{[]string{"--root", "/r", "--graph", "g"}, map[string]string{"OMNIGRAPH_RETRY_BUDGET": "ten"}, "config retry_budget (from OMNIGRAPH_RETRY_BUDGET): want a duration"},
		{[]string{"--root", "/r", "--graph", "g", "--lance-file-version", "2.3"}, nil, "config lance_file_version (from --lance-file-version): lance file version 2.3: this build cannot write it"},
		{[]string{"--root", "/r", "--graph", "g"}, map[string]string{"OMNIGRAPH_LANCE_FILE_VERSION": "v2"}, `config lance_file_version (from OMNIGRAPH_LANCE_FILE_VERSION): lance file version "v2": want major.minor`},
		// A root is parsed strictly, wherever it comes from (storage.CheckURI).
		{[]string{"--root", "s3:/bucket/x", "--graph", "g"}, nil, `config root (from --root): "s3:/bucket/x": malformed s3 URI: want s3://bucket`},
		{[]string{"--graph", "g"}, map[string]string{"OMNIGRAPH_ROOT": "foo://x"}, `config root (from OMNIGRAPH_ROOT): "foo://x": unsupported scheme "foo"`},
		{[]string{"--config", badRoot, "--graph", "g"}, nil, `config root (from ` + badRoot + ` line 1): "s3://": missing bucket name`},
		// nats_port 0 would be the server's default port in disguise; http must be host:port.
		{[]string{"--root", "/r", "--graph", "g", "--nats-port", "0"}, nil, "config nats_port (from --nats-port): must be a port from 1 to 65535, or -1"},
		{[]string{"--root", "/r", "--graph", "g", "--http", "9464"}, nil, `config http (from --http): "9464": want host:port`},
		{[]string{"--root", "/r", "--graph", "g"}, map[string]string{"OMNIGRAPH_HTTP": "127.0.0.1:99999"}, `config http (from OMNIGRAPH_HTTP): "127.0.0.1:99999": port "99999" is not a port from 0 to 65535`},
	}
	for _, c := range cases {
		_, err := Load(c.args, env(c.env))
		var ce *Error
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &ce) {
			t.Errorf("%v %v: got %v, want %q", c.args, c.env, err, c.want)
		}
	}
}

// TestLanceFileVersion: every version this build writes is accepted from flags and YAML.
func TestLanceFileVersion(t *testing.T) {
	for _, v := range []string{"2.0", "2.1", "2.2"} {
		f := filepath.Join(t.TempDir(), "w.yaml")
		if err := os.WriteFile(f, []byte("root: /r\ngraph: g\nlance_file_version: \""+v+"\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := Load([]string{"--config", f}, env(nil))
		writable := err == nil
		if _, ferr := FileVersion(v); (ferr == nil) != writable {
			t.Fatalf("%s: config %v, FileVersion %v", v, err, ferr)
		}
		if writable && c.LanceFileVersion != v {
			t.Fatalf("%s: got %q", v, c.LanceFileVersion)
		}
	}
}

func TestRetryBudgetFromEverySource(t *testing.T) {
	file := filepath.Join(t.TempDir(), "w.yaml")
	if err := os.WriteFile(file, []byte("root: /r\ngraph: g\nretry_budget: 3m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		env  map[string]string
		want time.Duration
	}{
		{[]string{"--config", file}, nil, 3 * time.Minute},
		{[]string{"--config", file}, map[string]string{"OMNIGRAPH_RETRY_BUDGET": "90s"}, 90 * time.Second},
		{[]string{"--config", file, "--retry-budget", "2s"}, map[string]string{"OMNIGRAPH_RETRY_BUDGET": "90s"}, 2 * time.Second},
	} {
		got, err := Load(c.args, env(c.env))
		if err != nil || got.RetryBudget != c.want {
			t.Errorf("%v %v: %v %v, want %v", c.args, c.env, got, err, c.want)
		}
	}
}

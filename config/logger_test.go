package config

import (
	"bytes"
	"encoding/json"
	stdlog "log"
	"strings"
	"testing"
	"time"
)

// The logger logs at log_level and above, with ISO-8601 timestamps, and takes the standard
// log package's lines (third-party libraries') as JSON too, until restored.
func TestLogger(t *testing.T) {
	c, err := Load([]string{"--root", "r", "--graph", "g"}, env(map[string]string{"OMNIGRAPH_LOG_LEVEL": "warn"}))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log, restore, err := c.Logger(&buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown")
	stdlog.Print("from a library")
	restore()
	stdlog.SetOutput(&bytes.Buffer{}) // the test's own std log must not reach buf either way
	stdlog.Print("after restore")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want the warn line and the library's line, got %q", buf.String())
	}
	for i, want := range []string{"shown", "from a library"} {
		var e map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &e); err != nil {
			t.Fatalf("line %q is not JSON: %v", lines[i], err)
		}
		if e["msg"] != want {
			t.Errorf("line %d msg %v, want %q", i, e["msg"], want)
		}
		ts, _ := e["ts"].(string)
		if _, err := time.Parse("2006-01-02T15:04:05.000Z0700", ts); err != nil {
			t.Errorf("ts %v is not ISO-8601: %v", e["ts"], err)
		}
	}
}

func TestLogLevelRefused(t *testing.T) {
	_, err := Load([]string{"--root", "r", "--graph", "g", "--log-level", "loud"}, env(nil))
	if err == nil || !strings.Contains(err.Error(), "log_level") || !strings.Contains(err.Error(), "want debug, info, warn or error") {
		t.Fatalf("err %v", err)
	}
	if c := Defaults(); c.LogLevel != "info" {
		t.Fatalf("default log_level %q", c.LogLevel)
	}
}
